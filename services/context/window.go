package contextsvc

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	promx "github.com/baagent/baagent/internal/metrics"
)

// NoteHeader is the response header (gRPC metadata) that says why a window
// was not compressed as asked, e.g. "summarizer failed: …; extract used".
// The strategy in the response is always the one applied.
const NoteHeader = "baagent-context-note"

// Estimated compression cost: USD per 1,000 input tokens.
var strategyCostPer1K = map[baagentv1.CompressionStrategy]float64{
	baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE:  0.0,
	baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:   0.001,
	baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE: 0.003,
}

func estimateCost(s baagentv1.CompressionStrategy, tokens int64) float64 {
	return float64(tokens) / 1000 * strategyCostPer1K[s]
}

// Automatic strategy selection: EXTRACT below 30 messages; from the
// LLM threshold on, SUMMARIZE when its estimated cost is under the cap.
const autoExtractBelow = 30

// compressionConfig is a request's ContextCompressionConfig with defaults.
type compressionConfig struct {
	strategy        baagentv1.CompressionStrategy
	enableLLM       bool
	llmThreshold    int
	cacheTTL        time.Duration
	maxCostPerHour  float64
	summarizerModel string
	summaryMax      int
}

func (s *Server) resolveCompression(c *baagentv1.ContextCompressionConfig) compressionConfig {
	cfg := compressionConfig{
		strategy:        c.GetStrategy(),
		enableLLM:       true,
		llmThreshold:    50,
		cacheTTL:        24 * time.Hour,
		maxCostPerHour:  0.1,
		summarizerModel: s.opts.SummarizerModel,
		summaryMax:      500,
	}
	if c == nil {
		return cfg
	}
	if c.EnableLlmSummarization != nil {
		cfg.enableLLM = c.GetEnableLlmSummarization()
	}
	if c.LlmSummarizationThreshold != nil {
		cfg.llmThreshold = int(c.GetLlmSummarizationThreshold())
	}
	if v := c.GetSummaryCacheTtlHours(); v > 0 {
		cfg.cacheTTL = time.Duration(v) * time.Hour
	}
	if c.MaxCompressionCostPerHour != nil {
		cfg.maxCostPerHour = c.GetMaxCompressionCostPerHour()
	}
	if c.GetSummarizerModel() != "" {
		cfg.summarizerModel = c.GetSummarizerModel()
	}
	if v := c.GetSummaryMaxTokens(); v > 0 {
		cfg.summaryMax = int(v)
	}
	return cfg
}

// category is a line of the window breakdown.
type category uint8

const (
	catSystem category = iota
	catSkills
	catTools
	catHistory
	catToolOutputs
	catSummaries
	numCategories
)

// buildWindow is BuildWindow after validation.
func (s *Server) buildWindow(ctx context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	started := time.Now()
	key := convKey{req.GetTenant(), req.GetConversationId()}
	hist, err := s.store.snapshot(ctx, key)
	if err != nil {
		return nil, storeError(err)
	}
	mi, err := s.counter.modelInfo(ctx, req.GetModel())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "model %q: %v", req.GetModel(), err)
	}
	fixed, err := s.toolsCount(ctx, req, mi)
	if err != nil {
		return nil, err
	}
	b := resolveBudget(mi.GetMetadata(), req.GetBudget())
	mg := newMarginer(mi.GetSafetyMargin())
	cfg := s.resolveCompression(req.GetCompression())
	count := func(ctx context.Context, cs []countable) ([]int64, error) {
		if len(cs) == 0 {
			return nil, nil
		}
		return s.counter.rawCounts(ctx, req.GetModel(), mi, cs)
	}

	// Count the system messages and the history in one call.
	sys := req.GetSystemMessages()
	all := make([]countable, 0, len(sys)+len(hist))
	for _, m := range sys {
		all = append(all, countable{msg: m, hash: hashContent(m)})
	}
	for _, h := range hist {
		all = append(all, countable{msg: h.msg, hash: h.hash})
	}
	raws, err := count(ctx, all)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "count tokens: %v", err)
	}
	sysRaw := raws[:len(sys)]
	units, repaired, rep := buildUnits(hist, raws[len(sys):])
	if len(repaired) > 0 {
		rr, err := count(ctx, forms(repaired))
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "count tokens: %v", err)
		}
		for i, it := range repaired {
			it.raw, it.orig = rr[i], rr[i]
		}
		for _, u := range units {
			u.raw = 0
			for _, it := range u.items {
				u.raw += it.raw
			}
		}
	}
	if rep.orphanToolResults > 0 {
		s.metrics.repairs.WithLabelValues("orphan_tool_result").Add(float64(rep.orphanToolResults))
	}
	if rep.unansweredCalls > 0 {
		s.metrics.repairs.WithLabelValues("unanswered_tool_call").Add(float64(rep.unansweredCalls))
	}

	var fixedRaw int64 = fixed.tools + fixed.priming
	for _, n := range sysRaw {
		fixedRaw += n
	}
	p := &planner{ctx: ctx, count: count, units: units, total: fixedRaw, minSegment: int64(2 * cfg.summaryMax)}
	for _, u := range units {
		p.total += u.raw
		p.lastRound = max(p.lastRound, u.round)
	}
	original := p.total
	p.hard = mg.rawFor(b.input)
	p.markRecent(mg.rawFor(b.recentShare))
	var recentRaw int64
	for _, u := range units {
		if u.recent {
			recentRaw += u.raw
		}
	}
	olderTarget := mg.rawFor(b.historyShare) + max(0, mg.rawFor(b.systemShare)-fixedRaw)
	p.soft = min(mg.rawFor(b.trigger), fixedRaw+recentRaw+olderTarget)
	p.soft = min(p.soft, p.hard)

	var notes []string
	chosen := baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE
	triggered := mg.apply(original) >= b.trigger
	if triggered && cfg.strategy != baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE {
		chosen, notes = s.chooseStrategy(cfg, len(hist), mg.apply(original))
		p.summary = func(seg *segment) (string, bool) {
			k := segmentKey(key, cfg, seg.msgs)
			seg.key = k
			text, ok := s.summaries.get(k)
			if ok {
				s.metrics.summaryCacheHits.Inc()
			} else {
				s.metrics.summaryCacheMisses.Inc()
			}
			return text, ok
		}
		prune := req.GetBudget() == nil || req.GetBudget().PruneToolOutputs == nil || req.GetBudget().GetPruneToolOutputs()
		if err := p.run(chosen, prune); err != nil {
			return nil, status.Errorf(codes.Unavailable, "count tokens: %v", err)
		}
	}
	final := mg.apply(p.total)
	if final > b.input {
		return nil, exhausted(req.GetModel(), b, mg, fixed, sysRaw, units, final)
	}

	resp, stats := assemble(req, units, sysRaw, fixed, mg, b)
	pending := false
	if len(p.wanted) > 0 {
		var n []string
		pending, n = s.summaries.request(key, cfg, p.wanted)
		notes = append(notes, n...)
	}
	applied := appliedStrategy(chosen, stats, p, pending)
	if chosen == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE && applied == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT {
		notes = append(notes, "no summary available; extract used")
	}
	resp.Strategy = applied
	resp.SummaryPending = pending
	resp.CompressionCostUsd = estimateCost(applied, mg.apply(stats.compressedRaw))
	compressed := stats.changed() || p.prunedCount > 0
	resp.Compression = &baagentv1.ContextCompressedPayload{
		WasCompressed:          compressed,
		CompressionStrategy:    strategyName(applied),
		OriginalMessageCount:   int32(len(hist)),
		FinalMessageCount:      int32(len(resp.Messages)),
		EstimatedTokens:        final,
		TokenBudget:            b.input,
		BudgetUtilizationPct:   math.Round(float64(final)/float64(b.input)*10000) / 100,
		SummarizedMessageCount: int32(stats.summarized),
		PrunedToolOutputCount:  int32(p.prunedCount),
		PrunedTokens:           mg.apply(p.prunedRaw),
	}
	resp.ContextUsage = float64(final) / float64(b.input)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		// On the BuildWindow RPC's span: what the window cost before and
		// after compression.
		span.SetAttributes(
			attribute.String("baagent.context.strategy", strategyName(applied)),
			attribute.Int64("baagent.context.tokens_before", mg.apply(original)),
			attribute.Int64("baagent.context.tokens_after", final),
			attribute.Int64("baagent.context.token_budget", b.input),
		)
	}
	if err := checkChatRequest(resp.Messages); err != nil {
		s.log.ErrorContext(ctx, "built an invalid window", "tenant", key.tenant, "conversation_id", key.id, "err", err)
		return nil, status.Errorf(codes.Internal, "built an invalid window: %v", err)
	}

	if compressed {
		s.metrics.compressions.WithLabelValues(strategyName(applied)).Inc()
		s.metrics.tokensSaved.Add(float64(mg.apply(original) - final))
		s.metrics.prunedOutputs.Add(float64(p.prunedCount))
		s.log.InfoContext(ctx, "context compressed", "tenant", key.tenant, "conversation_id", key.id, "run_id", req.GetRunId(),
			"strategy", strategyName(applied), "original_tokens", mg.apply(original), "final_tokens", final,
			"budget", b.input, "summary_pending", pending)
	}
	if len(notes) > 0 {
		note := strings.Join(notes, "; ")
		s.log.WarnContext(ctx, "context compression fallback", "tenant", key.tenant, "conversation_id", key.id, "note", note)
		_ = grpc.SetHeader(ctx, metadata.Pairs(NoteHeader, note)) // fails only outside a gRPC call
	}
	promx.Observe(ctx, s.metrics.buildSeconds, time.Since(started).Seconds())
	return resp, nil
}

// chooseStrategy selects (docs/concepts/context-compression.md): the configured strategy, else
// EXTRACT below 30 messages, SUMMARIZE from the LLM threshold on when its
// estimated cost is under the hourly cap, else EXTRACT. SUMMARIZE needs a
// summarizer; without one EXTRACT is used and the caller is told.
func (s *Server) chooseStrategy(cfg compressionConfig, n int, tokens int64) (baagentv1.CompressionStrategy, []string) {
	llm := cfg.enableLLM && s.summaries.available()
	switch cfg.strategy {
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE, baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:
		return cfg.strategy, nil
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE:
		if !llm {
			why := "LLM summarization is disabled"
			if cfg.enableLLM {
				why = "no summarizer is running"
			}
			return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT, []string{why + "; extract used"}
		}
		return cfg.strategy, nil
	}
	if llm && n >= autoExtractBelow && n >= cfg.llmThreshold &&
		estimateCost(baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE, tokens) < cfg.maxCostPerHour {
		return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE, nil
	}
	return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT, nil
}

// appliedStrategy is the strategy a window actually shows.
func appliedStrategy(chosen baagentv1.CompressionStrategy, st windowStats, p *planner, pending bool) baagentv1.CompressionStrategy {
	if !st.changed() {
		return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE
	}
	if chosen == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE && p.summarized == 0 && !pending {
		return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT
	}
	return chosen
}

func strategyName(s baagentv1.CompressionStrategy) string {
	switch s {
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE:
		return "truncate"
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:
		return "extract"
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE:
		return "summarize"
	}
	return "none"
}

func forms(its []*item) []countable {
	out := make([]countable, len(its))
	for i, it := range its {
		out[i] = it.msg
	}
	return out
}

// windowStats summarises what compression did to the history.
type windowStats struct {
	summarized    int   // history messages standing as extracts or summaries
	dropped       int   // history messages left out
	compressedRaw int64 // raw count of the history messages compressed
}

func (w windowStats) changed() bool { return w.summarized > 0 || w.dropped > 0 }

// assemble lays out the window: system messages, then the history units as
// planned. It fills the messages and the breakdown.
func assemble(req *baagentv1.BuildWindowRequest, units []*unit, sysRaw []int64, fixed toolsCount, mg marginer, b windowBudget) (*baagentv1.BuildWindowResponse, windowStats) {
	var st windowStats
	var cats [numCategories]int64
	resp := &baagentv1.BuildWindowResponse{Messages: make([]*baagentv1.WindowMessage, 0, len(req.GetSystemMessages())+len(units)+4)}
	add := func(m *baagentv1.ChatMessage, raw int64, compressed bool, sources []string, c category) {
		cats[c] += raw
		resp.Messages = append(resp.Messages, &baagentv1.WindowMessage{Message: m, Tokens: mg.apply(raw), IsCompressed: compressed, SourceMessageIds: sources})
	}
	for i, m := range req.GetSystemMessages() {
		c := catSystem
		if k := m.GetKind(); k == baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG || k == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION {
			c = catSkills
		}
		add(m, sysRaw[i], false, nil, c)
	}
	ids := func(u *unit) []string {
		out := make([]string, len(u.items))
		for i, it := range u.items {
			out[i] = it.src.msg.GetId()
		}
		return out
	}
	origRaw := func(u *unit) (n int64) {
		for _, it := range u.items {
			n += it.origRaw()
		}
		return n
	}
	for _, u := range units {
		switch u.state {
		case unitDropped:
			st.dropped += len(u.items)
			st.compressedRaw += origRaw(u)
		case unitCollapsed:
			st.summarized += len(u.items)
			st.compressedRaw += origRaw(u)
			add(u.compact.msg, u.compactN, true, ids(u), catSummaries)
		case unitSummarized:
			st.summarized += len(u.items)
			st.compressedRaw += origRaw(u)
			if u.segFirst {
				var src []string
				for _, su := range u.seg.units {
					src = append(src, ids(su)...)
				}
				add(u.seg.msg.msg, u.seg.n, true, src, catSummaries)
			}
		default:
			for _, it := range u.items {
				m := it.src.msg
				c := catHistory
				switch {
				case protectedMsg(m):
					c = catSkills
				case it.form == formExtract || it.form == formOmitted:
					c = catSummaries
				case m.GetRole() == baagentv1.Role_ROLE_TOOL:
					c = catToolOutputs
				}
				if it.form == formVerbatim {
					add(m, it.raw, false, nil, c)
					continue
				}
				if it.form == formExtract || it.form == formOmitted {
					st.summarized++
					st.compressedRaw += it.origRaw()
				}
				add(it.msg.msg, it.raw, it.form != formRepaired, []string{m.GetId()}, c)
			}
		}
	}
	cats[catTools] = fixed.tools
	cats[catHistory] += fixed.priming // the reply slot belongs to the conversation
	// Apply the margin to running sums so the parts add up to the total.
	var parts [numCategories]int64
	var cum, prev int64
	for c := category(0); c < numCategories; c++ {
		cum += cats[c]
		cur := mg.apply(cum)
		parts[c] = cur - prev
		prev = cur
	}
	resp.Breakdown = &baagentv1.WindowBreakdown{
		SystemTokens:        parts[catSystem],
		SkillsTokens:        parts[catSkills],
		ToolSchemaTokens:    parts[catTools],
		HistoryTokens:       parts[catHistory],
		ToolOutputTokens:    parts[catToolOutputs],
		SummaryTokens:       parts[catSummaries],
		OutputReserveTokens: b.outputReserve,
		TotalTokens:         prev,
		InputBudgetTokens:   b.input,
	}
	return resp, st
}

// exhausted is the ResourceExhausted error of a window that cannot fit, with
// the numbers a caller needs to act.
func exhausted(model string, b windowBudget, mg marginer, fixed toolsCount, sysRaw []int64, units []*unit, final int64) error {
	var sys, keep int64
	for _, n := range sysRaw {
		sys += n
	}
	for _, u := range units {
		if u.state == unitKept {
			for _, it := range u.items {
				if !compressible(it) {
					keep += it.raw
				}
			}
		}
	}
	msg := fmt.Sprintf("the window needs %d tokens but model %q has an input budget of %d (context length %d minus %d reserved for output): "+
		"system messages %d, tool schemas %d, history that cannot be compressed (user requests, errors, skill instructions) %d; "+
		"shorten the system prompt or tool list, or continue in a new conversation",
		final, model, b.input, b.contextLength, b.outputReserve, mg.apply(sys), mg.apply(fixed.tools), mg.apply(keep))
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason: "CONTEXT_WINDOW_EXCEEDED",
		Domain: "baagent.context",
		Metadata: map[string]string{
			"window_tokens":         fmt.Sprint(final),
			"input_budget_tokens":   fmt.Sprint(b.input),
			"context_length":        fmt.Sprint(b.contextLength),
			"output_reserve_tokens": fmt.Sprint(b.outputReserve),
			"system_tokens":         fmt.Sprint(mg.apply(sys)),
			"tool_schema_tokens":    fmt.Sprint(mg.apply(fixed.tools)),
			"incompressible_tokens": fmt.Sprint(mg.apply(keep)),
		},
	}); err == nil {
		st = d
	}
	return st.Err()
}
