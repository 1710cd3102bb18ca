package contextsvc

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

const (
	strategyNone      = baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE
	strategyTruncate  = baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE
	strategyExtract   = baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT
	strategySummarize = baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE
	strategyAuto      = baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_UNSPECIFIED
)

var testSystem = []*baagentv1.ChatMessage{
	{Role: roleSystem, Content: "You are a business analyst. SYSTEM-PROMPT-MARKER"},
	{Role: roleSystem, Content: "Skills: data-analysis (query sales data)", Kind: baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG},
}

var testTools = []*baagentv1.ToolSchema{
	{Name: "sql_query", Description: "Run a SQL query over the workspace tables", Parameters: vt.MustStruct(map[string]any{
		"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string", "description": "SQL"}}, "required": []any{"query"},
	})},
	{Name: "file_read", Description: "Read a file"},
}

// windowCheck is what a test knows about the conversation a window was built
// from.
type windowCheck struct {
	model   string
	history []*baagentv1.ChatMessage
	facts   []string
}

// check asserts every invariant of a window: system messages first and
// verbatim; a valid chat request; planted facts and skill instructions
// verbatim; every user request verbatim or marked as compressed; the count
// the tokens service gives the window equals the reported total and fits
// the budget; the breakdown adds up.
func (wc windowCheck) check(t *testing.T, e *env, req *baagentv1.BuildWindowRequest, resp *baagentv1.BuildWindowResponse) {
	t.Helper()
	msgs := resp.GetMessages()
	for i, m := range req.GetSystemMessages() {
		if i >= len(msgs) || !proto.Equal(msgs[i].GetMessage(), m) || msgs[i].GetIsCompressed() {
			t.Fatalf("system message %d not first and verbatim", i)
		}
	}
	plain := make([]*baagentv1.ChatMessage, len(msgs))
	for i, m := range msgs {
		plain[i] = m.GetMessage()
	}
	if err := validOpenAIOrder(plain); err != nil {
		t.Fatalf("window is not a valid chat request: %v", err)
	}
	var all strings.Builder
	verbatim := map[string]bool{}
	marked := map[string]bool{}
	for _, m := range msgs {
		all.WriteString(m.GetMessage().GetContent())
		all.WriteString("\n")
		if !m.GetIsCompressed() && m.GetMessage().GetId() != "" {
			verbatim[m.GetMessage().GetId()] = true
		}
		for _, id := range m.GetSourceMessageIds() {
			marked[id] = true
		}
	}
	text := all.String()
	for _, f := range wc.facts {
		if !strings.Contains(text, f) {
			t.Errorf("planted fact %q is not in the window verbatim", f)
		}
	}
	for _, h := range wc.history {
		switch {
		case h.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION:
			if !verbatim[h.GetId()] {
				t.Errorf("skill instruction %s not kept verbatim", h.GetId())
			}
		case h.GetRole() == roleUser:
			if !verbatim[h.GetId()] && !marked[h.GetId()] {
				t.Errorf("user request %s neither verbatim nor marked compressed", h.GetId())
			}
			if (h.GetImportance() == 0 || h.GetImportance() == baagentv1.MessageImportance_MESSAGE_IMPORTANCE_CRITICAL) && !verbatim[h.GetId()] {
				t.Errorf("CRITICAL user request %s not verbatim", h.GetId())
			}
		}
	}
	counted, err := e.tokens.CountMessages(t.Context(), &baagentv1.CountMessagesRequest{Model: wc.model, Messages: plain, Tools: req.GetTools()})
	if err != nil {
		t.Fatal(err)
	}
	b := resp.GetBreakdown()
	if counted.GetCount() != b.GetTotalTokens() {
		t.Errorf("tokens service counts the window as %d, response says %d", counted.GetCount(), b.GetTotalTokens())
	}
	if b.GetTotalTokens() > b.GetInputBudgetTokens() {
		t.Errorf("window of %d tokens exceeds the input budget %d", b.GetTotalTokens(), b.GetInputBudgetTokens())
	}
	sum := b.GetSystemTokens() + b.GetSkillsTokens() + b.GetToolSchemaTokens() + b.GetHistoryTokens() + b.GetToolOutputTokens() + b.GetSummaryTokens()
	if sum != b.GetTotalTokens() {
		t.Errorf("breakdown parts sum to %d, total %d", sum, b.GetTotalTokens())
	}
	p := resp.GetCompression()
	if p.GetEstimatedTokens() != b.GetTotalTokens() || p.GetTokenBudget() != b.GetInputBudgetTokens() ||
		int(p.GetFinalMessageCount()) != len(msgs) || int(p.GetOriginalMessageCount()) != len(wc.history) {
		t.Errorf("payload %v disagrees with the window", p)
	}
	if p.GetCompressionStrategy() != strategyName(resp.GetStrategy()) {
		t.Errorf("payload strategy %q, response %v", p.GetCompressionStrategy(), resp.GetStrategy())
	}
}

// validOpenAIOrder is the test's own statement of the chat request rule:
// each tool message answers a call of the closest preceding non-tool
// message, which is an assistant message; each assistant tool call is
// answered exactly once by the tool messages directly after it.
func validOpenAIOrder(msgs []*baagentv1.ChatMessage) error {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.GetRole() == roleTool {
			return fmt.Errorf("message %d: tool message without a preceding assistant tool call", i)
		}
		if m.GetRole() != roleAssistant || len(m.GetToolCalls()) == 0 {
			continue
		}
		want := map[string]int{}
		for _, c := range m.GetToolCalls() {
			want[c.GetId()]++
		}
		j := i + 1
		for ; j < len(msgs) && msgs[j].GetRole() == roleTool; j++ {
			id := msgs[j].GetToolCallId()
			if want[id] != 1 {
				return fmt.Errorf("message %d: tool result %q does not answer an open call of message %d", j, id, i)
			}
			want[id]--
		}
		for id, n := range want {
			if n != 0 {
				return fmt.Errorf("message %d: tool call %q not answered", i, id)
			}
		}
		i = j - 1
	}
	return nil
}

func buildReqFor(model string, strategy baagentv1.CompressionStrategy) *baagentv1.BuildWindowRequest {
	return &baagentv1.BuildWindowRequest{
		Tenant: "t", ConversationId: "c", Model: model, RunId: "run-1",
		SystemMessages: testSystem, Tools: testTools,
		Compression: &baagentv1.ContextCompressionConfig{
			Strategy:                  strategy,
			SummarizerModel:           "gpt-4o-mini",
			MaxCompressionCostPerHour: proto.Float64(100),
		},
	}
}

// bigSpec is the acceptance conversation: 1,000 messages, about 200K
// tokens, planted facts in CRITICAL user requests and tool errors.
var bigSpec = convSpec{rounds: 100, stepsPerRnd: 4, outputWords: 340, plantEvery: 7, errorEvery: 23, skillAtRound: 5}

func TestBuildWindowStrategiesKeepCriticalFacts(t *testing.T) {
	t.Parallel()

	fake := newFakeOpenAI(t)
	e := newEnv(t, Options{Summarizer: fake.summarizer(t), SummarizerModel: "gpt-4o-mini"})
	hist, facts := genConversation(bigSpec, 42)
	hist = hist[:len(hist)-1] // 1,000 messages with the skill instruction
	if len(hist) != 1000 {
		t.Fatalf("generated %d messages", len(hist))
	}
	appendAll(t, e.client, "t", "c", hist)
	stored := readAll(t, e.client, "t", "c", 1000)

	for _, model := range []string{"gpt-4o", "claude-3-5-sonnet"} {
		wc := windowCheck{model: model, history: stored, facts: facts}
		for _, tc := range []struct {
			strategy baagentv1.CompressionStrategy
			want     baagentv1.CompressionStrategy
		}{
			{strategyTruncate, strategyTruncate},
			{strategyExtract, strategyExtract},
			{strategySummarize, strategySummarize},
			{strategyAuto, strategyExtract}, // 200K tokens cost more than the cap allows for an LLM summary
		} {
			t.Run(model+"/"+strategyName(tc.strategy)+fmt.Sprint(tc.strategy), func(t *testing.T) {
				req := buildReqFor(model, tc.strategy)
				// Pruning alone would bring this conversation under the
				// trigger; it has its own test.
				req.Budget = &baagentv1.BudgetOptions{PruneToolOutputs: proto.Bool(false)}
				if tc.strategy == strategyAuto {
					req.Compression.MaxCompressionCostPerHour = nil
				}
				resp, err := e.client.BuildWindow(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				wc.check(t, e, req, resp)
				if resp.GetStrategy() != tc.want || !resp.GetCompression().GetWasCompressed() {
					t.Fatalf("strategy %v (compressed %v), want %v", resp.GetStrategy(), resp.GetCompression().GetWasCompressed(), tc.want)
				}
				if tc.strategy == strategySummarize {
					// The first window waits for summaries (unless another
					// model's run computed them already: the cache key is the
					// content, not the model the window is for).
					if !resp.GetSummaryPending() && !strings.Contains(summaryText(resp), "SUMMARY(") {
						t.Fatalf("first SUMMARIZE window: no summary and none pending")
					}
					// The summaries are computed in the background; poll until
					// a window uses them.
					waitFor(t, "summaries", func() bool {
						r, err := e.client.BuildWindow(t.Context(), req)
						if err != nil {
							t.Fatal(err)
						}
						resp = r
						return !r.GetSummaryPending() && strings.Contains(summaryText(r), "SUMMARY(")
					})
					wc.check(t, e, req, resp)
					if resp.GetStrategy() != strategySummarize {
						t.Fatalf("strategy %v after summaries", resp.GetStrategy())
					}
				}
				if got := resp.GetContextUsage(); got <= 0 || got > 1 {
					t.Errorf("context_usage %v", got)
				}
			})
		}
		t.Run(model+"/none", func(t *testing.T) {
			_, err := e.client.BuildWindow(t.Context(), buildReqFor(model, strategyNone))
			st := status.Convert(err)
			if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "input budget") {
				t.Fatalf("NONE over budget: want ResourceExhausted with the numbers, got %v", err)
			}
		})
	}
}

func summaryText(r *baagentv1.BuildWindowResponse) string {
	var b strings.Builder
	for _, m := range r.GetMessages() {
		if m.GetMessage().GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SUMMARY {
			b.WriteString(m.GetMessage().GetContent())
		}
	}
	return b.String()
}

func TestBuildWindowBelowTrigger(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	hist, facts := genConversation(convSpec{rounds: 5, stepsPerRnd: 2, outputWords: 30, plantEvery: 1, skillAtRound: -1}, 7)
	appendAll(t, e.client, "t", "c", hist)
	for _, s := range []baagentv1.CompressionStrategy{strategyNone, strategyTruncate, strategyExtract, strategySummarize, strategyAuto} {
		req := buildReqFor("gpt-4o", s)
		resp, err := e.client.BuildWindow(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		windowCheck{model: "gpt-4o", history: readAll(t, e.client, "t", "c", 0), facts: facts}.check(t, e, req, resp)
		if resp.GetStrategy() != strategyNone || resp.GetCompression().GetWasCompressed() || len(resp.GetMessages()) != len(hist)+len(testSystem) {
			t.Fatalf("%v below the trigger: strategy %v, %d messages", s, resp.GetStrategy(), len(resp.GetMessages()))
		}
		for _, m := range resp.GetMessages() {
			if m.GetIsCompressed() {
				t.Fatalf("compressed message below the trigger")
			}
		}
	}
}

// TestResourceExhausted: when what may not be compressed does not fit, the
// call fails with the numbers.
func TestResourceExhausted(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	big := strings.Repeat("critical detail ", 3000) // ~6K tokens
	appendAll(t, e.client, "t", "c", []*baagentv1.ChatMessage{{Id: "u", Role: roleUser, Content: big}})
	req := buildReqFor("test-8k", strategyExtract)
	req.Budget = &baagentv1.BudgetOptions{MaxContextTokens: 4000}
	_, err := e.client.BuildWindow(t.Context(), req)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("want ResourceExhausted, got %v", err)
	}
	for _, want := range []string{"input budget of 3000", "context length 4000", "cannot be compressed"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("message lacks %q: %s", want, st.Message())
		}
	}
}
