package contextsvc

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

const (
	roleUser      = baagentv1.Role_ROLE_USER
	roleAssistant = baagentv1.Role_ROLE_ASSISTANT
	roleTool      = baagentv1.Role_ROLE_TOOL
	roleSystem    = baagentv1.Role_ROLE_SYSTEM
)

// convSpec shapes a generated conversation.
type convSpec struct {
	rounds       int // user requests
	stepsPerRnd  int // assistant tool-call steps per round
	outputWords  int // words per tool output
	plantEvery   int // plant a fact in every n-th user request (0 = never)
	errorEvery   int // make every n-th tool output an error (0 = never)
	skillAtRound int // round with a skill activation (-1 = none)
}

// genConversation builds a conversation of rounds: a user request, steps of
// an assistant tool call with its result, and a final assistant answer. It
// returns the messages and the planted facts (text that must survive
// verbatim).
func genConversation(spec convSpec, seed uint64) (msgs []*baagentv1.ChatMessage, facts []string) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	word := func() string {
		words := []string{"revenue", "region", "north", "south", "quarter", "growth", "margin", "customer", "churn", "forecast", "table", "sales"}
		return words[rng.IntN(len(words))]
	}
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(word())
			if rng.IntN(9) == 0 {
				fmt.Fprintf(&b, " %d", rng.IntN(100000))
			}
		}
		return b.String()
	}
	id := 0
	next := func() string { id++; return fmt.Sprintf("m%05d", id) }
	for r := range spec.rounds {
		round := fmt.Sprintf("r%04d", r)
		req := "Please analyse " + text(12)
		if spec.plantEvery > 0 && r%spec.plantEvery == 0 {
			fact := fmt.Sprintf("PLANTED-FACT-%04d: the budget code is %d", r, rng.IntN(1_000_000))
			req += ". " + fact
			facts = append(facts, fact)
		}
		msgs = append(msgs, &baagentv1.ChatMessage{Id: next(), Role: roleUser, Content: req, RoundId: round})
		if r == spec.skillAtRound {
			msgs = append(msgs, &baagentv1.ChatMessage{Id: next(), Role: roleSystem, RoundId: round,
				Kind: baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION, Content: "# data-analysis skill\nSKILL-INSTRUCTION: always query the sales table first."})
		}
		for s := range spec.stepsPerRnd {
			call := fmt.Sprintf("call_%d_%d", r, s)
			msgs = append(msgs, &baagentv1.ChatMessage{Id: next(), Role: roleAssistant, RoundId: round, Content: "I will look at " + text(15),
				ToolCalls: []*baagentv1.ToolCall{{Id: call, Name: "sql_query", Arguments: fmt.Sprintf(`{"query":"select %s from sales"}`, word())}}})
			out := &baagentv1.ChatMessage{Id: next(), Role: roleTool, RoundId: round, ToolCallId: call, ToolName: "sql_query", Content: text(spec.outputWords)}
			if spec.errorEvery > 0 && (r*spec.stepsPerRnd+s)%spec.errorEvery == 0 {
				fact := fmt.Sprintf("PLANTED-ERROR-%04d-%d: table sales_%d does not exist", r, s, rng.IntN(1000))
				out.Content, out.IsError = fact, true
				facts = append(facts, fact)
			}
			msgs = append(msgs, out)
		}
		msgs = append(msgs, &baagentv1.ChatMessage{Id: next(), Role: roleAssistant, RoundId: round, Content: "Answer: " + text(40)})
	}
	return msgs, facts
}
