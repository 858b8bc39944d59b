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
		UID string `json:"uid"`
	} `json:"metadata"`
	Status struct {
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

// Publish creates or replaces the node's ResourceSlice.
func (a *APIServer) Publish(ctx context.Context, s Slice) error {
	path := "/apis/resource.k8s.io/v1/resourceslices"
	var cur struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	obj := s.Object()
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
