package api

// JobRequest is the JSON body of POST /v1/jobs, or the fields of a
// multipart/form-data upload whose "file" part is the audio.
type JobRequest struct {
	// AudioPath is a file on the daemon's machine that the client may read
	// (Unix socket only).
	AudioPath   string  `json:"audio_path,omitempty"`
	Model       string  `json:"model,omitempty"`
	Language    string  `json:"language,omitempty"`
	Translate   bool    `json:"translate,omitempty"`
	Prompt      string  `json:"prompt,omitempty"`
	Temperature float64 `json:"temperature,omitempty"`
	// Format of the result: json, text, srt, vtt, verbose_json.
	Format   string `json:"format,omitempty"`
	Priority string `json:"priority,omitempty"`
	// KeepAliveSeconds keeps the loaded model warm after the job.
	KeepAliveSeconds float64 `json:"keep_alive_seconds,omitempty"`
}
