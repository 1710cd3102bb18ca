package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:7780":      "http://localhost:7780",
		"HTTP://Dash.Example.com":    "http://dash.example.com:80",
		"https://dash.example.com":   "https://dash.example.com:443",
		"http://[::1]:7780":          "http://[::1]:7780",
		"https://a.example:8443":     "https://a.example:8443",
		"http://127.0.0.1:7780":      "http://127.0.0.1:7780",
		"null":                       "",
		"file://":                    "",
		"ftp://a.example":            "",
		"http://a.example/path":      "",
		"http://user@a.example":      "",
		"http://a.example:0":         "",
		"http://a.example:99999":     "",
		"http://a.example?x=1":       "",
		"http://":                    "",
		"javascript:alert(1)":        "",
		"http://a.example:7780#frag": "",
	} {
		got, _, _, err := parseOrigin(in)
		if (err == nil) != (want != "") || got != want {
			t.Errorf("parseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := newOriginPolicy([]string{"https://dash.example.com/", " http://localhost:3000 ", ""}); err != nil {
		t.Errorf("valid allow-list refused: %v", err)
	}
	if _, err := newOriginPolicy([]string{"*"}); err == nil || !strings.Contains(err.Error(), "gateway-allowed-origins") {
		t.Errorf("allow-list entry * accepted (%v): it would turn the protection off", err)
	}
	srv := New(Options{AllowedOrigins: []string{"dash.example.com"}})
	if err := srv.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "dash.example.com") {
		t.Errorf("a bad allowed origin is not a startup error naming it: %v", err)
	}
}

// request is one raw HTTP request to the gateway under test.
type request struct {
	method, path, body, host string
	header                   map[string]string
}

func (e *env) send(t *testing.T, r request) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), r.method, e.base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(b), resp.Header
}

func TestNoKeyModeServesOnlyItsOwnOrigin(t *testing.T) {
	e := newEnv(t, Options{APIKeys: map[string]string{}, AllowedOrigins: []string{"https://dash.example.com"}})
	own := e.base // http://127.0.0.1:port
	port := own[strings.LastIndex(own, ":")+1:]
	json := map[string]string{"Content-Type": "application/json"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	start := `{"spec":{"input":"Which region grew fastest?"}}`
	for _, c := range []struct {
		name string
		req  request
		want int
	}{
		// Refused: cross-site, rebinding, not JSON.
		{"cross-site text/plain POST", request{method: "POST", path: "/v1/runs", body: start,
			header: map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}}, 403},
		{"cross-site JSON POST", request{method: "POST", path: "/v1/runs", body: start, header: with(json, "Origin", "http://evil.example")}, 403},
		{"Origin null", request{method: "POST", path: "/v1/runs", body: start, header: with(json, "Origin", "null")}, 403},
		{"own host, other port", request{method: "POST", path: "/v1/runs", body: start, header: with(json, "Origin", "http://127.0.0.1:1")}, 403},
		{"text/plain without Origin", request{method: "POST", path: "/v1/runs", body: start, header: map[string]string{"Content-Type": "text/plain"}}, 415},
		{"form without Origin", request{method: "POST", path: "/v1/runs/run-1/cancel", body: "a=b",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415},
		{"no Content-Type", request{method: "POST", path: "/v1/auth/stream-token"}, 415},
		{"rebinding GET", request{method: "GET", path: "/v1/runs", host: "evil.example:" + port}, 403},
		{"rebinding GET without port", request{method: "GET", path: "/v1/whoami", host: "evil.example"}, 403},
		{"rebinding dashboard", request{method: "GET", path: "/", host: "evil.example:" + port}, 403},
		{"rebinding POST", request{method: "POST", path: "/v1/runs", body: start, host: "evil.example:" + port, header: json}, 403},
		{"loopback-looking name", request{method: "GET", path: "/v1/runs", host: "127.0.0.1.nip.io:" + port}, 403},
		// Served: own origin, allowed origin, non-browser clients.
		{"health under any name", request{method: "GET", path: "/healthz", host: "evil.example"}, 200},
		{"dashboard", request{method: "GET", path: "/"}, 200},
		{"dashboard as localhost", request{method: "GET", path: "/", host: "localhost:" + port}, 200},
		{"dashboard as [::1]", request{method: "GET", path: "/", host: "[::1]:" + port}, 200},
		{"list", request{method: "GET", path: "/v1/runs"}, 200},
		{"same-origin JSON POST", request{method: "POST", path: "/v1/runs", body: start, header: with(json, "Origin", own)}, 200},
		{"same-origin POST, charset", request{method: "POST", path: "/v1/runs", body: start,
			header: map[string]string{"Origin": own, "Content-Type": "application/json; charset=utf-8"}}, 200},
		{"same-origin as localhost", request{method: "POST", path: "/v1/runs", body: start, host: "localhost:" + port,
			header: with(json, "Origin", "http://localhost:"+port)}, 200},
		{"JSON POST without Origin", request{method: "POST", path: "/v1/runs", body: start, header: json}, 200},
		{"stream token, JSON, no body", request{method: "POST", path: "/v1/auth/stream-token", header: with(json, "Origin", own)}, 200},
		{"allowed origin", request{method: "POST", path: "/v1/runs", body: start, header: with(json, "Origin", "https://dash.example.com")}, 200},
		{"allowed origin's host", request{method: "GET", path: "/v1/runs", host: "dash.example.com"}, 200},
	} {
		if code, body, _ := e.send(t, c.req); code != c.want {
			t.Errorf("%s: %d %.300s, want %d", c.name, code, body, c.want)
		}
	}
	for reason, want := range map[string]float64{refusedHost: 5, refusedOrigin: 4, refusedContentType: 3} {
		if got := testutil.ToFloat64(e.srv.edge.browserRefused.WithLabelValues(reason)); got != want {
			t.Errorf("browser_requests_refused_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	// The 415 and 403 say what to do.
	_, body, _ := e.send(t, request{method: "POST", path: "/v1/runs", body: start})
	if !strings.Contains(body, "Content-Type: application/json") {
		t.Errorf("415 body does not say what to send: %s", body)
	}
	_, body, _ = e.send(t, request{method: "GET", path: "/v1/runs", host: "evil.example"})
	if !strings.Contains(body, "gateway-allowed-origins") || !strings.Contains(body, "DNS rebinding") {
		t.Errorf("403 body does not explain: %s", body)
	}
}

func TestKeyedModeAcceptsCrossOriginRequestsButNotWebSockets(t *testing.T) {
	e := newEnv(t, Options{AllowedOrigins: []string{"https://dash.example.com"}})
	e.run("acme", "run-1")
	// A key in a header cannot be sent across origins without a preflight:
	// nothing to refuse.
	if code, body, _ := e.send(t, request{method: "POST", path: "/v1/runs", body: `{"spec":{"input":"x"}}`,
		host: "api.example.com", header: map[string]string{"Authorization": "Bearer " + keyAcme, "Origin": "http://evil.example", "Content-Type": "text/plain"}}); code != 200 {
		t.Errorf("keyed POST from a foreign Origin and Host: %d %s", code, body)
	}
	ws := "ws" + strings.TrimPrefix(e.base, "http") + "/v1/runs/run-1/ws"
	for origin, want := range map[string]string{
		"http://evil.example":      "403",
		"null":                     "403",
		"https://dash.example.com": "",
		e.base:                     "",
		"":                         "",
	} {
		h := bearerHeader(keyAcme)
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, err := dialWS(testCtx(t), ws, h)
		switch {
		case want == "" && err != nil:
			t.Errorf("WebSocket from Origin %q: %v, want 101", origin, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("WebSocket from Origin %q: %v, want %s", origin, err, want)
		}
		if c != nil {
			c.Close()
		}
	}
	// Refused before the credential is looked at: a stream token does not
	// help, and a bad one is not counted as a failed authentication.
	h := http.Header{"Origin": {"http://evil.example"}}
	if _, err := dialWS(testCtx(t), ws+"?token="+e.streamToken(t, keyAcme), h); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("WebSocket from a foreign Origin with a token: %v, want 403", err)
	}
	if got := testutil.ToFloat64(e.srv.edge.browserRefused.WithLabelValues(refusedOrigin)); got != 3 {
		t.Errorf("browser_requests_refused_total{reason=origin} = %v, want 3", got)
	}
}

func TestNoKeyModeWebSocketOriginIsChecked(t *testing.T) {
	e := newEnv(t, Options{APIKeys: map[string]string{}})
	e.run(DefaultTenant, "run-1")
	ws := "ws" + strings.TrimPrefix(e.base, "http") + "/v1/runs/run-1/ws"
	if _, err := dialWS(testCtx(t), ws, http.Header{"Origin": {"http://evil.example"}}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("WebSocket from a foreign Origin without keys: %v, want 403", err)
	}
	c, err := dialWS(context.Background(), ws, http.Header{"Origin": {e.base}})
	if err != nil {
		t.Fatalf("WebSocket from the gateway's own origin: %v", err)
	}
	c.Close()
}
