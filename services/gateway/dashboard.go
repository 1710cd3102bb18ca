package gateway

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard is static files embedded in the binary (no build step):
// web/index.html, app.js (with plan.js, the work plan panel) and style.css,
// talking to the HTTP/JSON API and the SSE stream of the same origin.

//go:embed web/index.html web/app.js web/plan.js web/style.css
var webFiles embed.FS

func dashboardHandler() http.Handler {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		// The embed pattern above guarantees the directory exists.
		return http.NotFoundHandler()
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/", "/index.html", "/app.js", "/plan.js", "/style.css":
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
