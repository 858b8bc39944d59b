package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// writeSSE writes one Server-Sent Event with an id, a type and JSON data.
func writeSSE(w io.Writer, id uint64, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, event, data)
	return err
}

// streamSSE answers with an event stream of what arrives on ch until the
// client goes away or ch closes; then it sends a last event whose type
// closing says (empty data). frame gives each item's event type and data;
// ids count up. A comment every 15 s keeps proxies from closing an idle
// stream.
func streamSSE[T any](w http.ResponseWriter, r *http.Request, ch <-chan T, closing func() string, frame func(T) (string, any)) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": wsched events\n\n")
	_ = rc.Flush()
	keepalive := time.NewTimer(15 * time.Second)
	defer keepalive.Stop()
	var seq uint64
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
		case item, ok := <-ch:
			if !ok {
				fmt.Fprintf(w, "event: %s\ndata: {}\n\n", closing())
				_ = rc.Flush()
				return
			}
			seq++
			event, data := frame(item)
			if err := writeSSE(w, seq, event, data); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		keepalive.Reset(15 * time.Second)
	}
}
