package external

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
	"github.com/baagent/baagent/services/toolrunner/mcpauth"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

func newTestFlow(t *testing.T) *mcpauth.Flow {
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
	key := make([]byte, mcpauth.KeySize)
	_, _ = rand.Read(key)
	store, err := mcpauth.NewStore(kv, states, key)
	if err != nil {
		t.Fatal(err)
	}
	return &mcpauth.Flow{Store: store}
}

// An unreachable server fails the tenant's calls as unavailable, and the
// failure is remembered for a while instead of connecting on every call.
func TestOAuthSourceUnreachableServerIsNotRedialedAtOnce(t *testing.T) {
	gone := httptest.NewServer(nil)
	url := gone.URL + "/mcp"
	gone.Close()
	flow := newTestFlow(t)
	g := &mcpauth.Grant{ClientID: "c", TokenURL: "http://127.0.0.1:1/token", Resource: url,
		AccessToken: "tok", Expiry: time.Now().Add(time.Hour), UpdatedAt: time.Now()}
	if err := flow.Store.PutGrant(context.Background(), "acme", "linear", g); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{MCPServers: []MCPServerConfig{
		{Name: "linear", HTTP: &HTTPConfig{URL: url}, Auth: AuthOAuth, Timeout: Duration(5 * time.Second)},
	}}, Options{OAuth: flow})
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, m)
	defer stop()
	ts := m.Sources()[0].(tool.TenantSource)
	ctx := context.Background()
	for range 3 {
		if got := ts.TenantTools(ctx, "acme"); len(got) != 0 {
			t.Fatalf("TenantTools = %d tools from an unreachable server", len(got))
		}
		tl, ok := ts.TenantTool(ctx, "acme", "mcp__linear__echo")
		if !ok {
			t.Fatal("the tool name of the server did not resolve")
		}
		_, err := tl.Execute(ctx, tool.Call{})
		var te *tool.Error
		if !errors.As(err, &te) || te.Code == CodeAuthRequired {
			t.Fatalf("Execute error = %v, want the server unavailable (not an authorization problem)", err)
		}
	}
	if n := gauge(t, m, "list_failures", "mcp:linear"); n != 1 {
		t.Fatalf("connect attempts = %v, want 1 within the retry delay", n)
	}
	st, err := flow.Status(ctx, "acme", "linear")
	if err != nil || !st.Authorized {
		t.Fatalf("an unreachable server dropped the grant: %v %v", st, err)
	}
}
