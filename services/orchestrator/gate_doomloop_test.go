package orchestrator

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

func TestDoomLoopGateApplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rec  checkpoint.ToolRecord
		want bool
	}{
		{checkpoint.ToolRecord{}, false},
		{checkpoint.ToolRecord{Doom: true}, true},
		{checkpoint.ToolRecord{Doom: true, Decision: hitl.LabelContinue}, false}, // decided: runs
		// Decided by an execution that stopped before the call's result:
		// the decision is applied again, not asked again.
		{checkpoint.ToolRecord{Doom: true, Decision: hitl.LabelCorrect}, true},
		{checkpoint.ToolRecord{Doom: true, Decision: hitl.LabelStop, DecisionTimedOut: true}, true},
		{checkpoint.ToolRecord{Decision: hitl.LabelCorrect}, false},
	} {
		if got := (doomLoopGate{}).applies(testCall("sql_query", tc.rec, nil)); got != tc.want {
			t.Errorf("applies(%+v) = %v, want %v", tc.rec, got, tc.want)
		}
	}
}

func TestDoomDecision(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		answer   *hitl.Answer
		decision string
		timedOut bool
	}{
		{"no answer stops", nil, hitl.LabelStop, true},
		{"stop", &hitl.Answer{Text: hitl.LabelStop}, hitl.LabelStop, false},
		{"continue", &hitl.Answer{Text: hitl.LabelContinue}, hitl.LabelContinue, false},
		{"correct", &hitl.Answer{Text: hitl.LabelCorrect}, hitl.LabelCorrect, false},
	} {
		d, to := doomDecision(&hitl.Wait{Kind: hitl.KindDoomLoop, Answer: tc.answer})
		if d != tc.decision || to != tc.timedOut {
			t.Errorf("%s: doomDecision = %q, %v; want %q, %v", tc.name, d, to, tc.decision, tc.timedOut)
		}
	}
}

func TestDoomQuestion(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	c := &baagentv1.ToolCall{Id: "call_1", Name: "sql_query", Arguments: `{"q":1}`}
	w := doomQuestion(c, 3, 2, time.Minute, now)
	d := w.Pending().GetDecision()
	var labels []string
	for _, o := range d.GetOptions() {
		labels = append(labels, o.GetLabel())
	}
	if w.Kind != hitl.KindDoomLoop || w.ID != "doom_s3_c2" || !w.Deadline.Equal(now.Add(time.Minute)) ||
		!slices.Equal(labels, []string{hitl.LabelStop, hitl.LabelContinue, hitl.LabelCorrect}) || !d.GetOptions()[0].GetIsRecommended() ||
		d.GetStepNumber() != 3 || !strings.Contains(d.GetContext(), "sql_query") {
		t.Errorf("question %+v / %v", w, d)
	}
}

func TestDoomStopped(t *testing.T) {
	t.Parallel()
	c := &baagentv1.ToolCall{Name: "sql_query"}
	for _, tc := range []struct {
		timedOut bool
		says     string
	}{
		{false, "the user stopped the run"},
		{true, "no one answered within 300 s"},
	} {
		var re *runError
		err := doomStopped(c, tc.timedOut, 300*time.Second)
		if !errors.As(err, &re) || re.code != CodeDoomLoop || !strings.Contains(re.message, tc.says) || !strings.Contains(re.message, "sql_query") {
			t.Errorf("doomStopped(timedOut=%v) = %v", tc.timedOut, err)
		}
	}
	if !strings.Contains(doomCorrection(c), "sql_query") {
		t.Errorf("correction %q", doomCorrection(c))
	}
}

func TestDoomIntervention(t *testing.T) {
	t.Parallel()
	for label, want := range map[string]baagentv1.DoomLoopIntervention{
		hitl.LabelStop:     baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP,
		hitl.LabelContinue: baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE,
		hitl.LabelCorrect:  baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CORRECT,
		"":                 baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP,
	} {
		if got := doomIntervention(label); got != want {
			t.Errorf("doomIntervention(%q) = %v, want %v", label, got, want)
		}
	}
}
