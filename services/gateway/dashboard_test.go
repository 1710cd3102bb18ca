package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardServesEveryFileItLinks checks that each script and
// stylesheet index.html refers to is embedded and served (a file left out
// of the embed pattern or the path list would leave the page half-working),
// and that nothing else is.
func TestDashboardServesEveryFileItLinks(t *testing.T) {
	h := dashboardHandler()
	get := func(path string) (int, string, http.Header) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b), rec.Result().Header
	}
	code, page, hdr := get("/")
	if code != http.StatusOK || !strings.Contains(page, "BA-Agent") || hdr.Get("Content-Security-Policy") == "" {
		t.Fatalf("/: %d, CSP %q", code, hdr.Get("Content-Security-Policy"))
	}
	links := regexp.MustCompile(`(?:src|href)="([a-z]+\.(?:js|css))"`).FindAllStringSubmatch(page, -1)
	if len(links) < 3 {
		t.Fatalf("index.html links %d files: %v", len(links), links)
	}
	for _, l := range links {
		code, body, hdr := get("/" + l[1])
		if code != http.StatusOK || len(body) == 0 {
			t.Errorf("%s: %d, %d bytes", l[1], code, len(body))
		}
		want := "text/javascript"
		if strings.HasSuffix(l[1], ".css") {
			want = "text/css"
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, want) {
			t.Errorf("%s: Content-Type %q", l[1], ct)
		}
	}
	for _, path := range []string{"/dashboard.go", "/web/app.js", "/../go.mod", "/plan.js.map"} {
		if code, _, _ := get(path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
}
