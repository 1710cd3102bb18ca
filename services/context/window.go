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

// buildWindow is BuildWindow after validation. It runs the phases of a
// window in order; each phase fills in w for the next.
func (s *Server) buildWindow(ctx context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	started := time.Now()
	w, err := s.loadWindow(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.countHistory(ctx, w); err != nil {
		return nil, err
	}
	w.plan(ctx)
	if err := s.compress(w); err != nil {
		return nil, err
	}
	w.final = w.mg.apply(w.p.total)
	if w.final > w.b.input {
		return nil, exhausted(req.GetModel(), w.b, w.mg, w.fixed, w.sysRaw, w.units, w.final)
	}
	resp := s.respond(w)
	traceWindow(ctx, w)
	if err := checkChatRequest(resp.Messages); err != nil {
		s.log.ErrorContext(ctx, "built an invalid window", "tenant", w.key.tenant, "conversation_id", w.key.id, "err", err)
		return nil, status.Errorf(codes.Internal, "built an invalid window: %v", err)
	}
	s.reportWindow(ctx, w)
	promx.Observe(ctx, s.metrics.buildSeconds, time.Since(started).Seconds())
	return resp, nil
}

// windowBuild is one BuildWindow call on its way through the phases.
type windowBuild struct {
	// loadWindow
	req     *baagentv1.BuildWindowRequest
	key     convKey
	counter *counter
	hist    []*storedMsg
	mi      *baagentv1.ModelInfo
	fixed   toolsCount
	b       windowBudget
	mg      marginer
	cfg     compressionConfig

	// countHistory
	sysRaw []int64 // raw counts of the system messages
	units  []*unit

	// plan
	fixedRaw int64 // raw count of what is not history: system messages, tool schemas, reply priming
	original int64 // raw count of the window before compression
	p        *planner

	// compress and respond
	chosen     baagentv1.CompressionStrategy // the strategy the passes ran
	applied    baagentv1.CompressionStrategy // the strategy the window shows
	pending    bool                          // a summary is on its way for a later window
	compressed bool
	final      int64    // the window's count, margin included
	notes      []string // why the window was not compressed as asked
}

// loadWindow reads what a window is built from: the conversation's history,
// the model, the count of the tool schemas, the budget and the compression
// settings.
func (s *Server) loadWindow(ctx context.Context, req *baagentv1.BuildWindowRequest) (*windowBuild, error) {
	w := &windowBuild{req: req, key: convKey{req.GetTenant(), req.GetConversationId()}, counter: s.counter}
	var err error
	if w.hist, err = s.store.snapshot(ctx, w.key); err != nil {
		return nil, storeError(err)
	}
	if w.mi, err = s.counter.modelInfo(ctx, req.GetModel()); err != nil {
		return nil, status.Errorf(codes.Unavailable, "model %q: %v", req.GetModel(), err)
	}
	if w.fixed, err = s.toolsCount(ctx, req, w.mi); err != nil {
		return nil, err
	}
	w.b = resolveBudget(w.mi.GetMetadata(), req.GetBudget())
	w.mg = newMarginer(w.mi.GetSafetyMargin())
	w.cfg = s.resolveCompression(req.GetCompression())
	return w, nil
}

// count returns the raw count of each message for the request's model.
func (w *windowBuild) count(ctx context.Context, cs []countable) ([]int64, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	return w.counter.rawCounts(ctx, w.req.GetModel(), w.mi, cs)
}

// countHistory counts the system messages and the history in one call, then
// groups the history into units, repaired where the history would not make
// a valid chat request.
func (s *Server) countHistory(ctx context.Context, w *windowBuild) error {
	sys := w.req.GetSystemMessages()
	all := make([]countable, 0, len(sys)+len(w.hist))
	for _, m := range sys {
		all = append(all, countable{msg: m, hash: hashContent(m)})
	}
	for _, h := range w.hist {
		all = append(all, countable{msg: h.msg, hash: h.hash})
	}
	raws, err := w.count(ctx, all)
	if err != nil {
		return status.Errorf(codes.Unavailable, "count tokens: %v", err)
	}
	w.sysRaw = raws[:len(sys)]
	units, repaired, rep := buildUnits(w.hist, raws[len(sys):])
	w.units = units
	if len(repaired) > 0 {
		if err := w.countRepaired(ctx, repaired); err != nil {
			return err
		}
	}
	if rep.orphanToolResults > 0 {
		s.metrics.repairs.WithLabelValues("orphan_tool_result").Add(float64(rep.orphanToolResults))
	}
	if rep.unansweredCalls > 0 {
		s.metrics.repairs.WithLabelValues("unanswered_tool_call").Add(float64(rep.unansweredCalls))
	}
	return nil
}

// countRepaired counts the repaired forms of messages whose unanswered tool
// calls were removed, and the units' counts again.
func (w *windowBuild) countRepaired(ctx context.Context, repaired []*item) error {
	rr, err := w.count(ctx, forms(repaired))
	if err != nil {
		return status.Errorf(codes.Unavailable, "count tokens: %v", err)
	}
	for i, it := range repaired {
		it.raw, it.orig = rr[i], rr[i]
	}
	for _, u := range w.units {
		u.raw = 0
		for _, it := range u.items {
			u.raw += it.raw
		}
	}
	return nil
}

// plan sets the planner up: the window's count as it stands, the recent
// zone, and the targets from the budget: hard is the input budget, soft is
// below the trigger and within the budget's split between system, older
// history and the recent zone.
func (w *windowBuild) plan(ctx context.Context) {
	w.fixedRaw = w.fixed.tools + w.fixed.priming
	for _, n := range w.sysRaw {
		w.fixedRaw += n
	}
	p := &planner{ctx: ctx, count: w.count, units: w.units, total: w.fixedRaw, minSegment: int64(2 * w.cfg.summaryMax)}
	for _, u := range w.units {
		p.total += u.raw
		p.lastRound = max(p.lastRound, u.round)
	}
	w.original = p.total
	mg, b := w.mg, w.b
	p.hard = mg.rawFor(b.input)
	p.markRecent(mg.rawFor(b.recentShare))
	var recentRaw int64
	for _, u := range w.units {
		if u.recent {
			recentRaw += u.raw
		}
	}
	olderTarget := mg.rawFor(b.historyShare) + max(0, mg.rawFor(b.systemShare)-w.fixedRaw)
	p.soft = min(mg.rawFor(b.trigger), w.fixedRaw+recentRaw+olderTarget)
	p.soft = min(p.soft, p.hard)
	w.p = p
}

// compress chooses a strategy and runs its passes, when the window reaches
// the compression trigger and the request does not turn compression off.
func (s *Server) compress(w *windowBuild) error {
	w.chosen = baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE
	if w.mg.apply(w.original) < w.b.trigger || w.cfg.strategy == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE {
		return nil
	}
	w.chosen, w.notes = s.chooseStrategy(w.cfg, len(w.hist), w.mg.apply(w.original))
	w.p.summary = func(seg *segment) (string, bool) { return s.cachedSummary(w, seg) }
	budget := w.req.GetBudget()
	prune := budget == nil || budget.PruneToolOutputs == nil || budget.GetPruneToolOutputs()
	if err := w.p.run(w.chosen, prune); err != nil {
		return status.Errorf(codes.Unavailable, "count tokens: %v", err)
	}
	return nil
}

// cachedSummary is the summary of seg if the cache holds it.
func (s *Server) cachedSummary(w *windowBuild, seg *segment) (string, bool) {
	k := segmentKey(w.key, w.cfg, seg.msgs)
	seg.key = k
	text, ok := s.summaries.get(k)
	if ok {
		s.metrics.summaryCacheHits.Inc()
	} else {
		s.metrics.summaryCacheMisses.Inc()
	}
	return text, ok
}

// respond lays the window out as planned, asks for the summaries it lacked,
// and says in the response what compression did.
func (s *Server) respond(w *windowBuild) *baagentv1.BuildWindowResponse {
	resp, stats := assemble(w.req, w.units, w.sysRaw, w.fixed, w.mg, w.b)
	if len(w.p.wanted) > 0 {
		var n []string
		w.pending, n = s.summaries.request(w.key, w.cfg, w.p.wanted)
		w.notes = append(w.notes, n...)
	}
	w.applied = appliedStrategy(w.chosen, stats, w.p, w.pending)
	if w.chosen == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE && w.applied == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT {
		w.notes = append(w.notes, "no summary available; extract used")
	}
	w.compressed = stats.changed() || w.p.prunedCount > 0
	resp.Strategy = w.applied
	resp.SummaryPending = w.pending
	resp.CompressionCostUsd = estimateCost(w.applied, w.mg.apply(stats.compressedRaw))
	resp.Compression = &baagentv1.ContextCompressedPayload{
		WasCompressed:          w.compressed,
		CompressionStrategy:    strategyName(w.applied),
		OriginalMessageCount:   int32(len(w.hist)),
		FinalMessageCount:      int32(len(resp.Messages)),
		EstimatedTokens:        w.final,
		TokenBudget:            w.b.input,
		BudgetUtilizationPct:   math.Round(float64(w.final)/float64(w.b.input)*10000) / 100,
		SummarizedMessageCount: int32(stats.summarized),
		PrunedToolOutputCount:  int32(w.p.prunedCount),
		PrunedTokens:           w.mg.apply(w.p.prunedRaw),
	}
	resp.ContextUsage = float64(w.final) / float64(w.b.input)
	return resp
}

// traceWindow puts on the BuildWindow RPC's span what the window cost
// before and after compression.
func traceWindow(ctx context.Context, w *windowBuild) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(
			attribute.String("baagent.context.strategy", strategyName(w.applied)),
			attribute.Int64("baagent.context.tokens_before", w.mg.apply(w.original)),
			attribute.Int64("baagent.context.tokens_after", w.final),
			attribute.Int64("baagent.context.token_budget", w.b.input),
		)
	}
}

// reportWindow records a built window in the metrics and the log, and tells
// the caller in a response header why it was not compressed as asked.
func (s *Server) reportWindow(ctx context.Context, w *windowBuild) {
	key := w.key
	if w.compressed {
		s.metrics.compressions.WithLabelValues(strategyName(w.applied)).Inc()
		s.metrics.tokensSaved.Add(float64(w.mg.apply(w.original) - w.final))
		s.metrics.prunedOutputs.Add(float64(w.p.prunedCount))
		s.log.InfoContext(ctx, "context compressed", "tenant", key.tenant, "conversation_id", key.id, "run_id", w.req.GetRunId(),
			"strategy", strategyName(w.applied), "original_tokens", w.mg.apply(w.original), "final_tokens", w.final,
			"budget", w.b.input, "summary_pending", w.pending)
	}
	if len(w.notes) > 0 {
		note := strings.Join(w.notes, "; ")
		s.log.WarnContext(ctx, "context compression fallback", "tenant", key.tenant, "conversation_id", key.id, "note", note)
		_ = grpc.SetHeader(ctx, metadata.Pairs(NoteHeader, note)) // fails only outside a gRPC call
	}
}

func forms(its []*item) []countable {
	out := make([]countable, len(its))
	for i, it := range its {
		out[i] = it.msg
	}
	return out
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
