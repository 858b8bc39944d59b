package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/asuser"
)

// getHelper runs as another uid: it GETs path on socket and prints the body.
func getHelper(args []string) int {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", args[0])
	}}}
	resp, err := hc.Get("http://wsched" + args[1])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	return 0
}

func TestMemoryBytesZeroIsRefused(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, nil)
	status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 0}`)
	if status != http.StatusBadRequest || !strings.Contains(body, "memory_bytes") {
		t.Errorf("memory_bytes 0: %d %s, want 400 naming memory_bytes", status, body)
	}
	if status, body := td.raw("POST", "/v1/leases", `{}`); status != http.StatusCreated {
		t.Errorf("no memory_bytes (default_memory): %d %s", status, body)
	}
}

func TestTemperatureNaNIs400(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, nil)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("temperature", "NaN")
	fw, _ := mw.CreateFormFile("file", "a.wav")
	fw.Write([]byte("RIFF"))
	mw.Close()
	status, data := postForm(t, td.socket, "/v1/audio/transcriptions", &buf, mw.FormDataContentType())
	if status != http.StatusBadRequest || !strings.Contains(data, "temperature") {
		t.Errorf("temperature=NaN: %d %s, want 400 naming temperature", status, data)
	}
}

func TestLabelsHiddenFromOtherUsers(t *testing.T) {
	td, dir := asNobody(t, nil)
	if status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 1048576, "labels": {"project": "secret-x"}}`); status != http.StatusCreated {
		t.Fatalf("root lease: %d %s", status, body)
	}
	for _, path := range []string{"/v1/leases", "/v1/gpus"} {
		out, err := asuser.Command(context.Background(), t, dir, "get", td.socket, path).CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v: %s", err, out)
		}
		if !strings.Contains(string(out), `"lease_id"`) && !strings.Contains(string(out), `"id"`) {
			t.Fatalf("%s as uid %d shows no lease: %s", path, asuser.Nobody, out)
		}
		if strings.Contains(string(out), "secret-x") {
			t.Errorf("%s shows root's lease labels to uid %d: %s", path, asuser.Nobody, out)
		}
	}
	if _, body := td.raw("GET", "/v1/leases", ""); !strings.Contains(body, "secret-x") {
		t.Errorf("root does not see labels: %s", body)
	}
}
