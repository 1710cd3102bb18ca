package contextsvc

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestPruneToolOutputs checks seed 004's pruning constants: outputs of the
// last 2 user turns and the newest 40K output tokens stay; pruning happens
// only when at least 20K tokens go; skill outputs and errors stay.
func TestPruneToolOutputs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rounds     int
		wantPruned bool
		wantStrat  baagentv1.CompressionStrategy
	}{
		{"under 20K to prune", 14, false, strategyNone},
		{"over 20K to prune", 40, true, strategyNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			var hist []*baagentv1.ChatMessage
			for r := range tc.rounds {
				call := fmt.Sprintf("call%d", r)
				tool := "sql_query"
				if r == 0 {
					tool = "skill"
				}
				hist = append(hist,
					&baagentv1.ChatMessage{Id: fmt.Sprintf("u%d", r), Role: roleUser, Content: "next"},
					&baagentv1.ChatMessage{Id: fmt.Sprintf("a%d", r), Role: roleAssistant, ToolCalls: []*baagentv1.ToolCall{{Id: call, Name: tool}}},
					&baagentv1.ChatMessage{Id: fmt.Sprintf("t%d", r), Role: roleTool, ToolCallId: call, ToolName: tool, Content: strings.Repeat("row value ", 1500)})
			}
			appendAll(t, e.client, "t", "c", hist)
			req := buildReqFor("claude-3-5-sonnet", strategyExtract)
			req.Budget = &baagentv1.BudgetOptions{CompressionTriggerPct: proto.Float64(0.05)}
			resp, err := e.client.BuildWindow(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			windowCheck{model: "claude-3-5-sonnet", history: readAll(t, e.client, "t", "c", 0)}.check(t, e, req, resp)
			p := resp.GetCompression()
			if (p.GetPrunedToolOutputCount() > 0) != tc.wantPruned {
				t.Fatalf("pruned %d outputs (%d tokens)", p.GetPrunedToolOutputCount(), p.GetPrunedTokens())
			}
			if tc.wantPruned && p.GetPrunedTokens() <= pruneMinimumTokens {
				t.Errorf("pruned only %d tokens", p.GetPrunedTokens())
			}
			var protected int64
			for i := len(resp.GetMessages()) - 1; i >= 0; i-- {
				m := resp.GetMessages()[i]
				if m.GetMessage().GetRole() != roleTool {
					continue
				}
				pruned := m.GetMessage().GetContent() == prunedPlaceholder
				if m.GetMessage().GetToolName() == "skill" && pruned {
					t.Errorf("skill output pruned")
				}
				if !pruned {
					protected += m.GetTokens()
				}
			}
			if tc.wantPruned && protected < pruneProtectTokens {
				t.Errorf("only %d tool-output tokens kept, want at least %d", protected, pruneProtectTokens)
			}
		})
	}
}
