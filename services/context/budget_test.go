package contextsvc

import (
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestBudgetSplit checks the budget split and trigger on a model with an
// 8,000-token window.
func TestBudgetSplit(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	hist, facts := genConversation(convSpec{rounds: 20, stepsPerRnd: 2, outputWords: 150, plantEvery: 3, skillAtRound: -1}, 8)
	appendAll(t, e.client, "t", "c", hist)
	stored := readAll(t, e.client, "t", "c", 0)
	req := buildReqFor("test-8k", strategyExtract)
	resp, err := e.client.BuildWindow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	windowCheck{model: "test-8k", history: stored, facts: facts}.check(t, e, req, resp)
	b := resp.GetBreakdown()
	// reserve = max(15% of 8000, min(max output 1000, 8192)) = 1200
	if b.GetOutputReserveTokens() != 1200 || b.GetInputBudgetTokens() != 6800 {
		t.Fatalf("reserve %d, input budget %d", b.GetOutputReserveTokens(), b.GetInputBudgetTokens())
	}
	if resp.GetStrategy() != strategyExtract || resp.GetCompression().GetSummarizedMessageCount() == 0 {
		t.Fatalf("strategy %v, %d summarized", resp.GetStrategy(), resp.GetCompression().GetSummarizedMessageCount())
	}
	// TRUNCATE can always get below the trigger when what it may not drop
	// fits there: 80% of the input budget, and less with a lower trigger.
	for _, trig := range []float64{0.8, 0.5} {
		req := buildReqFor("test-8k", strategyTruncate)
		req.Budget = &baagentv1.BudgetOptions{CompressionTriggerPct: proto.Float64(trig)}
		resp, err := e.client.BuildWindow(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		windowCheck{model: "test-8k", history: stored, facts: facts}.check(t, e, req, resp)
		if limit := int64(float64(6800) * trig); resp.GetBreakdown().GetTotalTokens() > limit || resp.GetStrategy() != strategyTruncate {
			t.Errorf("trigger %v: %v window of %d tokens, want at most %d", trig, resp.GetStrategy(), resp.GetBreakdown().GetTotalTokens(), limit)
		}
	}
}
