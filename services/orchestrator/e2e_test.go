package orchestrator

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	contextsvc "github.com/baagent/baagent/services/context"
	"github.com/baagent/baagent/services/toolrunner"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// realPeers builds the committed context and toolrunner services (history in
// JetStream, tool workspaces seeded with the sample dataset) and runs their
// background loops for the test.
func realPeers(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
	t.Helper()
	return realPeersWith(t, js, tokens, nil)
}

// realPeersWith is realPeers with tool sources besides the built-in tools.
func realPeersWith(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient, sources []tool.Source) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	cs := contextsvc.New(contextsvc.Options{Logger: discard, JetStream: js, Tokens: tokens})
	dir := t.TempDir()
	records, err := idempotency.OpenKV(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := toolrunner.New(toolrunner.Options{
		Logger:           discard,
		WorkspaceDir:     filepath.Join(dir, "workspaces"),
		WorkspaceSeedDir: filepath.Join("..", "..", "examples", "data"),
		ArtifactDir:      filepath.Join(dir, "artifacts"),
		Records:          records,
		Sources:          sources,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = cs.Run(ctx); done <- struct{}{} }()
	go func() { _ = tr.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return cs, tr
}

const q3Query = `SELECT p.category, ROUND(SUM(o.quantity * o.unit_price), 2) AS revenue
FROM orders o JOIN products p ON p.product_id = o.product_id
WHERE o.order_date BETWEEN '2026-07-01' AND '2026-09-30'
GROUP BY p.category ORDER BY revenue DESC`

// TestEndToEndSalesQuestion answers the acceptance question through the
// real tokens, skills, context and toolrunner services: a skill activation,
// a real sql_query over the sample data, and an answer quoting its result.
func TestEndToEndSalesQuestion(t *testing.T) {
	ctx := testCtx(t)
	var observation string
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("A sales question: use the sales-analysis skill.", "call_skill", SkillToolName, `{"name":"sales-analysis"}`), nil
		case 1:
			if got := toolNames(req); !slices.Contains(got, "sql_query") || slices.Contains(got, "file_write") {
				t.Errorf("tools under sales-analysis: %v", got)
			}
			return callTools("Query revenue by category for Q3 2026.", "call_q3", "sql_query", mustJSON(t, map[string]any{"query": q3Query})), nil
		default:
			res := lastToolResults(req)
			if len(res) != 1 || res[0].GetToolCallId() != "call_q3" || res[0].GetIsError() {
				t.Fatalf("tool result %v", res)
			}
			observation = res[0].GetContent()
			top := strings.Split(observation, "\n")[2] // | Software | ... |
			return answer("The category with the highest revenue in Q3 2026 was:\n" + top), nil
		}
	}, harnessOptions{real: realPeers})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "Which product category had the highest revenue last quarter?"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	last := evs[len(evs)-1]
	if last.GetComplete() == nil {
		t.Fatalf("events %v; last %v", types(evs), last)
	}
	if !strings.Contains(last.GetComplete().GetContent(), "| Software |") || !strings.Contains(observation, "| category | revenue |") {
		t.Errorf("answer %q from observation:\n%s", last.GetComplete().GetContent(), observation)
	}
	for _, e := range evs {
		if o := e.GetObserve(); o != nil && o.GetToolName() == "sql_query" && (!o.GetSuccess() || o.GetDurationMs() <= 0) {
			t.Errorf("observe = %v", o)
		}
	}

	// The stored history pairs every tool call with its result.
	hist, err := h.srv.opts.Context.GetHistory(ctx, &baagentv1.GetHistoryRequest{Tenant: testTenant, ConversationId: run.GetConversationId(), PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	checkPairing(t, hist.GetMessages())
	var roles []baagentv1.Role
	for _, m := range hist.GetMessages() {
		roles = append(roles, m.GetRole())
	}
	if len(roles) < 6 || roles[0] != baagentv1.Role_ROLE_USER || roles[len(roles)-1] != baagentv1.Role_ROLE_ASSISTANT {
		t.Errorf("history roles %v", roles)
	}
	final := h.waitRun(ctx, run.GetRunId())
	if final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || final.GetMetrics().GetSkillActivations() != 1 || final.GetMetrics().GetSuccessfulCalls() != 2 {
		t.Errorf("record %v", final)
	}
}
