package runner

import (
	"errors"
	"strings"

	"github.com/wsched/wsched/jobs"
)

// badAudio turns a backend's bad-audio failure into one line the user can
// read: the backend's reason without the layers above it, and without the
// spool path, which is the daemon's copy and means nothing to the user
// (clients name their own file next to it). Each layer (decoder, backend,
// gRPC client, host) names the file; the reason is what follows the last
// "bad audio".
func badAudio(err error, spool string) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "bad audio"); i >= 0 {
		msg = strings.TrimPrefix(msg[i+len("bad audio"):], ": ")
	}
	if spool != "" {
		for _, layer := range []string{"decode " + spool + ": ", spool + ": "} {
			msg = strings.ReplaceAll(msg, layer, "")
		}
		msg = strings.ReplaceAll(msg, "decode "+spool+" ", "decode ")
		msg = strings.ReplaceAll(msg, spool, "the file")
	}
	if msg = strings.TrimSpace(msg); msg == "" {
		msg = "the backend cannot decode the file"
	}
	return jobs.Mark(errors.New("bad audio: "+msg), jobs.ErrBadInput)
}
