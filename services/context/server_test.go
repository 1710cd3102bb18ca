package contextsvc

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

type (
	appendReq  = baagentv1.AppendRequest
	historyReq = baagentv1.GetHistoryRequest
	deleteReq  = baagentv1.DeleteConversationRequest
	buildReq   = baagentv1.BuildWindowRequest
	msg        = baagentv1.ChatMessage
	budgetOpts = baagentv1.BudgetOptions
	compCfg    = baagentv1.ContextCompressionConfig
)

var (
	validAppend = &appendReq{
		Tenant:         "acme",
		ConversationId: "conv-1",
		Messages: []*msg{
			{
				Id:         "m-1",
				Role:       baagentv1.Role_ROLE_USER,
				Content:    "Quel est le chiffre d'affaires par région ? 📈",
				Name:       "alice",
				Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_CRITICAL,
				RoundId:    "round-1",
				CreatedAt:  timestamppb.New(timestamppb.Now().AsTime()),
			},
			{
				Id:               "m-2",
				Role:             baagentv1.Role_ROLE_ASSISTANT,
				ReasoningContent: "I should query the sales table.",
				ToolCalls: []*baagentv1.ToolCall{
					{Id: "call_1", Name: "sql_query", Arguments: `{"query":"select region, sum(amount) from sales group by 1"}`},
					{Id: "call_2", Name: "skill", Arguments: `{"name":"data-analysis"}`},
				},
				Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_MEDIUM,
				RoundId:    "round-1",
			},
			{
				Id:         "m-3",
				Role:       baagentv1.Role_ROLE_TOOL,
				Content:    "region | total\nnorth | 42",
				ToolCallId: "call_1",
				ToolName:   "sql_query",
				Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_HIGH,
				RoundId:    "round-1",
			},
			{
				Role:       baagentv1.Role_ROLE_TOOL,
				Content:    "Skill not found",
				ToolCallId: "call_2",
				IsError:    true,
			},
			{
				Role:    baagentv1.Role_ROLE_SYSTEM,
				Content: "# data-analysis\nUse SQL first.",
				Kind:    baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION,
			},
		},
	}
	minimalAppend = &appendReq{Tenant: "t", ConversationId: "c", Messages: []*msg{{Role: baagentv1.Role_ROLE_USER}}}
	validHistory  = &historyReq{Tenant: "acme", ConversationId: "conv-1", PageSize: MaxPageSize, PageToken: encodePageToken(100)}
	validDelete   = &deleteReq{Tenant: "acme", ConversationId: "conv-1"}
	validBuild    = &buildReq{
		Tenant:         "acme",
		ConversationId: "conv-1",
		Model:          "gpt-4o",
		SystemMessages: []*msg{
			{Role: baagentv1.Role_ROLE_SYSTEM, Content: "You are a business analyst."},
			{Role: baagentv1.Role_ROLE_SYSTEM, Content: "Skills: data-analysis", Kind: baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG},
		},
		Tools: []*baagentv1.ToolSchema{
			{Name: "sql_query", Description: "Run SQL", Parameters: vt.MustStruct(map[string]any{
				"type":       "object",
				"properties": map[string]any{"query": map[string]any{"type": "string"}},
				"required":   []any{"query"},
			})},
			{Name: "file_read"},
		},
		Budget: &budgetOpts{
			MaxContextTokens:      128_000,
			MaxOutputTokens:       127_999, // just below the context length
			SystemBudgetPct:       proto.Float64(0.10),
			HistoryBudgetPct:      proto.Float64(0.50),
			RecentBudgetPct:       proto.Float64(0.25),
			OutputReservePct:      proto.Float64(0.15), // sums to exactly 1
			CompressionTriggerPct: proto.Float64(1),    // upper bound included
			PruneToolOutputs:      proto.Bool(false),
		},
		Compression: &compCfg{
			Strategy:                  baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE,
			EnableLlmSummarization:    proto.Bool(true),
			LlmSummarizationThreshold: proto.Int32(50),
			SummaryCacheTtlHours:      proto.Int32(24),
			MaxCompressionCostPerHour: proto.Float64(0.1),
			SummarizerModel:           "gpt-4o-mini",
			SummaryMaxTokens:          proto.Int32(500),
		},
		RunId: "run-1",
	}
	minimalBuild = &buildReq{Tenant: "t", ConversationId: "c", Model: "m"}
)

func TestServiceName(t *testing.T) {
	t.Parallel()

	if ServiceName != baagentv1.ContextService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName = %q, generated %q", ServiceName, baagentv1.ContextService_ServiceDesc.ServiceName)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()

	s := New(Options{})
	if s.opts.MaxMessages != DefaultMaxMessages || s.opts.MaxMessageBytes != DefaultMaxMessageBytes || s.opts.Logger == nil {
		t.Fatalf("defaults not applied: %+v", s.opts)
	}
	s = New(Options{MaxMessages: -1, MaxMessageBytes: -1})
	if s.opts.MaxMessages != DefaultMaxMessages || s.opts.MaxMessageBytes != DefaultMaxMessageBytes {
		t.Fatalf("negative options not replaced by defaults: %+v", s.opts)
	}
	s = New(Options{MaxMessages: 7, MaxMessageBytes: 9})
	if s.opts.MaxMessages != 7 || s.opts.MaxMessageBytes != 9 {
		t.Fatalf("options not kept: %+v", s.opts)
	}
}

func TestRPCs(t *testing.T) {
	t.Parallel()

	srv := New(Options{})
	c := baagentv1.NewContextServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	app := func(f func(*appendReq)) *appendReq { return vt.With(validAppend, f) }
	m := func(i int, f func(*msg)) *appendReq {
		return vt.With(validAppend, func(r *appendReq) { f(r.Messages[i]) })
	}
	hist := func(f func(*historyReq)) *historyReq { return vt.With(validHistory, f) }
	del := func(f func(*deleteReq)) *deleteReq { return vt.With(validDelete, f) }
	build := func(f func(*buildReq)) *buildReq { return vt.With(validBuild, f) }
	bud := func(f func(*budgetOpts)) *buildReq { return vt.With(validBuild, func(r *buildReq) { f(r.Budget) }) }
	comp := func(f func(*compCfg)) *buildReq { return vt.With(validBuild, func(r *buildReq) { f(r.Compression) }) }
	tooMany := make([]*msg, DefaultMaxMessages+1)
	for i := range tooMany {
		tooMany[i] = &msg{Role: baagentv1.Role_ROLE_USER, Content: "hi"}
	}

	runEdge(t, []vt.Case{
		{Name: "Append/valid", Call: vt.Call(c.Append, validAppend)},
		{Name: "Append/minimal", Call: vt.Call(c.Append, minimalAppend)},
		{Name: "Append/max messages", Call: vt.Call(c.Append, app(func(r *appendReq) { r.Messages = tooMany[:DefaultMaxMessages] }))},
		{Name: "Append/no tenant", Call: vt.Call(c.Append, app(func(r *appendReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "Append/tenant with dot", Call: vt.Call(c.Append, app(func(r *appendReq) { r.Tenant = "a.b" })), Field: "tenant"},
		{Name: "Append/tenant too long", Call: vt.Call(c.Append, app(func(r *appendReq) { r.Tenant = strings.Repeat("t", validate.MaxTenantLen+1) })), Field: "tenant"},
		{Name: "Append/no conversation_id", Call: vt.Call(c.Append, app(func(r *appendReq) { r.ConversationId = "" })), Field: "conversation_id"},
		{Name: "Append/conversation_id path", Call: vt.Call(c.Append, app(func(r *appendReq) { r.ConversationId = "../etc" })), Field: "conversation_id"},
		{Name: "Append/no messages", Call: vt.Call(c.Append, app(func(r *appendReq) { r.Messages = nil })), Field: "messages"},
		{Name: "Append/too many messages", Call: vt.Call(c.Append, app(func(r *appendReq) { r.Messages = tooMany })), Field: "messages"},
		{Name: "Append/no role", Call: vt.Call(c.Append, m(0, func(m *msg) { m.Role = 0 })), Field: "messages[0].role"},
		{Name: "Append/unknown role", Call: vt.Call(c.Append, m(0, func(m *msg) { m.Role = 9 })), Field: "messages[0].role"},
		{Name: "Append/bad id", Call: vt.Call(c.Append, m(0, func(m *msg) { m.Id = "a/b" })), Field: "messages[0].id"},
		{Name: "Append/name with control", Call: vt.Call(c.Append, m(0, func(m *msg) { m.Name = "a\x00" })), Field: "messages[0].name"},
		{Name: "Append/bad round_id", Call: vt.Call(c.Append, m(0, func(m *msg) { m.RoundId = "round 1" })), Field: "messages[0].round_id"},
		{Name: "Append/bad created_at", Call: vt.Call(c.Append, m(0, func(m *msg) { m.CreatedAt = &timestamppb.Timestamp{Nanos: -1} })), Field: "messages[0].created_at"},
		{Name: "Append/unknown importance", Call: vt.Call(c.Append, m(0, func(m *msg) { m.Importance = 5 })), Field: "messages[0].importance"},
		{Name: "Append/unknown kind", Call: vt.Call(c.Append, m(0, func(m *msg) { m.Kind = 4 })), Field: "messages[0].kind"},
		{Name: "Append/user with tool_call_id", Call: vt.Call(c.Append, m(0, func(m *msg) { m.ToolCallId = "call_1" })), Field: "messages[0].tool_call_id"},
		{Name: "Append/user with tool calls", Call: vt.Call(c.Append, m(0, func(m *msg) { m.ToolCalls = []*baagentv1.ToolCall{{Id: "c", Name: "n"}} })), Field: "messages[0].tool_calls"},
		{Name: "Append/tool call without id", Call: vt.Call(c.Append, m(1, func(m *msg) { m.ToolCalls[0].Id = "" })), Field: "messages[1].tool_calls[0].id"},
		{Name: "Append/duplicate tool call id", Call: vt.Call(c.Append, m(1, func(m *msg) { m.ToolCalls[1].Id = "call_1" })), Field: "messages[1].tool_calls[1].id"},
		{Name: "Append/tool call without name", Call: vt.Call(c.Append, m(1, func(m *msg) { m.ToolCalls[1].Name = "" })), Field: "messages[1].tool_calls[1].name"},
		{Name: "Append/tool message without tool_call_id", Call: vt.Call(c.Append, m(2, func(m *msg) { m.ToolCallId = "" })), Field: "messages[2].tool_call_id"},
		{Name: "Append/tool_call_id with space", Call: vt.Call(c.Append, m(2, func(m *msg) { m.ToolCallId = "call 1" })), Field: "messages[2].tool_call_id"},
		{Name: "Append/tool_name with newline", Call: vt.Call(c.Append, m(2, func(m *msg) { m.ToolName = "sql\nquery" })), Field: "messages[2].tool_name"},

		{Name: "GetHistory/valid", Call: vt.Call(c.GetHistory, validHistory)},
		{Name: "GetHistory/defaults", Call: vt.Call(c.GetHistory, &historyReq{Tenant: "t", ConversationId: "c"})},
		{Name: "GetHistory/no tenant", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "GetHistory/no conversation_id", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.ConversationId = "" })), Field: "conversation_id"},
		{Name: "GetHistory/hidden conversation_id", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.ConversationId = ".git" })), Field: "conversation_id"},
		{Name: "GetHistory/negative page_size", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.PageSize = -1 })), Field: "page_size"},
		{Name: "GetHistory/page_size over max", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.PageSize = MaxPageSize + 1 })), Field: "page_size"},
		{Name: "GetHistory/page_token with space", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.PageToken = "a b" })), Field: "page_token"},
		{Name: "GetHistory/page_token too long", Call: vt.Call(c.GetHistory, hist(func(r *historyReq) { r.PageToken = strings.Repeat("p", validate.MaxPageTokenLen+1) })), Field: "page_token"},

		{Name: "DeleteConversation/valid", Call: vt.Call(c.DeleteConversation, validDelete)},
		{Name: "DeleteConversation/no tenant", Call: vt.Call(c.DeleteConversation, del(func(r *deleteReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "DeleteConversation/tenant wildcard", Call: vt.Call(c.DeleteConversation, del(func(r *deleteReq) { r.Tenant = "*" })), Field: "tenant"},
		{Name: "DeleteConversation/no conversation_id", Call: vt.Call(c.DeleteConversation, del(func(r *deleteReq) { r.ConversationId = "" })), Field: "conversation_id"},
		{Name: "DeleteConversation/conversation_id too long", Call: vt.Call(c.DeleteConversation, del(func(r *deleteReq) { r.ConversationId = strings.Repeat("c", validate.MaxIDLen+1) })), Field: "conversation_id"},

		{Name: "BuildWindow/valid", Call: vt.Call(c.BuildWindow, validBuild)},
		{Name: "BuildWindow/minimal", Call: vt.Call(c.BuildWindow, minimalBuild)},
		{Name: "BuildWindow/empty budget and compression", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) {
			r.Budget, r.Compression = &budgetOpts{}, &compCfg{}
		}))},
		{Name: "BuildWindow/shares summing to 1 with rounding, tiny trigger", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) {
			b.SystemBudgetPct, b.HistoryBudgetPct = proto.Float64(0.05), proto.Float64(0.55)
			b.RecentBudgetPct, b.OutputReservePct = proto.Float64(0.3), proto.Float64(0.1) // sums to 1.0000000000000002
			b.CompressionTriggerPct = proto.Float64(math.SmallestNonzeroFloat64)
		}))},
		{Name: "BuildWindow/zero shares", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) {
			b.SystemBudgetPct, b.HistoryBudgetPct, b.RecentBudgetPct, b.OutputReservePct = proto.Float64(0), proto.Float64(0), proto.Float64(0), proto.Float64(0)
		}))},
		{Name: "BuildWindow/partial shares", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) {
			b.SystemBudgetPct, b.RecentBudgetPct = nil, nil
		}))},
		{Name: "BuildWindow/only context length", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.MaxOutputTokens = 0 }))},
		{Name: "BuildWindow/only output limit", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.MaxContextTokens = 0 }))},
		{Name: "BuildWindow/no tenant", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "BuildWindow/no conversation_id", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.ConversationId = "" })), Field: "conversation_id"},
		{Name: "BuildWindow/no model", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.Model = "" })), Field: "model"},
		{Name: "BuildWindow/model with space", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.Model = "gpt 4o" })), Field: "model"},
		{Name: "BuildWindow/model too long", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.Model = strings.Repeat("m", validate.MaxModelLen+1) })), Field: "model"},
		{Name: "BuildWindow/system message without role", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.SystemMessages[1].Role = 0 })), Field: "system_messages[1].role"},
		{Name: "BuildWindow/too many system messages", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.SystemMessages = tooMany })), Field: "system_messages"},
		{Name: "BuildWindow/bad tool name", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.Tools[1].Name = "file.read" })), Field: "tools[1].name"},
		{Name: "BuildWindow/duplicate tool", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.Tools[1].Name = "sql_query" })), Field: "tools[1].name"},
		{Name: "BuildWindow/tool parameters not an object", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) {
			r.Tools[0].Parameters.Fields["type"] = structpb.NewStringValue("array")
		})), Field: "tools[0].parameters.type"},
		{Name: "BuildWindow/tool parameters NaN", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) {
			r.Tools[0].Parameters.Fields["minimum"] = structpb.NewNumberValue(math.NaN())
		})), Field: "tools[0].parameters.minimum"},
		{Name: "BuildWindow/negative max_context_tokens", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.MaxContextTokens = -1 })), Field: "budget.max_context_tokens"},
		{Name: "BuildWindow/negative max_output_tokens", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.MaxOutputTokens = -1 })), Field: "budget.max_output_tokens"},
		{Name: "BuildWindow/output equals context", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.MaxOutputTokens = b.MaxContextTokens })), Field: "budget.max_output_tokens"},
		{Name: "BuildWindow/negative system share", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.SystemBudgetPct = proto.Float64(-0.01) })), Field: "budget.system_budget_pct"},
		{Name: "BuildWindow/history share above 1", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) {
			b.SystemBudgetPct, b.RecentBudgetPct, b.OutputReservePct = nil, nil, nil
			b.HistoryBudgetPct = proto.Float64(1.01)
		})), Field: "budget.history_budget_pct"},
		{Name: "BuildWindow/recent share NaN", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.RecentBudgetPct = proto.Float64(math.NaN()) })), Field: "budget.recent_budget_pct"},
		{Name: "BuildWindow/output share infinite", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.OutputReservePct = proto.Float64(math.Inf(1)) })), Field: "budget.output_reserve_pct"},
		{Name: "BuildWindow/shares above 1", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.HistoryBudgetPct = proto.Float64(0.51) })), Field: "budget"},
		{Name: "BuildWindow/given shares above 1", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) {
			b.SystemBudgetPct, b.RecentBudgetPct = nil, nil
			b.HistoryBudgetPct, b.OutputReservePct = proto.Float64(0.9), proto.Float64(0.2)
		})), Field: "budget"},
		{Name: "BuildWindow/zero trigger", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.CompressionTriggerPct = proto.Float64(0) })), Field: "budget.compression_trigger_pct"},
		{Name: "BuildWindow/trigger above 1", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.CompressionTriggerPct = proto.Float64(1.0000001) })), Field: "budget.compression_trigger_pct"},
		{Name: "BuildWindow/trigger NaN", Call: vt.Call(c.BuildWindow, bud(func(b *budgetOpts) { b.CompressionTriggerPct = proto.Float64(math.NaN()) })), Field: "budget.compression_trigger_pct"},
		{Name: "BuildWindow/unknown strategy", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.Strategy = 5 })), Field: "compression.strategy"},
		{Name: "BuildWindow/negative strategy", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.Strategy = -1 })), Field: "compression.strategy"},
		{Name: "BuildWindow/negative threshold", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.LlmSummarizationThreshold = proto.Int32(-1) })), Field: "compression.llm_summarization_threshold"},
		{Name: "BuildWindow/negative ttl", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.SummaryCacheTtlHours = proto.Int32(-1) })), Field: "compression.summary_cache_ttl_hours"},
		{Name: "BuildWindow/negative cost cap", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.MaxCompressionCostPerHour = proto.Float64(-0.01) })), Field: "compression.max_compression_cost_per_hour"},
		{Name: "BuildWindow/infinite cost cap", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.MaxCompressionCostPerHour = proto.Float64(math.Inf(1)) })), Field: "compression.max_compression_cost_per_hour"},
		{Name: "BuildWindow/NaN cost cap", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.MaxCompressionCostPerHour = proto.Float64(math.NaN()) })), Field: "compression.max_compression_cost_per_hour"},
		{Name: "BuildWindow/bad summarizer_model", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.SummarizerModel = "small model" })), Field: "compression.summarizer_model"},
		{Name: "BuildWindow/negative summary_max_tokens", Call: vt.Call(c.BuildWindow, comp(func(c *compCfg) { c.SummaryMaxTokens = proto.Int32(-500) })), Field: "compression.summary_max_tokens"},
		{Name: "BuildWindow/bad run_id", Call: vt.Call(c.BuildWindow, build(func(r *buildReq) { r.RunId = "run.1" })), Field: "run_id"},
	})
}

// TestLimitOptions checks that MaxMessages and MaxMessageBytes are enforced
// exactly at the boundary, on both message lists.
func TestLimitOptions(t *testing.T) {
	t.Parallel()

	srv := New(Options{MaxMessages: 2, MaxMessageBytes: 8})
	c := baagentv1.NewContextServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	user := func(content string) *msg { return &msg{Role: baagentv1.Role_ROLE_USER, Content: content} }
	app := func(msgs ...*msg) *appendReq { return &appendReq{Tenant: "t", ConversationId: "c", Messages: msgs} }
	build := func(msgs ...*msg) *buildReq {
		return &buildReq{Tenant: "t", ConversationId: "c", Model: "m", SystemMessages: msgs}
	}
	assistant := &msg{Role: baagentv1.Role_ROLE_ASSISTANT, ToolCalls: []*baagentv1.ToolCall{{Id: "c1", Name: "glob", Arguments: "123456789"}}}

	runEdge(t, []vt.Case{
		{Name: "Append/at limits", Call: vt.Call(c.Append, app(user("12345678"), user("é€456")))},
		{Name: "Append/one message too many", Call: vt.Call(c.Append, app(user("a"), user("b"), user("c"))), Field: "messages"},
		{Name: "Append/content one byte over", Call: vt.Call(c.Append, app(user("a"), user("123456789"))), Field: "messages[1].content"},
		{Name: "Append/arguments one byte over", Call: vt.Call(c.Append, app(assistant)), Field: "messages[0].tool_calls[0].arguments"},
		{Name: "BuildWindow/at limits", Call: vt.Call(c.BuildWindow, build(user("12345678"), user("")))},
		{Name: "BuildWindow/one message too many", Call: vt.Call(c.BuildWindow, build(user("a"), user("b"), user("c"))), Field: "system_messages"},
		{Name: "BuildWindow/content one byte over", Call: vt.Call(c.BuildWindow, build(user("123456789"))), Field: "system_messages[0].content"},
	})
}

// TestEveryFieldNamed sends requests where every field is wrong and checks
// that one InvalidArgument names them all.
func TestEveryFieldNamed(t *testing.T) {
	t.Parallel()

	srv := New(Options{})
	c := baagentv1.NewContextServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	ctx := t.Context()

	_, err := c.Append(ctx, &appendReq{Tenant: "a/b", ConversationId: "", Messages: []*msg{{Role: baagentv1.Role_ROLE_TOOL}}})
	wantFields(t, err, "tenant", "conversation_id", "messages[0].tool_call_id")

	_, err = c.GetHistory(ctx, &historyReq{PageSize: -5, PageToken: "\t"})
	wantFields(t, err, "tenant", "conversation_id", "page_size", "page_token")

	_, err = c.DeleteConversation(ctx, &deleteReq{})
	wantFields(t, err, "tenant", "conversation_id")

	_, err = c.BuildWindow(ctx, &buildReq{
		SystemMessages: []*msg{{}},
		Tools:          []*baagentv1.ToolSchema{{}},
		Budget: &budgetOpts{
			MaxContextTokens: -1, MaxOutputTokens: -2,
			SystemBudgetPct: proto.Float64(2), HistoryBudgetPct: proto.Float64(-1),
			RecentBudgetPct: proto.Float64(math.NaN()), OutputReservePct: proto.Float64(1.5),
			CompressionTriggerPct: proto.Float64(-1),
		},
		Compression: &compCfg{
			Strategy: 42, LlmSummarizationThreshold: proto.Int32(-1), SummaryCacheTtlHours: proto.Int32(-1),
			MaxCompressionCostPerHour: proto.Float64(math.Inf(-1)), SummarizerModel: "a b", SummaryMaxTokens: proto.Int32(-1),
		},
		RunId: "a:b",
	})
	wantFields(t, err, "tenant", "conversation_id", "model", "system_messages[0].role", "tools[0].name",
		"budget.max_context_tokens", "budget.max_output_tokens", "budget.system_budget_pct",
		"budget.history_budget_pct", "budget.recent_budget_pct", "budget.output_reserve_pct",
		"budget.compression_trigger_pct", "compression.strategy", "compression.llm_summarization_threshold",
		"compression.summary_cache_ttl_hours", "compression.max_compression_cost_per_hour",
		"compression.summarizer_model", "compression.summary_max_tokens", "run_id")
}

// TestManyViolationsOverTheWire checks that a request with far more bad
// fields than validate.MaxViolations still reaches the client as a bounded
// InvalidArgument (the status must fit in gRPC trailers).
func TestManyViolationsOverTheWire(t *testing.T) {
	t.Parallel()

	srv := New(Options{})
	c := baagentv1.NewContextServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	msgs := make([]*msg, DefaultMaxMessages)
	long := strings.Repeat("x", validate.MaxToolCallIDLen+1)
	for i := range msgs {
		msgs[i] = &msg{Role: baagentv1.Role_ROLE_TOOL, ToolCallId: long, Id: long, RoundId: long, Name: long}
	}
	_, err := c.Append(t.Context(), &appendReq{Tenant: "t", ConversationId: "c", Messages: msgs})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument, got %v", err)
	}
	if n := len(violations(st)); n != validate.MaxViolations {
		t.Errorf("BadRequest has %d violations, want %d", n, validate.MaxViolations)
	}
	if want := fmt.Sprintf("and %d more", 4*DefaultMaxMessages-validate.MaxViolations); !strings.HasSuffix(st.Message(), want) {
		t.Errorf("message does not end with %q: …%s", want, st.Message()[max(0, len(st.Message())-80):])
	}
}

// TestInProcess covers what the protobuf wire cannot carry (nil list
// elements, invalid UTF-8) by calling the handlers directly, as an
// in-process caller could.
func TestInProcess(t *testing.T) {
	t.Parallel()

	s := New(Options{})
	m := func(i int, f func(*msg)) *appendReq {
		return vt.With(validAppend, func(r *appendReq) { f(r.Messages[i]) })
	}
	build := func(f func(*buildReq)) *buildReq { return vt.With(validBuild, f) }
	cases := []vt.Case{
		{Name: "Append/nil message", Call: call(s.Append, vt.With(validAppend, func(r *appendReq) { r.Messages[1] = nil })), Field: "messages[1]"},
		{Name: "Append/content not UTF-8", Call: call(s.Append, m(0, func(m *msg) { m.Content = "ok\xff" })), Field: "messages[0].content"},
		{Name: "Append/tool call arguments not UTF-8", Call: call(s.Append, m(1, func(m *msg) { m.ToolCalls[0].Arguments = "{\"a\":\"\xc3\"}" })), Field: "messages[1].tool_calls[0].arguments"},
		{Name: "Append/nil tool call", Call: call(s.Append, m(1, func(m *msg) { m.ToolCalls[0] = nil })), Field: "messages[1].tool_calls[0]"},
		{Name: "Append/reasoning not UTF-8", Call: call(s.Append, m(1, func(m *msg) { m.ReasoningContent = "\xfe" })), Field: "messages[1].reasoning_content"},
		{Name: "BuildWindow/nil system message", Call: call(s.BuildWindow, build(func(r *buildReq) { r.SystemMessages[0] = nil })), Field: "system_messages[0]"},
		{Name: "BuildWindow/nil tool", Call: call(s.BuildWindow, build(func(r *buildReq) { r.Tools[1] = nil })), Field: "tools[1]"},
		{Name: "BuildWindow/tool description not UTF-8", Call: call(s.BuildWindow, build(func(r *buildReq) { r.Tools[0].Description = "\x80" })), Field: "tools[0].description"},
		{Name: "BuildWindow/valid", Call: call(s.BuildWindow, validBuild)},
	}
	runEdge(t, cases)
}

// call adapts a handler and a request into a [vt.Case] call.
func call[Req, Resp any](h func(context.Context, Req) (Resp, error), req Req) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := h(ctx, req)
		return err
	}
}

func TestNilRequests(t *testing.T) {
	t.Parallel()

	s := New(Options{})
	ctx := t.Context()
	_, err := s.Append(ctx, nil)
	wantFields(t, err, "tenant", "conversation_id", "messages")
	_, err = s.GetHistory(ctx, nil)
	wantFields(t, err, "tenant", "conversation_id")
	_, err = s.DeleteConversation(ctx, nil)
	wantFields(t, err, "tenant", "conversation_id")
	_, err = s.BuildWindow(ctx, nil)
	wantFields(t, err, "tenant", "conversation_id", "model")
}

func violations(st *status.Status) []*errdetails.BadRequest_FieldViolation {
	var out []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}

// wantFields fails unless err is InvalidArgument whose BadRequest detail
// names exactly the given fields (each at least once, no other field).
func wantFields(t *testing.T, err error, fields ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument, got %v", err)
	}
	got := map[string]bool{}
	for _, v := range violations(st) {
		got[v.GetField()] = true
	}
	for _, f := range fields {
		if !got[f] {
			t.Errorf("no violation for %q; message: %s", f, st.Message())
		}
		delete(got, f)
	}
	for f := range got {
		t.Errorf("unexpected violation for %q; message: %s", f, st.Message())
	}
}

// FuzzValidators feeds arbitrary bytes, decoded as each request type, to the
// validators and the handlers: never a panic; a validator returns nil or
// InvalidArgument with a BadRequest detail, and the handler answers
// FailedPrecondition (no dependencies) when the validator accepts, or
// InvalidArgument for the one check after it (an unknown page token), and
// otherwise returns the validator's error.
func FuzzValidators(f *testing.F) {
	s := New(Options{})
	type target struct {
		validate func([]byte) (ok bool, err error)
		handler  func(context.Context, []byte) (bool, error)
	}
	targets := []target{
		{validator(func(r *appendReq) error { return s.validateAppend(r) }), vt.Handler(s.Append)},
		{validator(validateGetHistory), vt.Handler(s.GetHistory)},
		{validator(validateDeleteConversation), vt.Handler(s.DeleteConversation)},
		{validator(func(r *buildReq) error { return s.validateBuildWindow(r) }), vt.Handler(s.BuildWindow)},
	}
	f.Add(uint8(0), vt.Marshal(f, validAppend))
	f.Add(uint8(0), vt.Marshal(f, minimalAppend))
	f.Add(uint8(1), vt.Marshal(f, validHistory))
	f.Add(uint8(2), vt.Marshal(f, validDelete))
	f.Add(uint8(3), vt.Marshal(f, validBuild))
	f.Add(uint8(3), vt.Marshal(f, minimalBuild))
	f.Add(uint8(3), []byte{})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		tg := targets[int(which)%len(targets)]
		ok, verr := tg.validate(data)
		if !ok {
			return
		}
		if verr != nil {
			st := status.Convert(verr)
			if st.Code() != codes.InvalidArgument || len(violations(st)) == 0 {
				t.Fatalf("validator returned %v, want nil or InvalidArgument with BadRequest", verr)
			}
		}
		_, herr := tg.handler(t.Context(), data)
		switch code := status.Code(herr); {
		case code != codes.FailedPrecondition && code != codes.InvalidArgument:
			t.Fatalf("handler without dependencies returned %v", herr)
		case verr == nil && code == codes.InvalidArgument && len(violations(status.Convert(herr))) != 1:
			t.Fatalf("validator accepted but handler returned %v", herr)
		case verr != nil && status.Convert(herr).Message() != status.Convert(verr).Message():
			t.Fatalf("handler returned %v, validator %v", herr, verr)
		}
	})
}

// validator adapts a request validator for fuzzing: ok is false when data is
// not a valid encoding of the request.
func validator[Req proto.Message](v func(Req) error) func([]byte) (bool, error) {
	return func(data []byte) (bool, error) {
		var zero Req
		req := zero.ProtoReflect().Type().New().Interface().(Req)
		if proto.Unmarshal(data, req) != nil {
			return false, nil
		}
		return true, v(req)
	}
}

// runEdge runs edge-validation cases against a server without dependencies:
// a bad request is InvalidArgument naming the field, a valid one passes the
// edge and reaches the missing dependency (FailedPrecondition).
func runEdge(t *testing.T, cases []vt.Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Call(t.Context())
			if c.Field != "" {
				vt.WantInvalid(t, err, c.Field)
				return
			}
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("want FailedPrecondition (valid request, no dependencies), got %v", err)
			}
		})
	}
}
