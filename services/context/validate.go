package contextsvc

import (
	"math"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Request limits from the contract.
const (
	// MaxPageSize is the largest GetHistory page (the contract's maximum; 0
	// uses the default of 100).
	MaxPageSize = 1000
	// shareSlack absorbs float rounding when budget shares are summed
	// (0.1 + 0.5 + 0.25 + 0.15 is not exactly 1 in binary).
	shareSlack = 1e-9
)

// Edge validation of every ContextService request. Each function returns nil
// or an InvalidArgument status naming every offending field. Whether a
// conversation exists, or whether the history fits the model's window, is
// decided by the service, not here.

// validateAppend: at least one message and at most MaxMessages, each a valid
// ChatMessage (a role, tool_call_id on tool messages only, well-formed tool
// calls, text within MaxMessageBytes). Ids are optional: the service assigns
// one to a message without.
func (s *Server) validateAppend(req *baagentv1.AppendRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	s.messages(&e, "messages", req.GetMessages(), true)
	return e.Err()
}

// validateGetHistory: page_size above the contract's maximum is refused, not
// shortened.
func validateGetHistory(req *baagentv1.GetHistoryRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func validateDeleteConversation(req *baagentv1.DeleteConversationRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	return e.Err()
}

// validateBuildWindow: model is required (it decides the context length and
// the tokenizer); system_messages and tools are optional; budget and
// compression overrides, when given, must be coherent; run_id is optional.
func (s *Server) validateBuildWindow(req *baagentv1.BuildWindowRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	validate.Model(&e, "model", req.GetModel())
	s.messages(&e, "system_messages", req.GetSystemMessages(), false)
	validate.ToolSchemas(&e, "tools", req.GetTools())
	budget(&e, "budget", req.GetBudget())
	compression(&e, "compression", req.GetCompression())
	validate.Optional(&e, "run_id", req.GetRunId(), validate.RunID)
	if fp := req.GetToolsFingerprint(); len(fp) > maxFingerprintLen || !printableASCII(fp) {
		e.Addf("tools_fingerprint", "at most %d printable ASCII characters", maxFingerprintLen)
	}
	return e.Err()
}

// maxFingerprintLen bounds BuildWindowRequest.tools_fingerprint.
const maxFingerprintLen = 128

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// messages checks a repeated ChatMessage field: present when required, at
// most MaxMessages, each message valid.
func (s *Server) messages(e *validate.Errors, f string, msgs []*baagentv1.ChatMessage, required bool) {
	if required && len(msgs) == 0 {
		e.Add(f, "required: at least one message")
		return
	}
	validate.MaxItems(e, f, len(msgs), s.opts.MaxMessages)
	validate.ChatMessages(e, f, msgs, s.opts.MaxMessageBytes)
}

// budget checks optional BudgetOptions. Zero token counts and unset shares
// take the model's metadata and the defaults (10/50/25/15 %, trigger 80 %).
// Set values must be coherent: token counts not negative, the output limit
// below the context length, each share between 0 and 1, the given shares
// summing to at most 1, and a trigger above 0 and at most 1.
func budget(e *validate.Errors, f string, b *baagentv1.BudgetOptions) {
	if b == nil {
		return
	}
	validate.NonNegative(e, f+".max_context_tokens", b.GetMaxContextTokens())
	validate.NonNegative(e, f+".max_output_tokens", b.GetMaxOutputTokens())
	if ctx, out := b.GetMaxContextTokens(), b.GetMaxOutputTokens(); ctx > 0 && out > 0 && out >= ctx {
		e.Addf(f+".max_output_tokens", "must be less than max_context_tokens (%d), got %d", ctx, out)
	}

	shares := []struct {
		name string
		v    *float64
	}{
		{"system_budget_pct", b.SystemBudgetPct},
		{"history_budget_pct", b.HistoryBudgetPct},
		{"recent_budget_pct", b.RecentBudgetPct},
		{"output_reserve_pct", b.OutputReservePct},
	}
	sum, valid := 0.0, true
	for _, sh := range shares {
		if sh.v == nil {
			continue
		}
		if v := *sh.v; !(v >= 0 && v <= 1) {
			e.Addf(f+"."+sh.name, "must be between 0 and 1, got %v", v)
			valid = false
			continue
		}
		sum += *sh.v
	}
	// Unset shares take defaults that are not negative, so the given shares
	// alone must not exceed the whole window.
	if valid && sum > 1+shareSlack {
		e.Addf(f, "system_budget_pct + history_budget_pct + recent_budget_pct + output_reserve_pct must be at most 1, got %v", sum)
	}

	if b.CompressionTriggerPct != nil {
		if v := b.GetCompressionTriggerPct(); !(v > 0 && v <= 1) {
			e.Addf(f+".compression_trigger_pct", "must be above 0 and at most 1, got %v", v)
		}
	}
}

// compression checks an optional ContextCompressionConfig: a known strategy
// (UNSPECIFIED selects automatically), counts and the cost cap not negative,
// the cost cap finite, and the summarizer model, when given, well-formed.
func compression(e *validate.Errors, f string, c *baagentv1.ContextCompressionConfig) {
	if c == nil {
		return
	}
	validate.Enum(e, f+".strategy", c.GetStrategy(), baagentv1.CompressionStrategy_name, true)
	validate.NonNegative(e, f+".llm_summarization_threshold", c.GetLlmSummarizationThreshold())
	validate.NonNegative(e, f+".summary_cache_ttl_hours", c.GetSummaryCacheTtlHours())
	if v := c.GetMaxCompressionCostPerHour(); !(v >= 0 && v <= math.MaxFloat64) { // written so that NaN fails
		e.Addf(f+".max_compression_cost_per_hour", "must be a finite number of USD, not negative, got %v", v)
	}
	validate.Optional(e, f+".summarizer_model", c.GetSummarizerModel(), validate.Model)
	validate.NonNegative(e, f+".summary_max_tokens", c.GetSummaryMaxTokens())
}
