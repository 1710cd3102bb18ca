package gateway

import (
	"log/slog"
	"net/http"
	"testing"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit/pgtest"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/memory"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/store/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newRealMemoryEnv is a gateway whose memory peer is the real memory
// server on loopback, on a PostgreSQL database of its own, without an
// extraction model (episodes are stored, then marked failed).
func newRealMemoryEnv(t *testing.T) *env {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	st, err := postgres.Open(testCtx(t), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	srv, err := memory.New(memory.Options{Store: st, Embedder: embed.NewLexical(0), Logger: slog.New(slog.DiscardHandler), CommunityInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })
	return newEnv(t, Options{Memory: baagentv1.NewMemoryServiceClient(conn)})
}

// TestMemoryTenantIsolationWithTheRealServer: what one tenant's key adds
// another tenant's key can neither read, list, search nor delete; each
// attempt is the NotFound of an unknown id.
func TestMemoryTenantIsolationWithTheRealServer(t *testing.T) {
	t.Parallel()
	e := newRealMemoryEnv(t)
	r := e.do(t, keyAcme, "POST", "/v1/memory/episodes", "application/json", []byte(`{"content":"Acme's fiscal year starts in April.","conversation_id":"c1"}`))
	ep, _ := r.body["episode"].(map[string]any)
	id, _ := ep["id"].(string)
	if r.code != http.StatusOK || id == "" || ep["tenant"] != "acme" {
		t.Fatalf("add as acme: %d %s", r.code, r.raw)
	}

	if r := e.do(t, keyInitech, "GET", "/v1/memory/episodes/"+id, "", nil); r.code != http.StatusNotFound {
		t.Errorf("initech reads acme's episode: %d %s", r.code, r.raw)
	}
	unknown := e.do(t, keyInitech, "GET", "/v1/memory/episodes/ep_00000000000000000000000000", "", nil)
	if unknown.code != http.StatusNotFound {
		t.Errorf("unknown episode: %d %s", unknown.code, unknown.raw)
	}
	if r := e.do(t, keyInitech, "DELETE", "/v1/memory/episodes/"+id, "", nil); r.code != http.StatusNotFound {
		t.Errorf("initech deletes acme's episode: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "GET", "/v1/memory/episodes", "", nil); r.code != http.StatusOK {
		t.Errorf("initech lists: %d %s", r.code, r.raw)
	} else if eps, _ := r.body["episodes"].([]any); len(eps) != 0 {
		t.Errorf("initech lists acme's episodes: %s", r.raw)
	}
	if r := e.do(t, keyInitech, "GET", "/v1/memory/stats", "", nil); r.code != http.StatusOK || r.body["episodes"] != nil {
		t.Errorf("initech's stats count acme's episode: %d %s", r.code, r.raw)
	}

	if r := e.do(t, keyAcme, "GET", "/v1/memory/episodes/"+id, "", nil); r.code != http.StatusOK {
		t.Errorf("acme reads its episode: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", "/v1/memory/episodes?conversation_id=c1", "", nil); r.code != http.StatusOK {
		t.Errorf("acme lists: %d %s", r.code, r.raw)
	} else if eps, _ := r.body["episodes"].([]any); len(eps) != 1 {
		t.Errorf("acme lists %d episodes, want 1: %s", len(eps), r.raw)
	}
	// Settings are per tenant too.
	if r := e.do(t, keyAcme, "PATCH", "/v1/memory/settings", "application/json", []byte(`{"capture_runs":false}`)); r.code != http.StatusOK {
		t.Fatalf("acme patches its settings: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyInitech, "GET", "/v1/memory/settings", "", nil)
	s, _ := r.body["settings"].(map[string]any)
	if r.code != http.StatusOK || s["capture_runs"] != true {
		t.Errorf("initech's settings changed with acme's: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "DELETE", "/v1/memory/episodes/"+id, "", nil); r.code != http.StatusOK {
		t.Errorf("acme deletes its episode: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", "/v1/memory/episodes/"+id, "", nil); r.code != http.StatusNotFound {
		t.Errorf("deleted episode: %d %s", r.code, r.raw)
	}
}
