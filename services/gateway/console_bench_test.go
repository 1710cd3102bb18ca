package gateway

import (
	"net/http"
	"regexp"
	"testing"
)

// chatRouteBudget is the ceiling on the compressed JavaScript the
// chat route loads before its first render.
const chatRouteBudget = 300 * 1024

// chatRouteJS returns the gzip-compressed bytes of the JavaScript that
// /console/chat loads up front (index.html's module script and the chunks
// it preloads), as the console handler sends them to a browser, and the
// files.
func chatRouteJS(tb testing.TB, h http.Handler) (int, []string) {
	tb.Helper()
	page := readAllTB(tb, consoleGetTB(tb, h, "/console/chat", nil))
	re := regexp.MustCompile(`<(?:script[^>]*\ssrc|link[^>]*rel="modulepreload"[^>]*\shref)="(/console/[^"]+\.js)"`)
	total := 0
	var files []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		r := consoleGetTB(tb, h, m[1], map[string]string{"Accept-Encoding": "gzip"})
		if r.StatusCode != http.StatusOK || r.Header.Get("Content-Encoding") != "gzip" {
			tb.Fatalf("%s: %d, encoding %q", m[1], r.StatusCode, r.Header.Get("Content-Encoding"))
		}
		total += len(readAllTB(tb, r))
		files = append(files, m[1])
	}
	if len(files) == 0 {
		tb.Fatal("index.html loads no script")
	}
	return total, files
}

// TestConsoleChatRouteWeight keeps the chat route's up-front JavaScript
// within its budget (the charts, the largest part, load only when shown).
func TestConsoleChatRouteWeight(t *testing.T) {
	n, files := chatRouteJS(t, consoleHandler(mustConsoleMetrics(t)))
	t.Logf("chat route: %d bytes of gzip JavaScript in %v", n, files)
	if n > chatRouteBudget {
		t.Fatalf("the chat route loads %d bytes of gzip JavaScript, over the %d budget", n, chatRouteBudget)
	}
}

// BenchmarkConsoleChatRoute serves the chat route's page and scripts as a
// browser with an empty cache fetches them, and reports their gzip size
// (js-gzip-bytes).
func BenchmarkConsoleChatRoute(b *testing.B) {
	h := consoleHandler(mustConsoleMetrics(b))
	n, _ := chatRouteJS(b, h)
	b.ResetTimer()
	for b.Loop() {
		chatRouteJS(b, h)
	}
	b.ReportMetric(float64(n), "js-gzip-bytes")
}
