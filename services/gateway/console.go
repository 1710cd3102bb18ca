package gateway

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/metrics"
)

// The web console (web/console: React + TypeScript, built by Vite) is
// served at /console/ from its build output, console/dist, embedded in the
// binary: `make console` rebuilds it and `make check-generated` proves the
// committed build matches the source. Built file names carry a content
// hash (assets/…): those are cached for good; index.html, which names
// them, is revalidated. Every client route (a path without a file
// extension) answers index.html. Responses are gzip-compressed for
// clients that accept it, compressed once when the handler is first used.

//go:embed console/dist
var consoleFiles embed.FS

// consolePrefix is where the console is served.
const consolePrefix = "/console/"

// consoleCSP is the dashboard's policy: nothing but this origin's own
// scripts, styles, images (and data: images, which canvases export) and
// API, never framed.
const consoleCSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"

// consoleAsset is one file of the build, with its gzip form when that is
// smaller.
type consoleAsset struct {
	body        []byte
	gz          []byte // nil: not worth compressing
	contentType string
	etag        string
	immutable   bool
}

type consoleSite struct {
	assets map[string]*consoleAsset // by path below dist, e.g. "assets/index-abc.js"
	index  *consoleAsset
}

var (
	consoleOnce  sync.Once
	consoleBuilt *consoleSite
)

// loadConsole reads and compresses the embedded build once per process.
func loadConsole() *consoleSite {
	consoleOnce.Do(func() {
		site, err := buildConsoleSite(consoleFiles, "console/dist")
		if err != nil {
			site = &consoleSite{assets: map[string]*consoleAsset{}}
		}
		consoleBuilt = site
	})
	return consoleBuilt
}

func buildConsoleSite(fsys fs.FS, root string) (*consoleSite, error) {
	sub, err := fs.Sub(fsys, root)
	if err != nil {
		return nil, err
	}
	site := &consoleSite{assets: map[string]*consoleAsset{}}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		a := &consoleAsset{
			body:        body,
			contentType: consoleContentType(p),
			immutable:   strings.HasPrefix(p, "assets/"),
		}
		sum := sha256.Sum256(body)
		a.etag = `"` + hex.EncodeToString(sum[:12]) + `"`
		if gz := gzipBytes(body); gz != nil && len(gz) < len(body)*9/10 {
			a.gz = gz
		}
		site.assets[p] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	site.index = site.assets["index.html"]
	return site, nil
}

func consoleContentType(p string) string {
	switch path.Ext(p) {
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil
	}
	if _, err := zw.Write(b); err != nil {
		return nil
	}
	if err := zw.Close(); err != nil {
		return nil
	}
	return buf.Bytes()
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip: named
// with a q above 0, or not named and admitted by "*".
func acceptsGzip(h string) bool {
	gzipQ, starQ := -1.0, -1.0
	for _, part := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f != f { // unreadable: refuses
					f = 0
				}
				q = f
			}
		}
		if name == "gzip" {
			gzipQ = max(gzipQ, q)
		} else {
			starQ = max(starQ, q)
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// consoleMetrics count the console's responses; every label is a fixed set.
type consoleMetrics struct {
	responses *prometheus.CounterVec // by kind (asset, index, not_modified, not_found, redirect) and encoding (gzip, identity)
	bytes     prometheus.Counter
}

func newConsoleMetrics(reg prometheus.Registerer) (*consoleMetrics, error) {
	const ns, sub = "baagent", "gateway"
	m := &consoleMetrics{
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "console_responses_total",
			Help: "Responses of the web console's static files (/console/) by kind (asset, index, not_modified, not_found, redirect) and encoding (gzip, identity).",
		}, []string{"kind", "encoding"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "console_bytes_total",
			Help: "Body bytes of the web console's static files sent (as sent: compressed when gzip).",
		}),
	}
	for _, k := range []string{"asset", "index"} {
		for _, e := range []string{"gzip", "identity"} {
			m.responses.WithLabelValues(k, e)
		}
	}
	if err := metrics.RegisterExclusive(reg, "gateway console", m.responses, m.bytes); err != nil {
		return nil, err
	}
	return m, nil
}

// consoleHandler serves the console below /console/ (and redirects
// /console there).
func consoleHandler(m *consoleMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site := loadConsole()
		if r.URL.Path == "/console" {
			m.responses.WithLabelValues("redirect", "identity").Inc()
			http.Redirect(w, r, consolePrefix, http.StatusMovedPermanently)
			return
		}
		rel, ok := strings.CutPrefix(r.URL.Path, consolePrefix)
		if !ok {
			m.responses.WithLabelValues("not_found", "identity").Inc()
			http.NotFound(w, r)
			return
		}
		kind := "asset"
		a := site.assets[rel]
		if a == nil || rel == "index.html" {
			// A client route (no extension, e.g. /console/chat/abc) is the
			// app's; a missing file (an old hashed asset) is not found.
			if rel != "" && rel != "index.html" && path.Ext(rel) != "" {
				m.responses.WithLabelValues("not_found", "identity").Inc()
				http.NotFound(w, r)
				return
			}
			a, kind = site.index, "index"
		}
		if a == nil {
			m.responses.WithLabelValues("not_found", "identity").Inc()
			http.Error(w, "the console is not built into this binary (make console)", http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Vary", "Accept-Encoding")
		if a.immutable {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		body, enc := a.body, "identity"
		if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, enc = a.gz, "gzip"
			h.Set("Content-Encoding", "gzip")
		}
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
			m.responses.WithLabelValues("not_modified", enc).Inc()
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		m.responses.WithLabelValues(kind, enc).Inc()
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		n, _ := w.Write(body)
		m.bytes.Add(float64(n))
	})
}

// etagMatches reports whether an If-None-Match header names etag (or *).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "W/"))
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
