package security

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestHTTPRunsAndStreamsAreInvisibleToOtherTenants: on the HTTP API, the
// SSE stream and the WebSocket, another tenant's run is 404, with the API
// key and with a stream token of the other tenant alike.
func TestHTTPRunsAndStreamsAreInvisibleToOtherTenants(t *testing.T) {
	s, acme, _ := twoTenants(t)
	run, _ := acme.runToEnd(t, &baagentv1.RunSpec{Input: question})
	base := "http://" + s.App.GatewayHTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	do := func(method, path, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if strings.HasSuffix(path, "/ws") { // a complete WebSocket handshake
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	id := url.PathEscape(run.GetRunId())
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/runs/" + id, ""},
		{http.MethodPost, "/v1/runs/" + id + "/cancel", `{}`},
		{http.MethodPost, "/v1/runs/" + id + "/input", `{"input":{"input_id":"input_1","answer":"yes"}}`},
		{http.MethodGet, "/v1/runs/" + id + "/events?cursor=earliest", ""},
		{http.MethodGet, "/v1/runs/" + id + "/ws", ""},
	} {
		if code, body := do(c.method, c.path, keyGlobex, c.body); code != http.StatusNotFound {
			t.Errorf("globex %s %s: %d %.200s, want 404", c.method, c.path, code, body)
		}
	}
	if code, body := do(http.MethodGet, "/v1/runs", keyGlobex, ""); code != http.StatusOK || strings.Contains(body, run.GetRunId()) {
		t.Errorf("globex GET /v1/runs: %d, lists acme's run: %v", code, strings.Contains(body, run.GetRunId()))
	}

	token := func(key string) string {
		code, body := do(http.MethodPost, "/v1/auth/stream-token", key, `{}`)
		var tok struct {
			Token string `json:"token"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
			t.Fatalf("stream token: %d %s", code, body)
		}
		return url.QueryEscape(tok.Token)
	}
	if code, body := do(http.MethodGet, "/v1/runs/"+id+"/events?cursor=earliest&token="+token(keyGlobex), "", ""); code != http.StatusNotFound {
		t.Errorf("globex's stream token on acme's run: %d %.200s, want 404", code, body)
	}
	// The same request with acme's own token is served: the 404 is isolation.
	if code, body := do(http.MethodGet, "/v1/runs/"+id+"/events?cursor=earliest&token="+token(keyAcme), "", ""); code != http.StatusOK || !strings.Contains(body, `"complete"`) {
		t.Errorf("acme's stream token on its own run: %d %.300s", code, body)
	}
	if code, _ := do(http.MethodGet, "/v1/runs/"+id+"/events?cursor=earliest&token=forged."+token(keyAcme), "", ""); code != http.StatusUnauthorized {
		t.Errorf("a forged stream token: %d, want 401", code)
	}
}
