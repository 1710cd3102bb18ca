package orchestrator

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// testCall is a gateCall of the step's first call to tool.
func testCall(tool string, rec checkpoint.ToolRecord, ts *toolset) gateCall {
	if ts == nil {
		ts = &toolset{}
	}
	return gateCall{call: &baagentv1.ToolCall{Id: "call_1", Name: tool, Arguments: `{"q":1}`}, rec: rec, ts: ts}
}

// TestGateOrder pins which gates look at a call and in what order: the
// user decides about a doom loop before a repeated question is asked, and
// every call the toolrunner leaves unanswered has an afterRun gate; the
// plan tools are answered before the step's other calls run, so a step's
// tool calls run under the plan the model just made.
func TestGateOrder(t *testing.T) {
	t.Parallel()
	if len(beforeRun) != 3 || beforeRun[0] != (doomLoopGate{}) || beforeRun[1] != (askGate{}) || beforeRun[2] != (planGate{}) {
		t.Errorf("beforeRun = %#v", beforeRun)
	}
	if len(afterRun) != 2 || afterRun[0] != (taskGate{}) || afterRun[1] != (permissionGate{}) {
		t.Errorf("afterRun = %#v", afterRun)
	}
	ts := &toolset{task: true, ask: []string{AskDecisionTool}}
	for _, tc := range []struct {
		name  string
		c     gateCall
		after bool
	}{
		{"plain call runs", testCall("sql_query", checkpoint.ToolRecord{}, ts), false},
		{"task call waits for the others", testCall(TaskToolName, checkpoint.ToolRecord{}, ts), true},
		{"refused call is asked about", testCall("guarded_write", checkpoint.ToolRecord{Approval: approvalPending}, ts), true},
		{"approved call runs", testCall("guarded_write", checkpoint.ToolRecord{Approval: hitl.LabelAllow}, ts), false},
		{"task tool not offered runs (and fails as unknown)", testCall(TaskToolName, checkpoint.ToolRecord{}, &toolset{}), false},
	} {
		if got := settledAfterRun(tc.c); got != tc.after {
			t.Errorf("%s: settledAfterRun = %v, want %v", tc.name, got, tc.after)
		}
	}
}
