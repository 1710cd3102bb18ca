package memory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/scrub"
	"github.com/baagent/baagent/services/memory/store"
)

// Retrieval and retention of interaction patterns.
const (
	// MaxPatternCandidates bounds the patterns one MatchPatterns scores.
	MaxPatternCandidates = 2000
	// SuppressFor is how long a pattern marked useless keeps its
	// signature from being learned again.
	SuppressFor = 180 * 24 * time.Hour
	// TraceRetention is how long recorded traces are kept; PruneInterval
	// how often older ones are deleted.
	TraceRetention = 30 * 24 * time.Hour
	PruneInterval  = time.Hour
	// touchEvery is how stale a candidate's stored LastQueriedAt must be
	// for MatchPatterns to write it again: the admission gate's window is
	// patterns.QueryWindow (7 days), so an hour's precision changes no
	// state, and popular patterns are not rewritten on every request.
	touchEvery = time.Hour
	// listScanBudget bounds the stored patterns one ListPatterns with a
	// state filter reads; the page may be short (with a next token) when
	// the state is rare.
	listScanBudget = 5000
)

// patternsOn reports whether patterns are learned and offered for runs of
// conversation (the tenant's, when empty) under set.
func patternsOn(set store.Settings, conversation string) bool {
	if !set.PatternsEnabled {
		return false
	}
	return conversation == "" || !slices.Contains(set.PatternsDisabledConversations, conversation)
}

// goalEntities resolves the entities a goal names in the tenant's graph
// (the phrase lookup of hybrid search): their lower-cased names and their
// types, each sorted and unique.
func (s *Server) goalEntities(ctx context.Context, tenant, goal string) (names, types []string, err error) {
	ids, err := s.namedEntities(ctx, tenant, goal)
	if err != nil || len(ids) == 0 {
		return nil, nil, err
	}
	ents, err := s.store.GetEntities(ctx, tenant, ids)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		if n := strings.ToLower(strings.TrimSpace(e.Name)); n != "" {
			names = append(names, n)
		}
		if t := strings.ToLower(strings.TrimSpace(e.Type)); t != "" {
			types = append(types, t)
		}
	}
	slices.Sort(names)
	slices.Sort(types)
	return slices.Compact(names), slices.Compact(types), nil
}

// MatchPatterns retrieves at most patterns.MaxCandidates active patterns
// for a request: the tenant's own and those granted to it, scored by the
// rules (patterns.Rank). The candidates that could be offered (score at
// least ReferenceFrom) count as queried now, which the admission gate
// reads: the tenant's own are written so (when their stored time is older
// than touchEvery), granted ones are only evaluated so (the owner's rows
// are not written by another tenant's queries).
func (s *Server) MatchPatterns(ctx context.Context, req *baagentv1.MatchPatternsRequest) (*baagentv1.MatchPatternsResponse, error) {
	if err := validateMatchPatterns(req); err != nil {
		return nil, err
	}
	began := time.Now()
	defer func() { s.metrics.patternMatchDuration.Observe(time.Since(began).Seconds()) }()
	tenant := req.GetTenant()
	set, err := s.store.GetSettings(ctx, tenant)
	if err != nil {
		return nil, s.storeError(ctx, "MatchPatterns", "settings", err)
	}
	if !patternsOn(set, req.GetConversationId()) {
		return &baagentv1.MatchPatternsResponse{Enabled: false}, nil
	}
	goal := req.GetGoal()
	taskType := patterns.ClassifyTask(goal)
	names, types, err := s.goalEntities(ctx, tenant, goal)
	if err != nil {
		return nil, s.storeError(ctx, "MatchPatterns", "entities", err)
	}
	resp := &baagentv1.MatchPatternsResponse{Enabled: true, TaskType: taskType, EntityTypes: types, Entities: names}
	cands, indexed, err := s.patternIndex.candidates(ctx, tenant, taskType, names, MaxPatternCandidates)
	if err == nil && !indexed {
		cands, err = s.store.PatternCandidates(ctx, tenant, taskType, names, MaxPatternCandidates)
	}
	if err != nil {
		return nil, s.storeError(ctx, "MatchPatterns", "patterns", err)
	}
	now := s.now().UTC()
	q := patterns.Query{Signature: patterns.Signature{TaskType: taskType, EntityTypes: types}, Entities: names}
	ps := make([]*patterns.Pattern, 0, len(cands))
	var touch []string
	for _, c := range cands {
		p := &c.Pattern
		ps = append(ps, p)
		if p.Tenant != tenant {
			p.LastQueriedAt = now
			continue
		}
		// A query within touchEvery of the stored one changes no gate
		// (the window is days): such rows are neither scored here nor
		// written again.
		stale := p.LastQueriedAt.IsZero() || now.Sub(p.LastQueriedAt) >= touchEvery
		if stale && patterns.Score(q, p, now).Score >= patterns.ReferenceFrom {
			touch = append(touch, p.ID)
			p.LastQueriedAt = now
		}
	}
	if len(touch) > 0 {
		if err := s.store.TouchPatterns(ctx, tenant, touch, now); err != nil {
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			// Retrieval still answers; the admission gate sees this
			// query on the next one.
			s.log.WarnContext(ctx, "memory: patterns not marked as queried", "tenant", tenant, "patterns", len(touch), "err", err)
		} else if indexed {
			s.patternIndex.touched(tenant, touch, now)
		}
	}
	ranked, full, err := s.rankAndRead(ctx, tenant, q, ps, now, indexed)
	if err != nil {
		return nil, s.storeError(ctx, "MatchPatterns", "patterns", err)
	}
	for _, c := range ranked {
		r, ok := full[c.Pattern.ID]
		if !ok {
			continue // deleted meanwhile
		}
		// The times the gates read are those of this query.
		r.LastQueriedAt = c.Pattern.LastQueriedAt
		mode := c.Mode.String()
		s.metrics.patternCandidates.WithLabelValues(mode).Inc()
		resp.Candidates = append(resp.Candidates, &baagentv1.PatternCandidate{
			Pattern: patternProto(r, tenant, now),
			Score:   breakdownProto(c.Breakdown),
			Mode:    mode,
		})
	}
	return resp, nil
}

// maxRerank bounds how many times MatchPatterns ranks again after
// winners turned out deleted or no longer granted.
const maxRerank = 3

// rankAndRead ranks ps and reads the winners whole. From the index, a
// winner the store no longer shows the tenant (deleted, grant revoked
// since the index's last whole read) is dropped from the index and from
// ps, and the rest ranked again, so that as many candidates as there are
// are still returned.
func (s *Server) rankAndRead(ctx context.Context, tenant string, q patterns.Query, ps []*patterns.Pattern, now time.Time, indexed bool) ([]patterns.Candidate, map[string]*store.PatternRecord, error) {
	for round := 0; ; round++ {
		ranked := patterns.Rank(q, ps, now)
		if len(ranked) == 0 {
			return nil, nil, nil
		}
		ids := make([]string, len(ranked))
		for i, c := range ranked {
			ids[i] = c.Pattern.ID
		}
		full, err := s.store.GetPatterns(ctx, tenant, ids)
		if err != nil {
			return nil, nil, err
		}
		byID := make(map[string]*store.PatternRecord, len(full))
		for _, r := range full {
			byID[r.ID] = r
		}
		if !indexed || len(full) == len(ranked) || round == maxRerank-1 {
			return ranked, byID, nil
		}
		var gone []headKey
		drop := make(map[*patterns.Pattern]bool)
		for _, c := range ranked {
			if _, ok := byID[c.Pattern.ID]; !ok {
				gone = append(gone, headKey{c.Pattern.Tenant, c.Pattern.ID})
				drop[c.Pattern] = true
			}
		}
		s.patternIndex.forget(tenant, gone)
		ps = slices.DeleteFunc(ps, func(p *patterns.Pattern) bool { return drop[p] })
	}
}

// ListPatterns lists the tenant's patterns (and those granted to it, with
// include_shared), most recently updated first. With a state filter, the
// state is derived now for each pattern read; a page may then be shorter
// than page_size while a next token says more may follow.
func (s *Server) ListPatterns(ctx context.Context, req *baagentv1.ListPatternsRequest) (*baagentv1.ListPatternsResponse, error) {
	if err := validateListPatterns(req); err != nil {
		return nil, err
	}
	tenant := req.GetTenant()
	size := int(req.GetPageSize())
	if size == 0 {
		size = DefaultPageSize
	}
	filter := store.PatternFilter{TaskType: req.GetTaskType(), IncludeShared: req.GetIncludeShared()}
	want := req.GetState()
	now := s.now().UTC()
	resp := &baagentv1.ListPatternsResponse{}
	token := req.GetPageToken()
	scanned := 0
	for {
		need := size - len(resp.Patterns)
		rs, next, err := s.store.ListPatterns(ctx, tenant, filter, store.Page{Size: need, Token: token})
		if err != nil && scanned == 0 {
			return nil, s.pageError(ctx, "ListPatterns", token, err, func() error {
				_, _, err := s.store.ListPatterns(ctx, tenant, filter, store.Page{Size: 1})
				return err
			})
		}
		if err != nil {
			return nil, s.storeError(ctx, "ListPatterns", "patterns", err)
		}
		scanned += len(rs)
		for _, r := range rs {
			p := patternProto(r, tenant, now)
			if want != baagentv1.PatternState_PATTERN_STATE_UNSPECIFIED && p.GetState() != want {
				continue
			}
			resp.Patterns = append(resp.Patterns, p)
		}
		token = next
		if token == "" || len(resp.Patterns) >= size || scanned >= listScanBudget || len(rs) == 0 {
			break
		}
	}
	resp.NextPageToken = token
	return resp, nil
}

// GetPattern reads a pattern the tenant owns or was granted.
func (s *Server) GetPattern(ctx context.Context, req *baagentv1.GetPatternRequest) (*baagentv1.GetPatternResponse, error) {
	if err := validateTenantAndID(req.GetTenant(), "id", req.GetId(), patternPrefix); err != nil {
		return nil, err
	}
	r, err := s.store.GetPattern(ctx, req.GetTenant(), req.GetId())
	if err != nil {
		return nil, s.storeError(ctx, "GetPattern", "pattern", err)
	}
	return &baagentv1.GetPatternResponse{Pattern: patternProto(r, req.GetTenant(), s.now().UTC())}, nil
}

// ownPatternError is the status of a write to a pattern the store did not
// find among the tenant's own: PermissionDenied when the tenant was
// granted it (it may read it, so its existence is no secret; grants are
// read-only), NotFound otherwise, for unknown ids and other tenants'
// alike.
func (s *Server) ownPatternError(ctx context.Context, op, tenant, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		if r, gerr := s.store.GetPattern(ctx, tenant, id); gerr == nil && r.Tenant != tenant {
			return status.Errorf(codes.PermissionDenied, "pattern %s is shared with this tenant read-only; only its owner may change it", id)
		}
	}
	return s.storeError(ctx, op, "pattern", err)
}

// UpdatePattern edits one of the tenant's own patterns.
func (s *Server) UpdatePattern(ctx context.Context, req *baagentv1.UpdatePatternRequest) (*baagentv1.UpdatePatternResponse, error) {
	if err := validateUpdatePattern(req); err != nil {
		return nil, err
	}
	tenant, id := req.GetTenant(), req.GetId()
	edit := req.GetEdit()
	scrubEdit(edit)
	now := s.now().UTC()
	r, err := s.store.UpdatePattern(ctx, tenant, id, req.GetExpectedVersion(), func(p *patterns.Pattern) error {
		applyEdit(p, edit, now)
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, status.Errorf(codes.FailedPrecondition, "pattern %s changed since version %d; read it again and retry", id, req.GetExpectedVersion())
	}
	if err != nil {
		return nil, s.ownPatternError(ctx, "UpdatePattern", tenant, id, err)
	}
	s.log.InfoContext(ctx, "pattern edited", "tenant", tenant, "pattern", id, "version", r.Version)
	return &baagentv1.UpdatePatternResponse{Pattern: patternProto(r, tenant, now)}, nil
}

// DeletePattern removes one of the tenant's own patterns and its grants.
func (s *Server) DeletePattern(ctx context.Context, req *baagentv1.DeletePatternRequest) (*baagentv1.DeletePatternResponse, error) {
	if err := validateTenantAndID(req.GetTenant(), "id", req.GetId(), patternPrefix); err != nil {
		return nil, err
	}
	if err := s.store.DeletePattern(ctx, req.GetTenant(), req.GetId()); err != nil {
		return nil, s.ownPatternError(ctx, "DeletePattern", req.GetTenant(), req.GetId(), err)
	}
	s.log.InfoContext(ctx, "pattern deleted", "tenant", req.GetTenant(), "pattern", req.GetId())
	return &baagentv1.DeletePatternResponse{}, nil
}

// MarkPatternUseless suppresses the signature of one of the tenant's own
// patterns for SuppressFor, then deletes the pattern. A failure between
// the two leaves the signature suppressed and the pattern in place; the
// call can be repeated.
func (s *Server) MarkPatternUseless(ctx context.Context, req *baagentv1.MarkPatternUselessRequest) (*baagentv1.MarkPatternUselessResponse, error) {
	if err := validateMarkPatternUseless(req); err != nil {
		return nil, err
	}
	tenant, id := req.GetTenant(), req.GetId()
	r, err := s.store.GetPattern(ctx, tenant, id)
	if err != nil {
		return nil, s.storeError(ctx, "MarkPatternUseless", "pattern", err)
	}
	if r.Tenant != tenant {
		return nil, status.Errorf(codes.PermissionDenied, "pattern %s is shared with this tenant read-only; only its owner may change it", id)
	}
	now := s.now().UTC()
	if err := s.store.SuppressSignature(ctx, tenant, r.Signature, now.Add(SuppressFor)); err != nil {
		return nil, s.storeError(ctx, "MarkPatternUseless", "pattern", err)
	}
	if err := s.store.DeletePattern(ctx, tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, s.storeError(ctx, "MarkPatternUseless", "pattern", err)
	}
	reason, _ := scrub.Scrub(req.GetReason())
	s.log.InfoContext(ctx, "pattern marked useless", "tenant", tenant, "pattern", id,
		"task_type", r.Signature.TaskType, "entity_types", r.Signature.EntityTypes,
		"suppressed_until", now.Add(SuppressFor), "reason", reason)
	return &baagentv1.MarkPatternUselessResponse{}, nil
}

// GrantPattern shares one of the tenant's own patterns with another
// tenant, read-only.
func (s *Server) GrantPattern(ctx context.Context, req *baagentv1.GrantPatternRequest) (*baagentv1.GrantPatternResponse, error) {
	if err := validateGrant(req.GetTenant(), req.GetId(), req.GetGranteeTenant()); err != nil {
		return nil, err
	}
	g, err := s.store.GrantPattern(ctx, store.PatternGrant{
		Owner: req.GetTenant(), PatternID: req.GetId(), Grantee: req.GetGranteeTenant(), CreatedAt: s.now().UTC(),
	})
	if err != nil {
		return nil, s.ownPatternError(ctx, "GrantPattern", req.GetTenant(), req.GetId(), err)
	}
	s.log.InfoContext(ctx, "pattern granted", "tenant", req.GetTenant(), "pattern", req.GetId(), "grantee", req.GetGranteeTenant())
	return &baagentv1.GrantPatternResponse{Grant: grantProto(g)}, nil
}

// RevokePatternGrant stops sharing a pattern with a tenant.
func (s *Server) RevokePatternGrant(ctx context.Context, req *baagentv1.RevokePatternGrantRequest) (*baagentv1.RevokePatternGrantResponse, error) {
	if err := validateGrant(req.GetTenant(), req.GetId(), req.GetGranteeTenant()); err != nil {
		return nil, err
	}
	if err := s.store.RevokePatternGrant(ctx, req.GetTenant(), req.GetId(), req.GetGranteeTenant()); err != nil {
		return nil, s.storeError(ctx, "RevokePatternGrant", "grant", err)
	}
	s.log.InfoContext(ctx, "pattern grant revoked", "tenant", req.GetTenant(), "pattern", req.GetId(), "grantee", req.GetGranteeTenant())
	return &baagentv1.RevokePatternGrantResponse{}, nil
}

// ListPatternGrants lists the grants the tenant made, newest first.
func (s *Server) ListPatternGrants(ctx context.Context, req *baagentv1.ListPatternGrantsRequest) (*baagentv1.ListPatternGrantsResponse, error) {
	if err := validateListPatternGrants(req); err != nil {
		return nil, err
	}
	gs, err := s.store.ListPatternGrants(ctx, req.GetTenant(), req.GetId(), MaxPatternGrants)
	if err != nil {
		return nil, s.storeError(ctx, "ListPatternGrants", "grants", err)
	}
	resp := &baagentv1.ListPatternGrantsResponse{Grants: make([]*baagentv1.PatternGrant, 0, len(gs))}
	for _, g := range gs {
		resp.Grants = append(resp.Grants, grantProto(g))
	}
	return resp, nil
}
