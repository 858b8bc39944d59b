package dra

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// APIServer reads ResourceClaims and publishes ResourceSlices over the
// API server's JSON API (no client-go: the daemon's go.mod stays free of it).
type APIServer struct {
	base  string
	token string
	hc    *http.Client
}

var (
	_ Claims = (*APIServer)(nil)
	_ Slices = (*APIServer)(nil)
)

// InCluster is the service account's token and CA.
const (
	InClusterToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	InClusterCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// NewAPIServer connects to server (https://host:port; empty: the in-cluster
// KUBERNETES_SERVICE_HOST/PORT) with the bearer token in tokenFile, trusting
// caFile.
func NewAPIServer(server, tokenFile, caFile string) (*APIServer, error) {
	if server == "" {
		h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if h == "" || p == "" {
			return nil, fmt.Errorf("api server: %w: no --api-server and not in a cluster", ErrBadRequest)
		}
		server = "https://" + h + ":" + p
		if strings.Contains(h, ":") {
			server = "https://[" + h + "]:" + p
		}
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("api server: token: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("api server: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("api server: %w: no certificate in %s", ErrBadRequest, caFile)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return &APIServer{base: strings.TrimRight(server, "/"), token: strings.TrimSpace(string(token)), hc: hc}, nil
}

// do sends one request; out (when not nil) receives the JSON answer. It
// returns the HTTP status.
func (a *APIServer) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// claimJSON is the part of a resource.k8s.io/v1 ResourceClaim the driver reads.
type claimJSON struct {
	Metadata struct {
		UID       string `json:"uid"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
	Status struct {
		ReservedFor []struct {
			Resource string `json:"resource"`
			Name     string `json:"name"`
			UID      string `json:"uid"`
		} `json:"reservedFor"`
		Allocation *struct {
			Devices struct {
				Results []struct {
					Request          string            `json:"request"`
					Driver           string            `json:"driver"`
					Pool             string            `json:"pool"`
					Device           string            `json:"device"`
					ShareID          string            `json:"shareID"`
					ConsumedCapacity map[string]string `json:"consumedCapacity"`
				} `json:"results"`
			} `json:"devices"`
		} `json:"allocation"`
	} `json:"status"`
}

// Allocation reads the claim's allocation.
func (a *APIServer) Allocation(ctx context.Context, namespace, name, uid string) ([]Result, error) {
	var c claimJSON
	path := "/apis/resource.k8s.io/v1/namespaces/" + url.PathEscape(namespace) + "/resourceclaims/" + url.PathEscape(name)
	if _, err := a.do(ctx, http.MethodGet, path, nil, &c); err != nil {
		return nil, fmt.Errorf("read claim: %w", err)
	}
	return parseClaim(c, uid)
}

func parseClaim(c claimJSON, uid string) ([]Result, error) {
	if c.Metadata.UID != uid {
		return nil, fmt.Errorf("read claim: %w: uid %s, want %s (deleted and made again?)", ErrBadRequest, c.Metadata.UID, uid)
	}
	if c.Status.Allocation == nil {
		return nil, fmt.Errorf("read claim %s: %w: not allocated", uid, ErrBadRequest)
	}
	return parseResults(c, uid)
}

func parseResults(c claimJSON, uid string) ([]Result, error) {
	if c.Status.Allocation == nil {
		return nil, nil
	}
	var out []Result
	for _, r := range c.Status.Allocation.Devices.Results {
		res := Result{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device, ShareID: r.ShareID}
		if q, ok := r.ConsumedCapacity["memory"]; ok {
			b, err := parseQuantity(q)
			if err != nil {
				return nil, fmt.Errorf("read claim %s: consumed memory %q: %w", uid, q, err)
			}
			res.MemoryBytes = b
		}
		out = append(out, res)
	}
	return out, nil
}

// claimListPage is the page size of List.
const claimListPage = 500

// List reads every ResourceClaim of the cluster, page by page.
func (a *APIServer) List(ctx context.Context) ([]Claim, error) {
	var out []Claim
	cont := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(claimListPage)}}
		if cont != "" {
			q.Set("continue", cont)
		}
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []claimJSON `json:"items"`
		}
		if _, err := a.do(ctx, http.MethodGet, "/apis/resource.k8s.io/v1/resourceclaims?"+q.Encode(), nil, &page); err != nil {
			return nil, fmt.Errorf("list claims: %w", err)
		}
		for _, c := range page.Items {
			results, err := parseResults(c, c.Metadata.UID)
			if err != nil {
				return nil, fmt.Errorf("list claims: %w", err)
			}
			out = append(out, Claim{UID: c.Metadata.UID, Namespace: c.Metadata.Namespace, Name: c.Metadata.Name,
				Results: results, Reserved: len(c.Status.ReservedFor) > 0})
		}
		if cont = page.Metadata.Continue; cont == "" {
			return out, nil
		}
	}
}

// nodeUID reads the UID of the node, the owner of its slice (so that the
// slice goes with the node).
func (a *APIServer) nodeUID(ctx context.Context, node string) (string, error) {
	var n struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if _, err := a.do(ctx, http.MethodGet, "/api/v1/nodes/"+url.PathEscape(node), nil, &n); err != nil {
		return "", fmt.Errorf("read node: %w", err)
	}
	return n.Metadata.UID, nil
}

// Publish creates or replaces the node's ResourceSlice.
func (a *APIServer) Publish(ctx context.Context, s Slice) error {
	path := "/apis/resource.k8s.io/v1/resourceslices"
	var cur struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	uid, err := a.nodeUID(ctx, s.Node)
	if err != nil {
		return fmt.Errorf("publish slice %s: %w", s.Name(), err)
	}
	obj := s.Object()
	obj["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
		"apiVersion": "v1", "kind": "Node", "name": s.Node, "uid": uid, "controller": true,
	}}
	code, err := a.do(ctx, http.MethodGet, path+"/"+url.PathEscape(s.Name()), nil, &cur)
	switch {
	case code == http.StatusNotFound:
		_, err = a.do(ctx, http.MethodPost, path, obj, nil)
	case err == nil:
		obj["metadata"].(map[string]any)["resourceVersion"] = cur.Metadata.ResourceVersion
		_, err = a.do(ctx, http.MethodPut, path+"/"+url.PathEscape(s.Name()), obj, nil)
	}
	if err != nil {
		return fmt.Errorf("publish slice %s: %w", s.Name(), err)
	}
	return nil
}
