package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// write writes one Server-Sent Event with an id, a type and JSON data,
// framed and encoded into the encoder's buffer and written with one Write.
func (e *sseEncoder) write(w io.Writer, id uint64, event string, v any) error {
	e.buf.Reset()
	b := e.buf.AvailableBuffer()
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, "\nevent: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	e.buf.Write(b)
	if err := e.enc.Encode(v); err != nil { // ends the data line with \n
		return fmt.Errorf("encode event: %w", err)
	}
	e.buf.WriteByte('\n')
	_, err := w.Write(e.buf.Bytes())
	return err
}

// sseEncoder encodes the events of one stream: one buffer and one JSON
// encoder, reused for every event.
type sseEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newSSEEncoder() *sseEncoder {
	e := &sseEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
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
	enc := newSSEEncoder()
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
			if err := enc.write(w, seq, event, data); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		keepalive.Reset(15 * time.Second)
	}
}
