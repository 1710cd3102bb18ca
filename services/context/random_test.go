package contextsvc

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// randomConversation mixes everything compression must cope with: parallel
// tool calls, results appended late or never, orphan results, errors, skill
// outputs, system messages, explicit importances, empty contents.
func randomConversation(rng *rand.Rand, n int) []*baagentv1.ChatMessage {
	var out []*baagentv1.ChatMessage
	var open []string
	id := 0
	nextID := func() string { id++; return fmt.Sprintf("m%d", id) }
	text := func() string { return strings.Repeat("data point ", rng.IntN(120)) }
	for len(out) < n {
		m := &baagentv1.ChatMessage{Id: nextID(), Content: text()}
		switch k := rng.IntN(10); {
		case k < 2:
			m.Role = roleUser
		case k < 5:
			m.Role = roleAssistant
			for range rng.IntN(4) {
				call := fmt.Sprintf("c%d", id*10+len(open))
				m.ToolCalls = append(m.ToolCalls, &baagentv1.ToolCall{Id: call, Name: []string{"sql_query", "skill", "grep"}[rng.IntN(3)], Arguments: "{}"})
				open = append(open, call)
			}
		case k < 9 && len(open) > 0:
			i := rng.IntN(len(open))
			m.Role, m.ToolCallId, m.ToolName = roleTool, open[i], []string{"sql_query", "skill"}[rng.IntN(2)]
			m.IsError = rng.IntN(8) == 0
			open = append(open[:i], open[i+1:]...)
		case k < 9:
			m.Role, m.ToolCallId = roleTool, "ghost" // answers nothing
		default:
			m.Role = roleSystem
			if rng.IntN(2) == 0 {
				m.Kind = baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION
			}
		}
		if rng.IntN(6) == 0 {
			m.Importance = baagentv1.MessageImportance(1 + rng.IntN(4))
		}
		if rng.IntN(3) == 0 {
			m.RoundId = fmt.Sprintf("r%d", len(out)/10)
		}
		out = append(out, m)
	}
	return out
}

// TestRandomWindowsAreValidRequests builds windows for random
// conversations with every strategy and budget: each is a valid chat request
// that fits, or the call says why not.
func TestRandomWindowsAreValidRequests(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	strategies := []baagentv1.CompressionStrategy{strategyAuto, strategyTruncate, strategyExtract, strategySummarize}
	built, exhausted := 0, 0
	for i := range 40 {
		conv := fmt.Sprintf("rand-%d", i)
		hist := randomConversation(rng, 20+rng.IntN(150))
		appendAll(t, e.client, "t", conv, hist)
		stored := readAll(t, e.client, "t", conv, 0)
		for _, s := range strategies {
			req := buildReqFor("test-8k", s)
			req.ConversationId = conv
			req.Budget = &baagentv1.BudgetOptions{
				MaxContextTokens:      int64(4000 + rng.IntN(28000)),
				CompressionTriggerPct: proto.Float64(0.3 + rng.Float64()*0.7),
				PruneToolOutputs:      proto.Bool(rng.IntN(2) == 0),
			}
			resp, err := e.client.BuildWindow(t.Context(), req)
			if err != nil {
				if strings.Contains(err.Error(), "ResourceExhausted") {
					exhausted++
					continue
				}
				for j, m := range stored {
					var calls []string
					for _, c := range m.GetToolCalls() {
						calls = append(calls, c.GetId())
					}
					t.Logf("%d %s %v calls=%v answers=%q %v %v %d", j, m.GetId(), m.GetRole(), calls, m.GetToolCallId(), m.GetImportance(), m.GetKind(), len(m.GetContent()))
				}
				t.Fatalf("conversation %d, %v: %v", i, s, err)
			}
			built++
			windowCheck{model: "test-8k", history: stored}.check(t, e, req, resp)
			if t.Failed() {
				t.Fatalf("conversation %d, strategy %v, budget %v", i, s, req.Budget)
			}
		}
	}
	if built < 100 {
		t.Fatalf("only %d windows built (%d exhausted)", built, exhausted)
	}
	t.Logf("%d windows valid, %d refused as too large", built, exhausted)
}
