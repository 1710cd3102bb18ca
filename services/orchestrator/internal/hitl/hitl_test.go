package hitl

import (
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

var testTimeouts = Timeouts{Clarification: time.Minute, Decision: 5 * time.Minute}

func TestParseAsk(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	for _, tc := range []struct {
		tool, args string
		kind       string
		deadline   time.Duration
		err        string
	}{
		{ClarificationTool, `{"question_type":"scope","question":"Which year?"}`, KindClarification, time.Minute, ""},
		{DecisionTool, `{"decision_type":"method","context":"How?","options":[{"label":"a"}],"timeout_seconds":10}`, KindDecision, 10 * time.Second, ""},
		{DecisionTool, `{"decision_type":"custom","context":"Anything?"}`, KindDecision, 5 * time.Minute, ""},
		{ClarificationTool, `{"question_type":"mood","question":"?"}`, "", 0, "question_type"},
		{ClarificationTool, `{"question_type":"scope","question":"  "}`, "", 0, "question must be"},
		{DecisionTool, `{"decision_type":"method","context":"How?"}`, "", 0, "at least one option"},
		{DecisionTool, `{"decision_type":"method","context":"How?","options":[{"label":"a"},{"label":"A"}]}`, "", 0, "used twice"},
		{DecisionTool, `{"decision_type":"method","context":"How?","options":[{"label":"a"}],"timeout_seconds":7200}`, "", 0, "timeout_seconds"},
		{DecisionTool, `not json`, "", 0, "not a JSON object"},
		{"sql_query", `{}`, "", 0, "not an ask tool"},
	} {
		w, err := ParseAsk(tc.tool, tc.args, "q_s1_c0", 1, now, testTimeouts)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAsk(%s, %s) error = %v, want %q", tc.tool, tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || w.Kind != tc.kind || w.ID != "q_s1_c0" || !w.Deadline.Equal(now.Add(tc.deadline)) || !w.Pending().GetDeadline().AsTime().Equal(w.Deadline) {
			t.Errorf("ParseAsk(%s, %s) = %+v, %v", tc.tool, tc.args, w, err)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	clar, _ := ParseAsk(ClarificationTool, `{"question_type":"scope","question":"Which year?","options":[{"label":"2024"}]}`, "q", 1, now, testTimeouts)
	dec, _ := ParseAsk(DecisionTool, `{"decision_type":"method","context":"How?","options":[{"label":"Fast"},{"label":"Safe","is_recommended":true}]}`, "d", 1, now, testTimeouts)
	doom := SystemDecision(KindDoomLoop, "doom", 1, "Stuck?", time.Minute, now,
		&baagentv1.DecisionOption{Label: LabelStop}, &baagentv1.DecisionOption{Label: LabelContinue}, &baagentv1.DecisionOption{Label: LabelCorrect})
	for _, tc := range []struct {
		name string
		w    *Wait
		in   *baagentv1.RunInput
		text string
		err  string
	}{
		{"free text", clar, &baagentv1.RunInput{Answer: " 2023 "}, "2023", ""},
		{"label matched case-insensitively", clar, &baagentv1.RunInput{Answer: "2024"}, "2024", ""},
		{"empty clarification", clar, &baagentv1.RunInput{}, "", "empty"},
		{"option by label", dec, &baagentv1.RunInput{Answer: "safe"}, "Safe", ""},
		{"selected option", dec, &baagentv1.RunInput{SelectedOptions: []string{"fast"}}, "Fast", ""},
		{"two options of a single choice", dec, &baagentv1.RunInput{SelectedOptions: []string{"Fast", "Safe"}}, "", "takes one option"},
		{"not an option", dec, &baagentv1.RunInput{Answer: "slow"}, "", "not an offered option"},
		{"doom-loop intervention", doom, &baagentv1.RunInput{Intervention: baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CORRECT}, LabelCorrect, ""},
	} {
		a, err := CheckAnswer(tc.w, tc.in, now)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || a.Text != tc.text {
			t.Errorf("%s: CheckAnswer = %+v, %v; want %q", tc.name, a, err, tc.text)
		}
	}
	if r := Recommended(dec.Pending()); r != "Safe" {
		t.Errorf("Recommended = %q", r)
	}
	if r := Recommended(clar.Pending()); r != "" {
		t.Errorf("Recommended without one = %q", r)
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	w := &Wait{Deadline: now.Add(time.Minute)}
	if w.Due(now) || !w.Due(now.Add(time.Minute)) {
		t.Error("an unanswered wait is due at its deadline, not before")
	}
	w.Answer = &Answer{Text: "x"}
	if !w.Due(now) {
		t.Error("an answered wait is due at once")
	}
}
