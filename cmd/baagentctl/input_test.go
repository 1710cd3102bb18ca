package main

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestInputUsage(t *testing.T) {
	t.Parallel()

	code, _, stderr := ctl(t, "input", "run_1")
	if code != 2 || !strings.Contains(stderr, "RUN_ID and ANSWER") {
		t.Errorf("input without an answer: exit %d, %q", code, stderr)
	}
}

func TestPendingID(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		p    *baagentv1.PendingInput
		want string
	}{
		{nil, ""},
		{&baagentv1.PendingInput{Question: &baagentv1.PendingInput_Clarification{Clarification: &baagentv1.ClarificationQuestion{QuestionId: "q_s1_c0"}}}, "q_s1_c0"},
		{&baagentv1.PendingInput{Question: &baagentv1.PendingInput_Decision{Decision: &baagentv1.DecisionPoint{DecisionId: "doom_s3_c0"}}}, "doom_s3_c0"},
	} {
		if got := pendingID(tc.p); got != tc.want {
			t.Errorf("pendingID(%v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	if in := inputFor("q", "  Only Q4 "); in.GetInputId() != "q" || in.GetAnswer() != "Only Q4" {
		t.Errorf("inputFor = %v", in)
	}
}
