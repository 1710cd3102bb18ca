package gateway

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func consoleGet(t *testing.T, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	return consoleGetTB(t, h, path, hdr)
}

func consoleGetTB(t testing.TB, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func readAll(t *testing.T, r *http.Response) string {
	t.Helper()
	return readAllTB(t, r)
}

func readAllTB(t testing.TB, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConsoleServesTheEmbeddedBuild checks the committed build: index.html
// for the root and every client route, each hashed file it links served
// with a long cache life, gzip for clients that accept it (and the bytes
// decompress to the file), the CSP on everything, 404 for unknown files.
func TestConsoleServesTheEmbeddedBuild(t *testing.T) {
	m, err := newConsoleMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := consoleHandler(m)

	root := consoleGet(t, h, "/console/", nil)
	page := readAll(t, root)
	if root.StatusCode != http.StatusOK || !strings.Contains(page, `<div id="root">`) {
		t.Fatalf("/console/: %d %q", root.StatusCode, page)
	}
	if got := root.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("index.html Cache-Control %q, want no-cache", got)
	}
	if root.Header.Get("Content-Security-Policy") != consoleCSP {
		t.Errorf("index.html CSP %q", root.Header.Get("Content-Security-Policy"))
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "style=") {
		t.Errorf("index.html has an inline script or style, which the CSP refuses:\n%s", page)
	}
	for _, route := range []string{"/console/chat", "/console/chat/conv-1", "/console/index.html"} {
		r := consoleGet(t, h, route, nil)
		if body := readAll(t, r); r.StatusCode != http.StatusOK || body != page {
			t.Errorf("%s: %d, not index.html", route, r.StatusCode)
		}
	}
	if r := consoleGet(t, h, "/console", nil); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/console/" {
		t.Errorf("/console: %d Location %q", r.StatusCode, r.Header.Get("Location"))
	}

	links := regexp.MustCompile(`(?:src|href)="(/console/assets/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(links) < 2 {
		t.Fatalf("index.html links %d assets", len(links))
	}
	for _, l := range links {
		plain := consoleGet(t, h, l[1], nil)
		body := readAll(t, plain)
		if plain.StatusCode != http.StatusOK || len(body) == 0 || plain.Header.Get("Content-Encoding") != "" {
			t.Fatalf("%s: %d, %d bytes, encoding %q", l[1], plain.StatusCode, len(body), plain.Header.Get("Content-Encoding"))
		}
		if got := plain.Header.Get("Cache-Control"); !strings.Contains(got, "immutable") {
			t.Errorf("%s: Cache-Control %q", l[1], got)
		}
		if plain.Header.Get("Vary") != "Accept-Encoding" || plain.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: Vary %q CSP %q", l[1], plain.Header.Get("Vary"), plain.Header.Get("Content-Security-Policy"))
		}
		zipped := consoleGet(t, h, l[1], map[string]string{"Accept-Encoding": "br, gzip"})
		zbody := readAll(t, zipped)
		if zipped.Header.Get("Content-Encoding") != "gzip" || len(zbody) >= len(body) {
			t.Fatalf("%s with gzip: encoding %q, %d bytes of %d", l[1], zipped.Header.Get("Content-Encoding"), len(zbody), len(body))
		}
		zr, err := gzip.NewReader(bytes.NewReader([]byte(zbody)))
		if err != nil {
			t.Fatal(err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil || string(unzipped) != body {
			t.Fatalf("%s: the gzip body is not the file (%v)", l[1], err)
		}
		again := consoleGet(t, h, l[1], map[string]string{"If-None-Match": plain.Header.Get("ETag")})
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", l[1], again.StatusCode)
		}
	}
	for _, p := range []string{"/console/assets/gone-abc123.js", "/console/../go.mod", "/console/favicon.ico"} {
		if r := consoleGet(t, h, p, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, r.StatusCode)
		}
	}
	if got := testutil.ToFloat64(m.responses.WithLabelValues("asset", "gzip")); got != float64(len(links)) {
		t.Errorf("asset gzip responses = %v, want %d", got, len(links))
	}
}

// TestConsoleThroughTheGateway checks the console's routes on the server's
// own mux (the dashboard's GET / must not shadow them).
func TestConsoleThroughTheGateway(t *testing.T) {
	s := &Server{consoleM: mustConsoleMetrics(t)}
	mux := http.NewServeMux()
	mux.Handle("GET /", dashboardHandler())
	mux.Handle("GET /console", consoleHandler(s.consoleM))
	mux.Handle("GET /console/", consoleHandler(s.consoleM))
	r := consoleGet(t, mux, "/console/chat", nil)
	if body := readAll(t, r); r.StatusCode != http.StatusOK || !strings.Contains(body, "BA-Agent console") {
		t.Fatalf("/console/chat: %d", r.StatusCode)
	}
	dash := readAll(t, consoleGet(t, mux, "/", nil))
	if !strings.Contains(dash, `href="/console/"`) {
		t.Error("the dashboard has no link to the console")
	}
}

func mustConsoleMetrics(t testing.TB) *consoleMetrics {
	t.Helper()
	m, err := newConsoleMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConsoleSiteFromFiles checks buildConsoleSite on a made-up build:
// small files stay uncompressed, assets/ is immutable, types by extension.
func TestConsoleSiteFromFiles(t *testing.T) {
	big := strings.Repeat("console.log('x');\n", 200)
	site, err := buildConsoleSite(fstest.MapFS{
		"dist/index.html":       {Data: []byte("<html></html>")},
		"dist/assets/a-1.js":    {Data: []byte(big)},
		"dist/assets/b-2.css":   {Data: []byte("a{}")},
		"dist/assets/c-3.woff2": {Data: []byte("font")},
	}, "dist")
	if err != nil {
		t.Fatal(err)
	}
	js := site.assets["assets/a-1.js"]
	if js == nil || js.gz == nil || !js.immutable || js.contentType != "text/javascript; charset=utf-8" {
		t.Fatalf("a-1.js: %+v", js)
	}
	if css := site.assets["assets/b-2.css"]; css.gz != nil || css.contentType != "text/css; charset=utf-8" {
		t.Errorf("b-2.css: gz %v type %q", css.gz != nil, css.contentType)
	}
	if site.index == nil || site.index.immutable {
		t.Errorf("index: %+v", site.index)
	}
	if _, err := buildConsoleSite(fstest.MapFS{}, "../x"); err == nil {
		t.Error("an invalid root was accepted")
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"":                   false,
		"gzip":               true,
		"br, gzip;q=0.5":     true,
		"gzip;q=0":           false,
		"*":                  true,
		"*;q=1, gzip;q=0":    false,
		"identity":           false,
		"GZIP ; Q=0.1":       true,
		"gzip;q=abc":         false,
		"deflate, *;q=0":     false,
		"gzip;q=0, gzip;q=1": true,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", h, got, want)
		}
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "br, gzip;q=0.5", "*;q=0", "gzip;q=NaN", ";;,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got := acceptsGzip(h)
		if !strings.Contains(strings.ToLower(h), "gzip") && !strings.Contains(h, "*") && got {
			t.Fatalf("acceptsGzip(%q) = true without gzip or *", h)
		}
	})
}

func FuzzETagMatches(f *testing.F) {
	for _, s := range []string{`"abc"`, `W/"abc", "def"`, "*", `,,"abc"`, ""} {
		f.Add(s, `"abc"`)
	}
	f.Fuzz(func(t *testing.T, header, etag string) {
		if etag == "" {
			return
		}
		got := etagMatches(header, etag)
		if got && !strings.Contains(header, etag) && !strings.Contains(header, "*") {
			t.Fatalf("etagMatches(%q, %q) = true, but the header names neither it nor *", header, etag)
		}
		if strings.TrimSpace(etag) == etag && !strings.Contains(etag, ",") && !strings.HasPrefix(etag, "W/") && !etagMatches(header+","+etag, etag) {
			t.Fatalf("etagMatches(%q) misses an etag listed last", header+","+etag)
		}
	})
}
