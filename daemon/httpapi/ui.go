package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
)

// uiFiles is the monitor page: plain HTML, CSS and JavaScript, no build step.
//
//go:embed ui
var uiFiles embed.FS

// monitorPage serves the page at / and its assets under /ui/. The page reads
// GET /v1/monitor/events; it never polls.
func monitorPage() http.Handler {
	sub, _ := fs.Sub(uiFiles, "ui") // "ui" is embedded: Sub cannot fail
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		http.StripPrefix("/ui", files).ServeHTTP(w, r)
	})
}
