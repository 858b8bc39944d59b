package httpapi

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// tcpRoutes are what the TCP listener serves: transcription (uploads only),
// the OpenAI-compatible endpoints, read-only views and the monitor page
// ("/" exactly, its assets under /ui/, its stream /v1/monitor/events). Leases and audio by
// path need the Unix socket, where the kernel vouches for the client.
var tcpRoutes = []string{
	"/v1/audio/transcriptions", "/v1/audio/translations", "/v1/models", "/v1/jobs", "/v1/gpus",
	"/v1/status", "/v1/estimate", "/healthz", "/", "/ui", "/v1/monitor",
}

// RequireToken guards the TCP listener: a bearer token compared in constant
// time, and only the routes in tcpRoutes. A connection that fails the
// token check is closed after the 401.
func RequireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wsched"`)
			w.Header().Set("Connection", "close") // no keep-alive for a client without the token
			writeError(w, &httpError{status: http.StatusUnauthorized, code: "unauthorized", err: fmt.Errorf("missing or wrong bearer token")})
			return
		}
		for _, p := range tcpRoutes {
			if r.URL.Path == p || strings.HasPrefix(r.URL.Path, p+"/") {
				next.ServeHTTP(w, r)
				return
			}
		}
		writeError(w, forbidden("%s is served on the Unix socket only", r.URL.Path))
	})
}
