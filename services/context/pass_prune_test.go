package contextsvc

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestPruneToolOutputs checks the pruning constants: outputs of the
// last 2 user turns and the newest 40K output tokens stay; pruning happens
// only when at least 20K tokens go; skill outputs and errors stay.
func TestPruneToolOutputs(t *testing.T) {
	t.Parallel()

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

// TestPruneWalksBackFromNewest: with outputs of 10,000 tokens, those of the
// last two user turns and the newest 40,000 tokens before them stay, and the
// older ones are pruned when that frees more than 20,000 tokens. Skill
// outputs and errors are neither pruned nor counted.
func TestPruneWalksBackFromNewest(t *testing.T) {
	t.Parallel()
	history := func(n int) []*baagentv1.ChatMessage {
		var out []*baagentv1.ChatMessage
		for r := range n {
			call := fmt.Sprintf("c%d", r)
			result := &baagentv1.ChatMessage{Id: fmt.Sprintf("t%d", r), Role: roleTool, ToolCallId: call, ToolName: "sql_query", Content: strings.Repeat("r", 10_000-4)}
			switch r {
			case 0:
				result.ToolName = "skill"
			case 1:
				result.IsError = true
			}
			out = append(out, userMsg(fmt.Sprintf("u%d", r)),
				&baagentv1.ChatMessage{Id: fmt.Sprintf("a%d", r), Role: roleAssistant, ToolCalls: []*baagentv1.ToolCall{{Id: call, Name: result.ToolName}}},
				result)
		}
		return out
	}

	// 11 rounds: t9 and t10 are in the last two turns, t5..t8 are the
	// newest 40,000 tokens, t2..t4 (30,000 tokens) go.
	p := planFor(t, history(11)...)
	if err := p.pruneToolOutputs(); err != nil {
		t.Fatal(err)
	}
	for r := range 11 {
		it, _ := itemOf(t, p, fmt.Sprintf("t%d", r))
		if pruned := r >= 2 && r <= 4; (it.form == formPruned) != pruned {
			t.Errorf("t%d: form %d, pruned %v", r, it.form, pruned)
		}
	}
	if it, _ := itemOf(t, p, "t2"); it.msg.msg.GetContent() != prunedPlaceholder {
		t.Errorf("pruned t2 reads %q", it.msg.msg.GetContent())
	}
	saved := int64(10_000 - (len(prunedPlaceholder) + 4))
	if p.prunedCount != 3 || p.prunedRaw != 3*saved {
		t.Errorf("pruned %d outputs, %d tokens; want 3, %d", p.prunedCount, p.prunedRaw, 3*saved)
	}
	checkTotal(t, p)

	// 10 rounds: only 20,000 tokens would go, which is not enough.
	p = planFor(t, history(10)...)
	if err := p.pruneToolOutputs(); err != nil {
		t.Fatal(err)
	}
	if p.prunedCount != 0 {
		t.Errorf("pruned %d outputs for 20,000 tokens", p.prunedCount)
	}
}
