package orchestrator

import (
	"testing"

	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
)

func TestTaskGateApplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tool string
		ts   *toolset
		want bool
	}{
		{"task offered", TaskToolName, &toolset{task: true}, true},
		{"task not offered", TaskToolName, &toolset{}, false},
		{"another tool", "sql_query", &toolset{task: true}, false},
	} {
		if got := (taskGate{}).applies(testCall(tc.tool, checkpoint.ToolRecord{}, tc.ts)); got != tc.want {
			t.Errorf("%s: applies = %v, want %v", tc.name, got, tc.want)
		}
	}
}
