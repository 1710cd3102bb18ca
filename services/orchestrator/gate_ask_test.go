package orchestrator

import (
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

func TestAskGateApplies(t *testing.T) {
	t.Parallel()
	offered := &toolset{ask: []string{AskClarificationTool, AskDecisionTool}}
	for _, tc := range []struct {
		tool string
		ts   *toolset
		want bool
	}{
		{AskClarificationTool, offered, true},
		{AskDecisionTool, offered, true},
		{"sql_query", offered, false},
		{AskDecisionTool, &toolset{}, false}, // not offered: an unknown tool
	} {
		if got := (askGate{}).applies(testCall(tc.tool, checkpoint.ToolRecord{}, tc.ts)); got != tc.want {
			t.Errorf("applies(%s) = %v, want %v", tc.tool, got, tc.want)
		}
	}
}

func TestAskAnswer(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	ask := func(args string) *hitl.Wait {
		w, err := hitl.ParseAsk(AskDecisionTool, args, "q_s1_c0", 1, now, hitl.Timeouts{Clarification: time.Minute, Decision: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	withRec := ask(`{"decision_type":"method","context":"How?","options":[{"label":"fast"},{"label":"safe","is_recommended":true}]}`)
	noRec := ask(`{"decision_type":"method","context":"How?","options":[{"label":"fast"},{"label":"safe"}]}`)
	answered := *withRec
	answered.Answer = &hitl.Answer{Text: "fast", Selected: []string{"fast"}}
	for _, tc := range []struct {
		name     string
		w        *hitl.Wait
		answer   string
		obs      string
		timedOut bool
	}{
		{"answered", &answered, "fast", "The user answered: fast", false},
		{"recommended at the deadline", withRec, "safe", `within 300 s; continuing with the recommended option "safe"`, true},
		{"nothing recommended", noRec, "", "proceed with your best judgment", true},
	} {
		a, obs, to := askAnswer(tc.w)
		if a != tc.answer || !strings.Contains(obs, tc.obs) || to != tc.timedOut {
			t.Errorf("%s: askAnswer = %q, %q, %v", tc.name, a, obs, to)
		}
	}
	if p := withRec.Pending(); p.GetDecision().GetDecisionType() != baagentv1.DecisionType_DECISION_TYPE_METHOD {
		t.Errorf("question %v", p)
	}
}
