package memory

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/memory/store"
)

// Trace outcomes, the values of baagent_memory_pattern_traces_total{outcome}.
const (
	traceCreated   = "created"   // the trace made a new pattern
	traceEvolved   = "evolved"   // the trace evolved a pattern
	traceUnchanged = "unchanged" // recorded; no pattern changed (a failure matching none, a suppressed signature)
	traceDuplicate = "duplicate" // the run's trace was recorded before
	traceSkipped   = "skipped"   // patterns are switched off for the tenant or conversation
)

// RecordTrace learns from a finished run's trace: cut to its bounds,
// scrubbed of personal data and secrets, its goal's entities resolved in
// the tenant's graph, then recorded once per run with the store's
// LearnTrace. The pattern the run used (reuse or reference), when it is
// the tenant's own, evolves with the outcome; a run that declined the
// pattern it was offered changes nothing; otherwise the rules' Learn
// evolves the pattern whose signature matches, or makes a new one from a
// successful run unless its signature was marked useless.
func (s *Server) RecordTrace(ctx context.Context, req *baagentv1.RecordTraceRequest) (*baagentv1.RecordTraceResponse, error) {
	if err := validateRecordTrace(req); err != nil {
		return nil, err
	}
	tenant := req.GetTenant()
	in := req.GetTrace()
	set, err := s.store.GetSettings(ctx, tenant)
	if err != nil {
		return nil, s.storeError(ctx, "RecordTrace", "settings", err)
	}
	if !patternsOn(set, in.GetConversationId()) {
		s.metrics.patternTraces.WithLabelValues(traceSkipped).Inc()
		return &baagentv1.RecordTraceResponse{Skipped: true}, nil
	}
	tr := traceFromProto(in)
	redactions := scrubTrace(&tr)
	names, types, err := s.goalEntities(ctx, tenant, tr.UserGoal)
	if err != nil {
		return nil, s.storeError(ctx, "RecordTrace", "entities", err)
	}
	tr.Entities, tr.EntityTypes = names, types
	var suppressed []patterns.Signature
	now := s.now().UTC()
	if tr.Success {
		if suppressed, err = s.store.SuppressedSignatures(ctx, tenant, now); err != nil {
			return nil, s.storeError(ctx, "RecordTrace", "patterns", err)
		}
	}
	taskType := patterns.ClassifyTask(tr.UserGoal)
	used := ""
	if m := in.GetPatternMode(); m == patterns.ModeReuse.String() || m == patterns.ModeReference.String() {
		used = in.GetPatternId()
	}
	// A pattern offered for reuse that the user declined (or did not
	// answer) names the pattern with no mode: the run went its own way,
	// so it is no use of that pattern, and it does not evolve the pattern
	// its signature matches either (that is the one declined).
	declined := in.GetPatternId() != "" && in.GetPatternMode() == ""
	learn := func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
		if declined {
			return nil, false, nil
		}
		r, created := learnTrace(&tr, tenant, used, cands, suppressed, now)
		return r, created, nil
	}
	out, err := s.store.LearnTrace(ctx, &store.TraceRecord{
		Tenant:         tenant,
		RunID:          tr.RunID,
		ConversationID: tr.ConversationID,
		Trace:          tr,
		CreatedAt:      now,
	}, taskType, used, learn)
	if err != nil {
		return nil, s.storeError(ctx, "RecordTrace", "patterns", err)
	}
	outcome := traceUnchanged
	switch {
	case out.Duplicate:
		outcome = traceDuplicate
	case out.Created:
		outcome = traceCreated
	case out.PatternID != "":
		outcome = traceEvolved
	}
	s.metrics.patternTraces.WithLabelValues(outcome).Inc()
	s.log.InfoContext(ctx, "trace recorded", "tenant", tenant, "run_id", tr.RunID, "outcome", outcome,
		"pattern", out.PatternID, "task_type", taskType, "success", tr.Success, "redactions", redactions)
	return &baagentv1.RecordTraceResponse{PatternId: out.PatternID, Created: out.Created, Duplicate: out.Duplicate}, nil
}

// learnTrace is the decision of RecordTrace over the candidates LearnTrace
// gives: the used pattern, when among them and the tenant's own, evolves;
// otherwise patterns.Learn over the tenant's own candidates, whose new
// pattern is declined when its signature matches a suppressed one. It
// returns the record changed or created (nil when none) and whether it is
// new.
func learnTrace(tr *patterns.Trace, tenant, used string, cands []*store.PatternRecord, suppressed []patterns.Signature, now time.Time) (*store.PatternRecord, bool) {
	own := make([]*store.PatternRecord, 0, len(cands))
	for _, c := range cands {
		if c != nil && c.Tenant == tenant {
			own = append(own, c)
		}
	}
	if used != "" {
		for _, c := range own {
			if c.ID == used {
				patterns.Evolve(&c.Pattern, tr, now)
				return c, false
			}
		}
	}
	ps := make([]*patterns.Pattern, len(own))
	for i, c := range own {
		ps[i] = &c.Pattern
	}
	var fresh *store.PatternRecord
	sig := patterns.NewSignature(tr.UserGoal, tr.EntityTypes)
	newPattern := func() *patterns.Pattern {
		for _, sup := range suppressed {
			if patterns.SignatureMatch(sig, sup) {
				return nil
			}
		}
		fresh = &store.PatternRecord{Pattern: patterns.Pattern{ID: newID(patternPrefix, now), Tenant: tenant}}
		return &fresh.Pattern
	}
	p, created := patterns.Learn(tr, ps, now, newPattern)
	switch {
	case p == nil:
		return nil, false
	case created:
		return fresh, true
	}
	for _, c := range own {
		if &c.Pattern == p {
			return c, false
		}
	}
	return nil, false
}

// runTracePruning deletes the traces older than TraceRetention every
// PruneInterval (and once at start) until ctx ends.
func (s *Server) runTracePruning(ctx context.Context) error {
	for {
		n, err := s.store.PruneTraces(ctx, s.now().Add(-TraceRetention))
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.WarnContext(ctx, "memory: traces not pruned", "err", err)
		case n > 0:
			s.metrics.tracesPruned.Add(float64(n))
			s.log.InfoContext(ctx, "memory: old traces pruned", "traces", n)
		}
		if !retry.Sleep(ctx, PruneInterval) {
			return nil
		}
	}
}

// updatePatternSettings applies the pattern switches of an
// UpdateMemorySettings request to set: the tenant's, and the
// conversation's in a list bounded like capture's.
func updatePatternSettings(set *store.Settings, req *baagentv1.UpdateMemorySettingsRequest) error {
	if req.PatternsEnabled != nil {
		set.PatternsEnabled = req.GetPatternsEnabled()
	}
	if req.ConversationPatterns == nil {
		return nil
	}
	conv := req.GetConversationId()
	i := slices.Index(set.PatternsDisabledConversations, conv)
	switch {
	case req.GetConversationPatterns() && i >= 0:
		set.PatternsDisabledConversations = slices.Delete(set.PatternsDisabledConversations, i, i+1)
	case !req.GetConversationPatterns() && i < 0:
		if len(set.PatternsDisabledConversations) >= MaxDisabledConversations {
			return status.Errorf(codes.ResourceExhausted,
				"patterns are already off for %d conversations, the most a tenant may list; turn patterns_enabled off or enable some again", MaxDisabledConversations)
		}
		set.PatternsDisabledConversations = append(set.PatternsDisabledConversations, conv)
	}
	return nil
}
