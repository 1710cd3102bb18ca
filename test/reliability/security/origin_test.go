package security

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestNoKeyModeServesOnlyItsOwnOrigin: with no API keys (loopback only,
// `make run`), a page on another site cannot use the gateway through the
// visitor's browser: a cross-site `text/plain` POST (a CORS simple request,
// sent without a preflight) starts no run, a DNS-rebinding request (Host:
// evil.example, resolving to 127.0.0.1) is refused, and so is a WebSocket
// opened from a foreign page. The dashboard's own origin keeps working.
func TestNoKeyModeServesOnlyItsOwnOrigin(t *testing.T) {
	s := harnessStart(t, nil)
	addr := s.App.GatewayHTTPAddr().String()
	_, port, _ := net.SplitHostPort(addr)
	own := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	local := gateway(t, s, "") // no key: the default tenant over loopback

	runs := func() int {
		t.Helper()
		resp, err := local.gw.ListRuns(ctx, &baagentv1.ListRunsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetRuns())
	}
	spec := `{"spec":{"input":"` + question + `"}}`

	// What a page on evil.example can make a browser send without a
	// preflight, and what DNS rebinding lets it send as if same-origin.
	for _, c := range []struct {
		name string
		req  edgeRequest
		want int
	}{
		{"cross-site text/plain POST", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec,
			header: map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain;charset=UTF-8"}}, http.StatusForbidden},
		{"cross-site form POST", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec,
			header: map[string]string{"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"}}, http.StatusForbidden},
		{"cross-site JSON POST from an origin with a foreign port", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec,
			header: map[string]string{"Origin": "http://127.0.0.1:1", "Content-Type": "application/json"}}, http.StatusForbidden},
		{"text/plain POST without Origin (an old browser)", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec,
			header: map[string]string{"Content-Type": "text/plain"}}, http.StatusUnsupportedMediaType},
		{"POST without Content-Type", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec}, http.StatusUnsupportedMediaType},
		{"rebinding POST", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec, host: "evil.example:" + port,
			header: map[string]string{"Content-Type": "application/json"}}, http.StatusForbidden},
	} {
		if code, body := c.req.do(t, ctx, addr); code != c.want {
			t.Errorf("%s: %d %.300s, want %d", c.name, code, body, c.want)
		}
	}
	if n := runs(); n != 0 {
		t.Fatalf("%d runs were started by the refused requests", n)
	}

	// DNS rebinding reads: the page's own origin is evil.example, so the
	// browser lets it read the answers unless the gateway refuses them.
	run, _ := local.runToEnd(t, &baagentv1.RunSpec{Input: question})
	id := url.PathEscape(run.GetRunId())
	for _, path := range []string{"/v1/runs", "/v1/runs/" + id, "/v1/runs/" + id + "/events?cursor=earliest", "/v1/whoami", "/"} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port} {
			if code, body := (edgeRequest{method: http.MethodGet, path: path, host: host}).do(t, ctx, addr); code != http.StatusForbidden {
				t.Errorf("GET %s with Host %s: %d %.200s, want 403", path, host, code, body)
			}
		}
	}

	// A WebSocket is not protected by CORS at all: a foreign page could
	// read the stream, so the handshake checks Origin.
	for _, origin := range []string{"http://evil.example", "null", "http://localhost.evil.example:" + port} {
		if ws := wsHandshake(t, ctx, addr, "/v1/runs/"+id+"/ws?cursor=earliest", map[string]string{"Origin": origin}); ws.status != http.StatusForbidden {
			t.Errorf("WebSocket from Origin %s: %d %.200s, want 403", origin, ws.status, ws.body)
		}
	}

	// The dashboard's own origin, under every loopback name, still works.
	for _, c := range []struct {
		name string
		req  edgeRequest
	}{
		{"dashboard page", edgeRequest{method: http.MethodGet, path: "/"}},
		{"dashboard page as localhost", edgeRequest{method: http.MethodGet, path: "/", host: "localhost:" + port}},
		{"dashboard page as [::1]", edgeRequest{method: http.MethodGet, path: "/", host: "[::1]:" + port}},
		{"run list", edgeRequest{method: http.MethodGet, path: "/v1/runs"}},
		{"same-origin JSON POST", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec,
			header: map[string]string{"Origin": own, "Content-Type": "application/json"}}},
		{"same-origin JSON POST as localhost", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec, host: "localhost:" + port,
			header: map[string]string{"Origin": "http://localhost:" + port, "Content-Type": "application/json; charset=utf-8"}}},
		{"non-browser JSON POST (no Origin)", edgeRequest{method: http.MethodPost, path: "/v1/runs", body: spec,
			header: map[string]string{"Content-Type": "application/json"}}},
		{"same-origin stream token", edgeRequest{method: http.MethodPost, path: "/v1/auth/stream-token",
			header: map[string]string{"Origin": own, "Content-Type": "application/json"}}},
		{"SSE replay", edgeRequest{method: http.MethodGet, path: "/v1/runs/" + id + "/events?cursor=earliest"}},
		{"health", edgeRequest{method: http.MethodGet, path: "/healthz"}},
	} {
		if code, body := c.req.do(t, ctx, addr); code != http.StatusOK {
			t.Errorf("%s: %d %.300s, want 200", c.name, code, body)
		}
	}
	for _, h := range []map[string]string{{"Origin": own}, nil} {
		if ws := wsHandshake(t, ctx, addr, "/v1/runs/"+id+"/ws?cursor=earliest", h); ws.status != http.StatusSwitchingProtocols {
			t.Errorf("WebSocket with Origin %q: %d %.200s, want 101", h["Origin"], ws.status, ws.body)
		} else {
			ws.Close()
		}
	}
}

// TestWebSocketFromAForeignOriginIsRefusedWithKeys: with API keys too, a
// WebSocket handshake from a foreign page is refused even with a valid
// credential (a page that got hold of a stream token could otherwise read
// the stream across origins; CORS does not apply to WebSockets).
// Non-browser clients, which send no Origin, are served.
func TestWebSocketFromAForeignOriginIsRefusedWithKeys(t *testing.T) {
	s, acme, _ := twoTenants(t)
	addr := s.App.GatewayHTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, _ := acme.runToEnd(t, &baagentv1.RunSpec{Input: question})
	path := "/v1/runs/" + url.PathEscape(run.GetRunId()) + "/ws?cursor=earliest"
	auth := "Bearer " + keyAcme

	if ws := wsHandshake(t, ctx, addr, path, map[string]string{"Authorization": auth, "Origin": "http://evil.example"}); ws.status != http.StatusForbidden || !strings.Contains(ws.body, "Origin") {
		t.Errorf("WebSocket from a foreign Origin with a valid key: %d %.200s, want 403 naming Origin", ws.status, ws.body)
	}
	code, body := edgeRequest{method: http.MethodPost, path: "/v1/auth/stream-token", body: "{}",
		header: map[string]string{"Authorization": auth, "Content-Type": "application/json"}}.do(t, ctx, addr)
	token := between(body, `"token":"`, `"`)
	if code != http.StatusOK || token == "" {
		t.Fatalf("stream token: %d %s", code, body)
	}
	if ws := wsHandshake(t, ctx, addr, path+"&token="+url.QueryEscape(token), map[string]string{"Origin": "http://evil.example"}); ws.status != http.StatusForbidden {
		t.Errorf("WebSocket from a foreign Origin with a stream token: %d %.200s, want 403", ws.status, ws.body)
	}
	for _, h := range []map[string]string{{"Authorization": auth}, {"Authorization": auth, "Origin": "http://" + addr}} {
		if ws := wsHandshake(t, ctx, addr, path, h); ws.status != http.StatusSwitchingProtocols {
			t.Errorf("WebSocket with Origin %q: %d %.200s, want 101", h["Origin"], ws.status, ws.body)
		} else {
			ws.Close()
		}
	}
}

// between returns the text of s between the first prefix and the next
// suffix after it ("" if absent).
func between(s, prefix, suffix string) string {
	_, rest, ok := strings.Cut(s, prefix)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, suffix)
	return v
}
