package orchestrator

import (
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

func TestPermissionGateApplies(t *testing.T) {
	t.Parallel()
	for _, approval := range []string{"", approvalPending, hitl.LabelAllow, hitl.LabelDeny} {
		want := approval == approvalPending
		if got := (permissionGate{}).applies(testCall("guarded_write", checkpoint.ToolRecord{Approval: approval}, nil)); got != want {
			t.Errorf("applies(approval %q) = %v, want %v", approval, got, want)
		}
	}
}

func TestPermissionAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer            *hitl.Answer
		allowed, timedOut bool
	}{
		{nil, false, true},
		{&hitl.Answer{Text: hitl.LabelAllow}, true, false},
		{&hitl.Answer{Text: hitl.LabelDeny}, false, false},
		{&hitl.Answer{Text: "maybe"}, false, false},
	} {
		a, to := permissionAnswer(&hitl.Wait{Kind: hitl.KindPermission, Answer: tc.answer})
		if a != tc.allowed || to != tc.timedOut {
			t.Errorf("permissionAnswer(%+v) = %v, %v", tc.answer, a, to)
		}
	}
}

func TestPermissionQuestion(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	c := &baagentv1.ToolCall{Name: "guarded_write", Arguments: strings.Repeat("x", 600)}
	w := permissionQuestion(c, 2, 1, time.Minute, now)
	d := w.Pending().GetDecision()
	if w.Kind != hitl.KindPermission || w.ID != "perm_s2_c1" || len(d.GetOptions()) != 2 || d.GetOptions()[0].GetLabel() != hitl.LabelAllow ||
		!d.GetOptions()[1].GetIsRecommended() || !strings.Contains(d.GetContext(), strings.Repeat("x", 500)+"…") || strings.Contains(d.GetContext(), strings.Repeat("x", 501)) {
		t.Errorf("question %+v / %v", w, d)
	}
	if s := permissionDenied("guarded_write", true, time.Minute); !strings.Contains(s, "within 60 s") {
		t.Errorf("denied at the deadline: %q", s)
	}
	if s := permissionDenied("guarded_write", false, time.Minute); !strings.Contains(s, "The user denied running guarded_write") {
		t.Errorf("denied: %q", s)
	}
}
