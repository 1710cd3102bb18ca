package orchestrator

import (
	"context"
	"strconv"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// interventions returns the run's doom_loop_intervened events.
func interventions(evs []*baagentv1.Event) []*baagentv1.DoomLoopIntervenedPayload {
	var out []*baagentv1.DoomLoopIntervenedPayload
	for _, e := range evs {
		if p := e.GetDoomLoopIntervened(); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// checkIntervened asserts one doom_loop_intervened event, right after the
// one decision_answered event, saying choice and intervention.
func checkIntervened(t *testing.T, evs []*baagentv1.Event, choice string, timedOut bool, want baagentv1.DoomLoopIntervention) {
	t.Helper()
	got := types(evs)
	iv := interventions(evs)
	if len(iv) != 1 || strings.Count(strings.Join(got, " "), "decision_answered") != 1 {
		t.Fatalf("%d doom_loop_intervened events: %v", len(iv), got)
	}
	at := indexOf(got, "doom_loop_intervened")
	det := evs[indexOf(got, "doom_loop_detected")].GetDoomLoopDetected()
	if got[at-1] != "decision_answered" || iv[0].GetDecisionId() != det.GetDecisionId() || iv[0].GetDecisionId() == "" ||
		iv[0].GetChoice() != choice || iv[0].GetTimedOut() != timedOut || iv[0].GetIntervention() != want ||
		iv[0].GetToolName() != "noop" || iv[0].GetToolCallId() == "" {
		t.Errorf("doom_loop_intervened %v in %v", iv[0], got)
	}
}

// stuck calls noop with the same arguments until told to correct them.
func stuck(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
	if res, ok := lastToolResult(req); ok && strings.Contains(res, codeDoomLoopCorrect) {
		return answer("changed approach"), nil
	}
	if n > 3 {
		return answer("went on"), nil
	}
	return callTools("", "call_"+string(rune('a'+n)), "noop", `{"same":true}`), nil
}

func TestDoomLoopIntervenedEvent(t *testing.T) {
	for _, tc := range []struct {
		answer string
		want   baagentv1.DoomLoopIntervention
		final  string // "" : the run fails with DOOM_LOOP
	}{
		{hitl.LabelStop, baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP, ""},
		{hitl.LabelContinue, baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE, "went on"},
		{hitl.LabelCorrect, baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CORRECT, "changed approach"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			ctx := testCtx(t)
			h := newHarness(t, stuck, harnessOptions{})
			run := h.start(ctx, &baagentv1.RunSpec{Input: "stuck"})
			d := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT).GetPendingInput().GetDecision()
			if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: tc.answer}); err != nil {
				t.Fatal(err)
			}
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			checkIntervened(t, evs, tc.answer, false, tc.want)
			last := evs[len(evs)-1]
			if (tc.final == "" && last.GetError().GetCode() != CodeDoomLoop) || (tc.final != "" && last.GetComplete().GetContent() != tc.final) {
				t.Errorf("last %v", last)
			}
		})
	}
}

func TestUnansweredDoomLoopIntervenedEvent(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, stuck, harnessOptions{mutate: func(o *Options) { o.DecisionTimeout = time1s }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "stuck"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	checkIntervened(t, evs, hitl.LabelStop, true, baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP)
}

// A run resumed by another replica after the decision (the repeated call
// was running when the first replica shut down) publishes neither the
// answer nor the intervention again.
func TestDoomLoopIntervenedOnceAcrossAResume(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, stuck, harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "stuck"})
	d := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT).GetPendingInput().GetDecision()
	release := h.blockTools() // the repeated call hangs once allowed
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: hitl.LabelContinue}); err != nil {
		t.Fatal(err)
	}
	h.waitInvocations(ctx, 3)
	h.stop() // hands the run back mid-call
	release()
	h.replica("replica-b")
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	checkIntervened(t, evs, hitl.LabelContinue, false, baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE)
	if c := evs[len(evs)-1].GetComplete().GetContent(); c != "went on" {
		t.Errorf("final %q, events %v", c, types(evs))
	}
}

// waitInvocations waits until the toolrunner has been asked n calls.
func (h *harness) waitInvocations(ctx context.Context, n int) {
	h.t.Helper()
	testkit.Eventually(h.t, remaining(ctx), "the toolrunner is asked "+strconv.Itoa(n)+" calls", func() bool {
		return len(h.tools.invocations()) >= n
	})
}
