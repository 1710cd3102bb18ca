package orchestrator

import (
	"regexp"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestHITLScenarios plays the human-in-the-loop scenarios of
// examples/scenarios through the whole pipeline (the scripted model over
// HTTP, the real tokens, skills, context and toolrunner services) and
// answers their questions as a user would, with an option that is not the
// recommended one, so the answer visibly steers the result.
func TestHITLScenarios(t *testing.T) {
	h, _ := scenarioHarness(t)

	for _, tc := range []struct {
		scenario, input, answer string
		asked                   string // the asked event
		want                    *regexp.Regexp
	}{
		{"hitl-clarification-period", "Compare our revenue across periods.", "2025 vs 2026", "clarification_asked",
			regexp.MustCompile(`(?s)You asked to compare \*\*2025 vs 2026\*\*.*2025.*Read each 2026 quarter against the same quarter of 2025`)},
		{"hitl-decision-region", "Prepare the regional revenue review for 2026.", "south", "decision_asked",
			regexp.MustCompile(`(?s)The review starts with \*\*South\*\*: [0-9.]+ USD of 2026 revenue from \d+ orders\..*highest first`)},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			ctx := testCtx(t)
			run := h.start(ctx, &baagentv1.RunSpec{Input: tc.input})
			p := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT).GetPendingInput()
			id := p.GetClarification().GetQuestionId() + p.GetDecision().GetDecisionId()
			if id == "" {
				t.Fatalf("pending input %v", p)
			}
			if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: id, Answer: tc.answer}); err != nil {
				t.Fatal(err)
			}
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			got := types(evs)
			if indexOf(got, tc.asked) < 0 {
				t.Errorf("no %s event: %v", tc.asked, got)
			}
			last := evs[len(evs)-1].GetComplete().GetContent()
			if !tc.want.MatchString(last) {
				t.Errorf("answer does not match %s:\n%s", tc.want, last)
			}
			t.Logf("answer:\n%s", last)
			for _, e := range evs {
				if a := e.GetClarificationAnswered(); a != nil && a.GetTimedOut() {
					t.Errorf("timed out: %v", a)
				}
				if a := e.GetDecisionAnswered(); a != nil && a.GetTimedOut() {
					t.Errorf("timed out: %v", a)
				}
			}
		})
	}
}
