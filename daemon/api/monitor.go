package api

// MonitorSnapshot is the first frame ("snapshot") of GET /v1/monitor/events.
type MonitorSnapshot struct {
	GPUs   GPUs   `json:"gpus"`
	Jobs   []Job  `json:"jobs"`
	Status Status `json:"status"`
}

// MonitorPlacement is a "placement" frame: a placement event and the GPUs
// after it.
type MonitorPlacement struct {
	Event Event `json:"event"`
	GPUs  GPUs  `json:"gpus"`
}

// MonitorFrame is one frame of GET /v1/monitor/events, decoded: exactly one
// field is set, by the frame's type (snapshot, placement, gpus, job).
type MonitorFrame struct {
	Snapshot  *MonitorSnapshot
	Placement *MonitorPlacement
	GPUs      *GPUs
	Job       *JobEvent
}
