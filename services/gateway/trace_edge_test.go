package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/baagent/baagent/internal/testkit"
)

// With tracing on, each API route is an otelhttp handler inside the edge
// middleware (securityHeaders, bodyDeadline, browserGuard): the edge's
// protections must hold exactly as untraced, and what reaches the
// connection through otelhttp's response writer (the body read deadline,
// the WebSocket hijack) must still work.

// tracedEnv is newEnv with every API request traced into an in-memory
// exporter.
func tracedEnv(t *testing.T, opts Options) (*env, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts.TracerProvider = tp
	return newEnv(t, opts), exp
}

func spanNames(exp *tracetest.InMemoryExporter) []string {
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	return names
}

// TestTracedSlowBodyIsCutAndASlowCallIsNot: the body read timeout cuts a
// slow body of a traced route, and does not cut a slow call once the body
// is in.
func TestTracedSlowBodyIsCutAndASlowCallIsNot(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e, exp := tracedEnv(t, Options{BodyReadTimeout: timeout})
	conn := e.slowPost(t, keyAcme)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("slow body: %d %s, want 408", resp.StatusCode, b)
	}

	code, body := startRunHeld(t, e, 3*timeout) // well past the body deadline
	if code != 200 {
		t.Errorf("a traced call that outlasts the body timeout: %d %s", code, body)
	}
	testkit.Eventually(t, 10*time.Second, "the requests' server spans", func() bool {
		n := 0
		for _, name := range spanNames(exp) {
			if name == "POST /v1/runs" {
				n++
			}
		}
		return n == 2
	})
}

// TestTracedNoKeyModeBrowserGuard: without API keys, the browser guard
// refuses cross-site, rebinding and non-JSON requests to traced routes,
// serves the rest, and WebSocket handshakes (hijacked through otelhttp's
// writer) are origin-checked and work.
func TestTracedNoKeyModeBrowserGuard(t *testing.T) {
	e, exp := tracedEnv(t, Options{APIKeys: map[string]string{}})
	own := e.base
	port := own[strings.LastIndex(own, ":")+1:]
	start := `{"spec":{"input":"x"}}`
	json := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name string
		req  request
		want int
	}{
		{"cross-site JSON POST", request{method: "POST", path: "/v1/runs", body: start,
			header: map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}}, 403},
		{"text/plain POST", request{method: "POST", path: "/v1/runs", body: start, header: map[string]string{"Content-Type": "text/plain"}}, 415},
		{"rebinding GET", request{method: "GET", path: "/v1/runs", host: "evil.example:" + port}, 403},
		{"list", request{method: "GET", path: "/v1/runs"}, 200},
		{"JSON POST", request{method: "POST", path: "/v1/runs", body: start, header: json}, 200},
	} {
		if code, body, _ := e.send(t, c.req); code != c.want {
			t.Errorf("%s: %d %.300s, want %d", c.name, code, body, c.want)
		}
	}

	e.run(DefaultTenant, "run-1")
	ws := "ws" + strings.TrimPrefix(e.base, "http") + "/v1/runs/run-1/ws"
	if _, err := dialWS(testCtx(t), ws, http.Header{"Origin": {"http://evil.example"}}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("traced WebSocket from a foreign Origin: %v, want 403", err)
	}
	c, err := dialWS(testCtx(t), ws, http.Header{"Origin": {own}})
	if err != nil {
		t.Fatalf("traced WebSocket from the gateway's own origin: %v", err)
	}
	c.Close()

	testkit.Eventually(t, 10*time.Second, "server spans of the served requests", func() bool {
		names := spanNames(exp)
		return slices.Contains(names, "GET /v1/runs") && slices.Contains(names, "POST /v1/runs") &&
			slices.Contains(names, "GET /v1/runs/{run_id}/ws")
	})
}
