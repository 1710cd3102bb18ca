package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit/pgtest"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/memory"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/store/postgres"
)

// newRealPatternEnv is newRealMemoryEnv that also returns a client of the
// memory service, through which the test records the traces a run would.
func newRealPatternEnv(t *testing.T) (*env, baagentv1.MemoryServiceClient) {
	t.Helper()
	st, err := postgres.Open(testCtx(t), pgtest.NewDatabase(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	srv, err := memory.New(memory.Options{Store: st, Embedder: embed.NewLexical(0), Logger: slog.New(slog.DiscardHandler), CommunityInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })
	mem := baagentv1.NewMemoryServiceClient(conn)
	return newEnv(t, Options{Memory: mem}), mem
}

// recordRun records a successful run of goal for tenant, as the capture
// consumer does, and returns what the memory service made of it.
func recordRun(t *testing.T, mem baagentv1.MemoryServiceClient, tenant, run, goal string) *baagentv1.RecordTraceResponse {
	t.Helper()
	resp, err := mem.RecordTrace(testCtx(t), &baagentv1.RecordTraceRequest{Tenant: tenant, Trace: &baagentv1.InteractionTrace{
		RunId: run, ConversationId: "conv-1", UserGoal: goal, Success: true, DurationMs: 3000,
		PlanSteps: []*baagentv1.TracePlanStep{
			{Description: "Query revenue by region", Tools: []string{"sql_query"}, Done: true},
			{Description: "Chart the result", Tools: []string{"chart"}, Done: true},
		},
		ToolCalls:   []*baagentv1.TraceToolCall{{Tool: "sql_query", Success: true, PlanStep: 1}, {Tool: "chart", Success: true, PlanStep: 2}},
		FinalResult: "Revenue rose 12% in the North.",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestPatternsTenantIsolationWithTheRealServer: a pattern one tenant's
// runs taught is its own: another tenant's key can neither list, read,
// edit, delete, mark nor share it (each the NotFound of an unknown id)
// until it is granted, and then only read it. Edits are checked against
// the version; marking useless keeps the kind of task from being learned.
func TestPatternsTenantIsolationWithTheRealServer(t *testing.T) {
	t.Parallel()
	e, mem := newRealPatternEnv(t)
	const goal = "Report the revenue by region for last quarter"
	rec := recordRun(t, mem, "acme", "run-acme-1", goal)
	id := rec.GetPatternId()
	if !rec.GetCreated() || id == "" {
		t.Fatalf("the first trace made no pattern: %v", rec)
	}
	path := "/v1/patterns/" + id

	r := e.do(t, keyAcme, "GET", "/v1/patterns", "", nil)
	if list, _ := r.body["patterns"].([]any); r.code != http.StatusOK || len(list) != 1 || !strings.Contains(r.raw, id) {
		t.Fatalf("acme lists: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", "/v1/patterns?task_type=report&state=candidate", "", nil); r.code != http.StatusOK || !strings.Contains(r.raw, id) {
		t.Errorf("acme lists its report candidates: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", "/v1/patterns?state=active", "", nil); r.code != http.StatusOK || strings.Contains(r.raw, id) {
		t.Errorf("acme's active patterns list a candidate: %d %s", r.code, r.raw)
	}

	// Another tenant: nothing to see, nothing to touch.
	if r := e.do(t, keyInitech, "GET", "/v1/patterns?include_shared=true", "", nil); r.code != http.StatusOK || strings.Contains(r.raw, id) {
		t.Errorf("initech lists acme's pattern: %d %s", r.code, r.raw)
	}
	unknown := e.do(t, keyInitech, "GET", "/v1/patterns/pt_00000000000000000000000000", "", nil)
	if unknown.code != http.StatusNotFound {
		t.Errorf("unknown pattern: %d %s", unknown.code, unknown.raw)
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", path, ""},
		{"PATCH", path, `{"name":"stolen"}`},
		{"DELETE", path, ""},
		{"POST", path + "/useless", ""},
		{"POST", path + "/grants", `{"grantee_tenant":"initech"}`},
		{"POST", path + "/grants", `{"grantee_tenant":"globex"}`},
		{"DELETE", path + "/grants/globex", ""},
	} {
		if r := e.do(t, keyInitech, req.method, req.path, "application/json", []byte(req.body)); r.code != http.StatusNotFound && !(r.code == http.StatusBadRequest && strings.Contains(req.body, `"initech"`)) {
			t.Errorf("initech %s %s: %d %s, want 404", req.method, req.path, r.code, r.raw)
		}
	}

	// Acme reads and edits it at its version.
	r = e.do(t, keyAcme, "GET", path, "", nil)
	etag := r.h.Get("ETag")
	if r.code != http.StatusOK || etag == "" {
		t.Fatalf("acme reads: %d ETag %q %s", r.code, etag, r.raw)
	}
	if r := e.do(t, keyAcme, "PATCH", path, "application/json", []byte(`{"name":"Regional revenue report"}`), "If-Match", `"999"`); r.code != http.StatusPreconditionFailed {
		t.Errorf("stale edit: %d %s, want 412", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "PATCH", path, "application/json", []byte(`{"name":"Regional revenue report","tool_chain":["sql_query","chart"]}`), "If-Match", etag)
	p, _ := r.body["pattern"].(map[string]any)
	if r.code != http.StatusOK || p["name"] != "Regional revenue report" || r.h.Get("ETag") == etag {
		t.Fatalf("acme edits: %d ETag %q %s", r.code, r.h.Get("ETag"), r.raw)
	}

	// Shared: initech may read it, not change it; revoked: gone again.
	if r := e.do(t, keyAcme, "POST", path+"/grants", "application/json", []byte(`{"grantee_tenant":"initech"}`)); r.code != http.StatusOK {
		t.Fatalf("acme grants: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", "/v1/patterns/grants", "", nil); r.code != http.StatusOK || !strings.Contains(r.raw, `"grantee_tenant":"initech"`) {
		t.Errorf("acme's grants: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "GET", "/v1/patterns/grants", "", nil); r.code != http.StatusOK || strings.Contains(r.raw, id) {
		t.Errorf("initech lists acme's grants: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyInitech, "GET", "/v1/patterns?include_shared=true", "", nil)
	if r.code != http.StatusOK || !strings.Contains(r.raw, id) || !strings.Contains(r.raw, `"shared":true`) {
		t.Errorf("initech lists the shared pattern: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "GET", "/v1/patterns", "", nil); r.code != http.StatusOK || strings.Contains(r.raw, id) {
		t.Errorf("initech's own patterns list the shared one: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "GET", path, "", nil); r.code != http.StatusOK {
		t.Errorf("initech reads the shared pattern: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "PATCH", path, "application/json", []byte(`{"name":"mine now"}`)); r.code != http.StatusForbidden {
		t.Errorf("initech edits the shared pattern: %d %s, want 403", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "DELETE", path+"/grants/initech", "", nil); r.code != http.StatusOK {
		t.Fatalf("acme revokes: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "GET", path, "", nil); r.code != http.StatusNotFound {
		t.Errorf("initech reads a revoked pattern: %d %s", r.code, r.raw)
	}

	// Switches are per tenant: acme's off does not turn initech's off.
	if r := e.do(t, keyAcme, "PATCH", "/v1/memory/settings", "application/json", []byte(`{"patterns_enabled":false}`)); r.code != http.StatusOK {
		t.Fatalf("acme switches patterns off: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", "/v1/memory/settings", "", nil); r.code != http.StatusOK || r.body["patterns_effective"] == true {
		t.Errorf("acme's settings: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, "GET", "/v1/memory/settings", "", nil); r.code != http.StatusOK || r.body["patterns_effective"] != true {
		t.Errorf("initech's settings changed with acme's: %d %s", r.code, r.raw)
	}
	if rec := recordRun(t, mem, "acme", "run-acme-off", goal); !rec.GetSkipped() {
		t.Errorf("a trace with patterns off: %v", rec)
	}
	if r := e.do(t, keyAcme, "PATCH", "/v1/memory/settings", "application/json", []byte(`{"patterns_enabled":true}`)); r.code != http.StatusOK {
		t.Fatalf("acme switches patterns on: %d %s", r.code, r.raw)
	}

	// Useless: deleted, and the same kind of task is not learned again.
	if r := e.do(t, keyAcme, "POST", path+"/useless", "application/json", []byte(`{"reason":"charts the wrong metric"}`)); r.code != http.StatusOK {
		t.Fatalf("acme marks useless: %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, "GET", path, "", nil); r.code != http.StatusNotFound {
		t.Errorf("a pattern marked useless is still there: %d %s", r.code, r.raw)
	}
	for i := range 2 {
		if rec := recordRun(t, mem, "acme", fmt.Sprintf("run-acme-after-%d", i), goal); rec.GetCreated() || rec.GetPatternId() != "" {
			t.Errorf("trace %d after marking useless learned %v", i, rec)
		}
	}
	// Initech's own runs still teach it.
	if rec := recordRun(t, mem, "initech", "run-initech-1", goal); !rec.GetCreated() {
		t.Errorf("initech's trace: %v", rec)
	}
}
