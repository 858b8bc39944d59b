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
	"strconv"
	"strings"
	"sync"
	"testing"
)

// APICallsFile lists the API calls the driver makes, one "group resource
// verb" a line; packaging/kubernetes checks that the driver's RBAC grants
// exactly these. TestAPIServerCalls keeps it true to the code.
const APICallsFile = "../../packaging/kubernetes/dra/api-calls.txt"

// fakeServer is an API server over TLS that serves one node, the claims in
// pages of pageSize and the slices, and records each call as an RBAC verb.
type fakeServer struct {
	mu       sync.Mutex
	calls    map[string]bool // "group resource verb"
	claims   []map[string]any
	pageSize int
	slices   map[string]map[string]any
}

func newFakeServer(pageSize int) *fakeServer {
	return &fakeServer{calls: map[string]bool{}, slices: map[string]map[string]any{}, pageSize: pageSize}
}

// claimObject is a ResourceClaim allocated on node1 (reserved for a pod
// when reserved), as the API server has it.
func claimObject(uid, ns, name, device, memory string, reserved bool) map[string]any {
	status := map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": []any{map[string]any{
		"request": "gpu", "driver": DriverName, "pool": "node1", "device": device, "shareID": "s-" + uid,
		"consumedCapacity": map[string]any{"memory": memory},
	}}}}}
	if reserved {
		status["reservedFor"] = []any{map[string]any{"resource": "pods", "name": "pod-" + name, "uid": "pod-" + uid}}
	}
	return map[string]any{"metadata": map[string]any{"uid": uid, "namespace": ns, "name": name}, "status": status}
}

// put adds claims; remove deletes the claim uid.
func (f *fakeServer) put(claims ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, claims...)
}

func (f *fakeServer) remove(uid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = slices.DeleteFunc(f.claims, func(c map[string]any) bool { return meta(c)["uid"] == uid })
}

func meta(obj map[string]any) map[string]any { return obj["metadata"].(map[string]any) }

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer secret-token" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	const claimsPath, slicesPath = "/apis/resource.k8s.io/v1/resourceclaims", "/apis/resource.k8s.io/v1/resourceslices"
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && p == "/api/v1/nodes/node1":
		f.record("core", "nodes", "get")
		fmt.Fprint(w, `{"metadata":{"name":"node1","uid":"node-uid-1"}}`)
	case r.Method == http.MethodGet && p == claimsPath:
		f.listClaims(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/apis/resource.k8s.io/v1/namespaces/"):
		f.getClaim(w, strings.Split(strings.TrimPrefix(p, "/apis/resource.k8s.io/v1/namespaces/"), "/"))
	case strings.HasPrefix(p, slicesPath):
		f.serveSlice(w, r, strings.TrimPrefix(strings.TrimPrefix(p, slicesPath), "/"))
	default:
		http.Error(w, "unexpected "+r.Method+" "+p, http.StatusBadRequest)
	}
}

func (f *fakeServer) record(group, resource, verb string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[group+" "+resource+" "+verb] = true
}

// listClaims answers a page of pageSize claims from the index in
// "continue" (a server may answer fewer than the limit asked).
func (f *fakeServer) listClaims(w http.ResponseWriter, r *http.Request) {
	f.record("resource.k8s.io", "resourceclaims", "list")
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Query().Get("limit") == "" {
		http.Error(w, "no limit", http.StatusBadRequest)
		return
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("continue"))
	end := min(start+f.pageSize, len(f.claims))
	cont := ""
	if end < len(f.claims) {
		cont = strconv.Itoa(end)
	}
	json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"continue": cont}, "items": f.claims[start:end]})
}

func (f *fakeServer) getClaim(w http.ResponseWriter, parts []string) {
	if len(parts) != 3 || parts[1] != "resourceclaims" {
		http.Error(w, "unexpected claim path", http.StatusBadRequest)
		return
	}
	f.record("resource.k8s.io", "resourceclaims", "get")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.claims {
		if meta(c)["namespace"] == parts[0] && meta(c)["name"] == parts[2] {
			json.NewEncoder(w).Encode(c)
			return
		}
	}
	http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
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
	fs := newFakeServer(1)
	unallocated := map[string]any{"metadata": map[string]any{"uid": "u2", "namespace": "ns", "name": "b"}, "status": map[string]any{}}
	fs.put(claimObject("u1", "ns", "a", "gpu-3", "4Gi", true), unallocated, claimObject("u3", "ns", "c", "gpu-1", "1Gi", false))
	srv, token, ca := serveTLS(t, fs)
	a, err := NewAPIServer(srv, token, ca)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claims, err := a.List(ctx)
	if err != nil || len(claims) != 3 || claims[0].UID != "u1" || !claims[0].Reserved || claims[0].Namespace != "ns" ||
		len(claims[0].Results) != 1 || claims[0].Results[0].MemoryBytes != 4*GiB || claims[1].Reserved || claims[1].Results != nil ||
		claims[2].UID != "u3" || claims[2].Reserved {
		t.Fatalf("List: %+v, %v", claims, err)
	}
	res, err := a.Allocation(ctx, "ns", "a", "u1")
	if err != nil || len(res) != 1 || res[0].ShareID != "s-u1" || res[0].Device != "gpu-3" {
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

// serveTLS serves h over TLS for the test; it returns the URL and the
// files of a bearer token and of the CA.
func serveTLS(t *testing.T, h http.Handler) (url, token, ca string) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	token, ca = filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(token, []byte("secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, token, ca
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
