package api

import "time"

// GET /v1/monitor/events carries deltas: a "snapshot" frame with
// everything, then a "placement" frame per placement event with only the
// event (its lease, as it is after the change, is the delta), an
// "accounts" frame after a burst of events (each GPU's accounting), a
// "readings" frame at each new GPU reading (each GPU's reading and
// accounting, the held memory and the per-uid use, no leases), and a full "gpus" frame now
// and then (every few seconds while anything changes) that a client adopts
// whole. The cost of a frame thus does not
// grow with the number of leases, except the rare full ones. A client
// rebuilds the lease lists from the events (client.Monitor does, and the
// monitor page, daemon/httpapi/ui/monitor.js, by the same rules).

// MonitorSnapshot is the first frame ("snapshot") of GET /v1/monitor/events.
type MonitorSnapshot struct {
	GPUs   GPUs   `json:"gpus"`
	Jobs   []Job  `json:"jobs"`
	Status Status `json:"status"`
}

// MonitorPlacement is a "placement" frame: a placement event. GPUs is not
// sent: client.Monitor fills it with the GPUs as the client rebuilt them
// after the event.
type MonitorPlacement struct {
	Event Event `json:"event"`
	GPUs  GPUs  `json:"-"`
}

// MonitorAccounts is an "accounts" frame: each GPU's accounting after a
// burst of placement events.
type MonitorAccounts struct {
	Accounts []Account `json:"accounts"`
}

// MonitorReadings is a "readings" frame: each GPU's new reading and
// accounting, and the memory held for blocked requests, without leases.
type MonitorReadings struct {
	Taken time.Time    `json:"taken"`
	GPUs  []MonitorGPU `json:"gpus"`
	Held  []Hold       `json:"held"`
	// UIDs is each uid's holdings, use and share, as in GPUs.
	UIDs []UIDUse `json:"uids"`
}

// MonitorGPU is one GPU in a "readings" frame.
type MonitorGPU struct {
	GPUReading
	Accounting Account `json:"accounting"`
	HeldBytes  int64   `json:"held_bytes"`
}

// MonitorFrame is one frame of GET /v1/monitor/events, decoded: exactly one
// field is set, by the frame's type (snapshot; placement; gpus, for a full
// "gpus" frame and for an "accounts" or "readings" frame applied to the
// GPUs the client holds; job).
type MonitorFrame struct {
	Snapshot  *MonitorSnapshot
	Placement *MonitorPlacement
	GPUs      *GPUs
	Job       *JobEvent
}
