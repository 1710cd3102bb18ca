package runstore

import (
	"container/heap"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	run := &baagentv1.Run{RunId: "run_2", ConversationId: "conv_a", State: baagentv1.RunState_RUN_STATE_COMPLETED}
	for _, tc := range []struct {
		name string
		f    Filter
		want bool
	}{
		{"no filter", Filter{}, true},
		{"its conversation", Filter{ConversationID: "conv_a"}, true},
		{"another conversation", Filter{ConversationID: "conv_b"}, false},
		{"one of the states", Filter{States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_COMPLETED}}, true},
		{"not one of the states", Filter{States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_RUNNING}}, false},
		{"before a later id", Filter{Before: "run_3"}, true},
		{"not before itself", Filter{Before: "run_2"}, false},
	} {
		if got := tc.f.match(run); got != tc.want {
			t.Errorf("%s: match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNewestRunsKeepsTheNewest(t *testing.T) {
	t.Parallel()
	h := &newestRuns{}
	for _, id := range []string{"run_3", "run_1", "run_5", "run_2", "run_4"} {
		heap.Push(h, &baagentv1.Run{RunId: id})
		if h.Len() > 3 {
			heap.Pop(h)
		}
	}
	var ids []string
	for h.Len() > 0 {
		ids = append(ids, heap.Pop(h).(*baagentv1.Run).GetRunId())
	}
	if got := strings.Join(ids, ","); got != "run_3,run_4,run_5" {
		t.Errorf("kept %s, want run_3,run_4,run_5 (oldest first)", got)
	}
}

func TestIdempotencyKeyIndex(t *testing.T) {
	t.Parallel()
	a, b := idemKey("t1", "key"), idemKey("t1", "other")
	if a == b || a != idemKey("t1", "key") || !strings.HasPrefix(a, "t1."+idemKeyPrefix) {
		t.Errorf("idemKey: %q, %q", a, b)
	}
}
