package dra

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// APICallsFile lists the API calls the driver makes, one "group resource
// verb" a line; packaging/kubernetes checks that the driver's RBAC grants
// exactly these. TestAPIServerCalls keeps it true to the code.
const APICallsFile = "../../packaging/kubernetes/dra/api-calls.txt"

// fakeServer is an API server over TLS that serves one node, two pages of
// claims and the slices, and records each call as an RBAC verb.
type fakeServer struct {
	mu     sync.Mutex
	calls  map[string]bool // "group resource verb"
	slices map[string]map[string]any
}

func (f *fakeServer) record(group, resource, verb string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[group+" "+resource+" "+verb] = true
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer secret-token" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	const claims, slicesPath = "/apis/resource.k8s.io/v1/resourceclaims", "/apis/resource.k8s.io/v1/resourceslices"
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && p == "/api/v1/nodes/node1":
		f.record("core", "nodes", "get")
		fmt.Fprint(w, `{"metadata":{"name":"node1","uid":"node-uid-1"}}`)
	case r.Method == http.MethodGet && p == claims:
		f.record("resource.k8s.io", "resourceclaims", "list")
		if r.URL.Query().Get("limit") == "" {
			http.Error(w, "no limit", http.StatusBadRequest)
		} else if r.URL.Query().Get("continue") == "" {
			fmt.Fprint(w, `{"metadata":{"continue":"page2"},"items":[
			 {"metadata":{"uid":"u1","namespace":"ns","name":"a"},"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"pu"}],
			  "allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.wsched.io","pool":"node1","device":"gpu-3","consumedCapacity":{"memory":"4Gi"}}]}}}}]}`)
		} else {
			fmt.Fprint(w, `{"metadata":{},"items":[{"metadata":{"uid":"u2","namespace":"ns","name":"b"},"status":{}}]}`)
		}
	case r.Method == http.MethodGet && p == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/a":
		f.record("resource.k8s.io", "resourceclaims", "get")
		fmt.Fprint(w, `{"metadata":{"uid":"u1"},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.wsched.io","pool":"node1","device":"gpu-3","shareID":"s1","consumedCapacity":{"memory":"4Gi"}}]}}}}`)
	case strings.HasPrefix(p, slicesPath):
		f.serveSlice(w, r, strings.TrimPrefix(strings.TrimPrefix(p, slicesPath), "/"))
	default:
		http.Error(w, "unexpected "+r.Method+" "+p, http.StatusBadRequest)
	}
}

func (f *fakeServer) serveSlice(w http.ResponseWriter, r *http.Request, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update"}[r.Method]
	if verb == "" || (verb == "create") != (name == "") {
		http.Error(w, "unexpected "+r.Method, http.StatusBadRequest)
		return
	}
	f.calls["resource.k8s.io resourceslices "+verb] = true
	if verb == "get" {
		if s, ok := f.slices[name]; ok {
			json.NewEncoder(w).Encode(s)
		} else {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
		}
		return
	}
	var obj map[string]any
	if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	meta := obj["metadata"].(map[string]any)
	meta["resourceVersion"] = fmt.Sprint(len(f.slices) + 1)
	f.slices[meta["name"].(string)] = obj
	json.NewEncoder(w).Encode(obj)
}

// TestAPIServerCalls drives every method of APIServer against a fake API
// server over TLS with a bearer token (listing claims over two pages,
// creating then replacing the slice, which the node owns) and checks that
// the calls it made are exactly those of packaging/kubernetes/dra/api-calls.txt.
func TestAPIServerCalls(t *testing.T) {
	fs := &fakeServer{calls: map[string]bool{}, slices: map[string]map[string]any{}}
	srv := httptest.NewTLSServer(fs)
	defer srv.Close()
	dir := t.TempDir()
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(token, []byte("secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := NewAPIServer(srv.URL, token, ca)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claims, err := a.List(ctx)
	if err != nil || len(claims) != 2 || claims[0].UID != "u1" || !claims[0].Reserved || claims[0].Namespace != "ns" ||
		len(claims[0].Results) != 1 || claims[0].Results[0].MemoryBytes != 4*GiB || claims[1].Reserved || claims[1].Results != nil {
		t.Fatalf("List: %+v, %v", claims, err)
	}
	res, err := a.Allocation(ctx, "ns", "a", "u1")
	if err != nil || len(res) != 1 || res[0].ShareID != "s1" || res[0].Device != "gpu-3" {
		t.Fatalf("Allocation: %+v, %v", res, err)
	}
	if _, err := a.Allocation(ctx, "ns", "a", "other-uid"); err == nil {
		t.Errorf("Allocation of a claim made again under the same name: no error")
	}
	s := Slice{Node: "node1", Step: 256 << 20, Devices: []Device{{Name: "gpu-3", Index: 3, MemoryBytes: 8 * GiB}}}
	for range 2 { // create, then replace
		if err := a.Publish(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	owner, _ := json.Marshal(fs.slices[s.Name()]["metadata"].(map[string]any)["ownerReferences"])
	if !strings.Contains(string(owner), `"uid":"node-uid-1"`) || !strings.Contains(string(owner), `"kind":"Node"`) {
		t.Errorf("slice owner %s, want the node", owner)
	}
	var got []string
	for c := range fs.calls {
		got = append(got, c)
	}
	slices.Sort(got)
	want := readAPICalls(t)
	if !slices.Equal(got, want) {
		t.Errorf("API calls made:\n  %s\n%s lists:\n  %s\n(update the file, and the driver's RBAC in packaging/kubernetes/dra/driver.yaml)",
			strings.Join(got, "\n  "), APICallsFile, strings.Join(want, "\n  "))
	}
}

// readAPICalls reads APICallsFile, sorted, without comments.
func readAPICalls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(APICallsFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	slices.Sort(out)
	return out
}
