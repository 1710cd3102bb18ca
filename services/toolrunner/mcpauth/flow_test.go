package mcpauth

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// testClock is a settable clock for the flow.
type testClock struct{ off atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *testClock) advance(d time.Duration) { c.off.Add(int64(d)) }

type env struct {
	flow    *Flow
	store   *Store
	kv      jetstream.KeyValue
	as      *testAS
	clock   *testClock
	mcpURL  string
	browser *http.Client
	reg     *prometheus.Registry
}

func testKey(t *testing.T) []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// newEnvB is a store on an embedded NATS server, for benchmarks.
func newEnvB(b *testing.B) *Store {
	ns := natstest.StartNATS(b)
	js, _ := natstest.Connect(b, ns.ClientURL(), b.Name())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, natsx.BucketMCPOAuth)
	if err != nil {
		b.Fatal(err)
	}
	states, err := js.KeyValue(ctx, natsx.BucketMCPOAuthState)
	if err != nil {
		b.Fatal(err)
	}
	k := make([]byte, KeySize)
	_, _ = rand.Read(k)
	st, err := NewStore(kv, states, k)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ns := natstest.StartNATS(t)
	js, _ := natstest.Connect(t, ns.ClientURL(), t.Name())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, natsx.BucketMCPOAuth)
	if err != nil {
		t.Fatal(err)
	}
	states, err := js.KeyValue(ctx, natsx.BucketMCPOAuthState)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(kv, states, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: store, kv: kv, as: newTestAS(t, time.Hour), clock: &testClock{}, reg: reg}
	e.mcpURL = newProtectedMCP(t, e.as)
	e.flow = &Flow{Store: store, Metrics: m, Now: e.clock.now}
	// The gateway's callback: it hands code and state to the flow, as
	// GET /v1/mcp/oauth/callback does.
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if _, err := e.flow.Complete(r.Context(), q.Get("state"), q.Get("code")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("authorized"))
	}))
	t.Cleanup(cb.Close)
	e.flow.RedirectURL = cb.URL + "/v1/mcp/oauth/callback"
	e.browser = &http.Client{Timeout: 10 * time.Second}
	return e
}

func (e *env) server() Server { return Server{Name: "linear", URL: e.mcpURL} }

// authorize runs the whole flow for tenant like a user would: start, open
// the URL in a browser that follows the redirect to the callback.
func (e *env) authorize(t *testing.T, tenant string) *Started {
	t.Helper()
	st, err := e.flow.Start(context.Background(), tenant, e.server())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	resp, err := e.browser.Get(st.AuthorizationURL)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback answered %s", resp.Status)
	}
	return st
}

func (e *env) callEcho(t *testing.T, tenant string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.mcpURL,
		HTTPClient: &http.Client{Transport: e.flow.Transport(tenant, "linear", nil)},
	}, nil)
	if err != nil {
		return "", err
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		return "", err
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

func TestFlowEndToEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// Before authorizing, the tenant has no token and calls say so.
	if _, err := e.flow.Token(ctx, "acme", "linear"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("token before authorizing: %v, want ErrNotAuthorized", err)
	}

	st := e.authorize(t, "acme")
	if got := e.as.count("register"); got != 1 {
		t.Fatalf("registrations = %d, want 1", got)
	}
	e.as.mu.Lock()
	last := e.as.lastAuth
	e.as.mu.Unlock()
	if last.Get("code_challenge_method") != "S256" || last.Get("resource") != e.mcpURL || last.Get("scope") != "tools" {
		t.Fatalf("authorization request %v: want S256, resource %s and the advertised scope", last, e.mcpURL)
	}

	status, err := e.flow.Status(ctx, "acme", "linear")
	if err != nil || !status.Authorized || !status.Refreshable {
		t.Fatalf("status = %+v, %v; want authorized and refreshable", status, err)
	}
	out, err := e.callEcho(t, "acme")
	if err != nil || out != "echo: hi" {
		t.Fatalf("tool call = %q, %v", out, err)
	}

	// The state is single-use.
	if _, err := e.flow.Complete(ctx, st.State, "whatever"); !errors.Is(err, ErrBadState) {
		t.Fatalf("replayed state: %v, want ErrBadState", err)
	}
	// Another tenant sees nothing of acme's grant.
	if _, err := e.flow.Token(ctx, "other", "linear"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("other tenant: %v, want ErrNotAuthorized", err)
	}

	// Near expiry the token is refreshed (with rotation) and still works.
	before, err := e.flow.Token(ctx, "acme", "linear")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.advance(time.Hour - 30*time.Second)
	after, err := e.flow.Token(ctx, "acme", "linear")
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if after.AccessToken == before.AccessToken || after.RefreshToken == before.RefreshToken {
		t.Fatal("token was not refreshed near its expiry")
	}
	if got := e.as.count("token:refresh_token"); got != 1 {
		t.Fatalf("refresh requests = %d, want 1", got)
	}
	if out, err := e.callEcho(t, "acme"); err != nil || out != "echo: hi" {
		t.Fatalf("tool call after refresh = %q, %v", out, err)
	}
	if got := testutil.ToFloat64(e.flow.Metrics.refreshesC.WithLabelValues("ok")); got != 1 {
		t.Fatalf("refresh metric = %v, want 1", got)
	}

	// A second tenant reuses the registered client.
	e.authorize(t, "globex")
	if got := e.as.count("register"); got != 1 {
		t.Fatalf("registrations after a second tenant = %d, want 1", got)
	}

	// Revoke: revoked at the server, forgotten here, calls fail clearly.
	ok, err := e.flow.Revoke(ctx, "acme", "linear")
	if err != nil || !ok {
		t.Fatalf("revoke = %v, %v", ok, err)
	}
	if got := e.as.count("revoke"); got != 1 {
		t.Fatalf("remote revocations = %d, want 1", got)
	}
	if _, err := e.callEcho(t, "acme"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("call after revoke: %v, want ErrNotAuthorized", err)
	}
	if st, _ := e.flow.Status(ctx, "acme", "linear"); st.Authorized {
		t.Fatal("still authorized after revoke")
	}
	// The revoked access token no longer opens the MCP server.
	req, _ := http.NewRequest(http.MethodPost, e.mcpURL, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+after.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked token answered %s, want 401", resp.Status)
	}
	if ok, err := e.flow.Revoke(ctx, "acme", "linear"); ok || err != nil {
		t.Fatalf("second revoke = %v, %v; want false, nil", ok, err)
	}
	// globex is untouched.
	if out, err := e.callEcho(t, "globex"); err != nil || out != "echo: hi" {
		t.Fatalf("globex after acme revoked = %q, %v", out, err)
	}
}

func TestStateExpires(t *testing.T) {
	e := newEnv(t)
	st, err := e.flow.Start(context.Background(), "acme", e.server())
	if err != nil {
		t.Fatal(err)
	}
	e.clock.advance(DefaultStateTTL + time.Second)
	if _, err := e.flow.Complete(context.Background(), st.State, "code"); !errors.Is(err, ErrBadState) {
		t.Fatalf("expired state: %v, want ErrBadState", err)
	}
	if got := testutil.ToFloat64(e.flow.Metrics.completedC.WithLabelValues("bad_state")); got != 1 {
		t.Fatalf("bad_state metric = %v", got)
	}
}

func TestStateSingleUseUnderRace(t *testing.T) {
	e := newEnv(t)
	st, err := e.flow.Start(context.Background(), "acme", e.server())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A bogus code: the exchange fails, but only after the
			// state was taken; whoever does not get it sees ErrBadState.
			if _, err := e.flow.Complete(context.Background(), st.State, "bogus"); errors.Is(err, ErrBadState) {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := bad.Load(); got != 7 {
		t.Fatalf("%d callbacks saw ErrBadState, want 7 (exactly one takes the state)", got)
	}
}

func TestRefreshRefusedForgetsGrant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.authorize(t, "acme")
	// The user revokes the app at the provider.
	e.as.mu.Lock()
	clear(e.as.refresh)
	e.as.mu.Unlock()
	e.clock.advance(2 * time.Hour)
	if _, err := e.flow.Token(ctx, "acme", "linear"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("refused refresh: %v, want ErrNotAuthorized", err)
	}
	if st, _ := e.flow.Status(ctx, "acme", "linear"); st.Authorized {
		t.Fatal("grant kept after the server refused its refresh token")
	}
}

func TestConfiguredClientSkipsRegistration(t *testing.T) {
	e := newEnv(t)
	e.as.mu.Lock()
	e.as.clients["preset"] = asClient{secret: "s3cret", redirect: []string{e.flow.RedirectURL}}
	e.as.mu.Unlock()
	srv := e.server()
	srv.ClientID, srv.ClientSecret, srv.Scopes = "preset", "s3cret", []string{"read"}
	st, err := e.flow.Start(context.Background(), "acme", srv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.AuthorizationURL, "client_id=preset") || !strings.Contains(st.AuthorizationURL, "scope=read") {
		t.Fatalf("authorization URL %s lacks the configured client and scope", st.AuthorizationURL)
	}
	resp, err := e.browser.Get(st.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || e.as.count("register") != 0 {
		t.Fatalf("callback %s, registrations %d; want 200 and none", resp.Status, e.as.count("register"))
	}
}

func TestDiscoveryRefusesServerWithoutPKCE(t *testing.T) {
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"issuer": "http://" + r.Host, "authorization_endpoint": "http://" + r.Host + "/a",
			"token_endpoint": "http://" + r.Host + "/t", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"plain"}})
	}))
	defer as.Close()
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"resource": "http://" + r.Host + "/mcp", "authorization_servers": []string{as.URL}})
	}))
	defer rs.Close()
	f := &Flow{}
	if _, err := f.Discover(context.Background(), rs.URL+"/mcp"); err == nil || !strings.Contains(err.Error(), "S256") {
		t.Fatalf("discover = %v, want a refusal naming S256", err)
	}
}
