package daemon

import (
	"encoding/json"
	"fmt"
	"io"
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
