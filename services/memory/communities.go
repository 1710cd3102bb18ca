package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/memory/community"
	"github.com/baagent/baagent/services/memory/store"
)

// Bounds of one community pass over one tenant.
const (
	// maxCommunityEdges bounds the edges read for one tenant's detection
	// (about 25 MB); a larger graph is cut where the walk reaches the bound
	// and the pass logs it.
	maxCommunityEdges = 200_000
	// maxSummaryFacts bounds the facts given to one summary.
	maxSummaryFacts = 40
	// maxSummaryMembers bounds the members given to one summary.
	maxSummaryMembers = 40
)

// runCommunities recomputes, every CommunityInterval, the communities of
// the tenants whose graph changed since the previous pass (less a minute).
// The first pass covers every tenant with a graph. Replicas do not coordinate: two
// replicas may recompute one tenant in the same interval, and the later
// write wins, which is harmless (detection is deterministic for one graph;
// summaries are rewritten only for changed communities).
func (s *Server) runCommunities(ctx context.Context) error {
	var since time.Time
	t := time.NewTimer(0) // first pass at start
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		passStart := s.now()
		tenants, err := s.store.TenantsChangedSince(ctx, since)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.ErrorContext(ctx, "listing changed tenants", "err", err)
			t.Reset(s.opts.CommunityInterval)
			continue
		}
		failed := false
		for _, tenant := range tenants {
			if ctx.Err() != nil {
				return nil
			}
			if err := s.updateCommunities(ctx, tenant); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				failed = true
				s.metrics.communityPasses.WithLabelValues("error").Inc()
				s.log.ErrorContext(ctx, "updating communities", "tenant", tenant, "err", err)
				continue
			}
			s.metrics.communityPasses.WithLabelValues("ok").Inc()
		}
		if !failed {
			// A tenant that failed is retried next pass (since stays). The
			// minute of overlap covers clock skew between this replica and
			// the database; recomputing an unchanged tenant writes nothing.
			since = passStart.Add(-time.Minute)
		}
		t.Reset(s.opts.CommunityInterval)
	}
}

// updateCommunities detects one tenant's communities, keeps the id, name
// and summary of each whose members did not change, replaces them all, and
// has the model summarise the new or changed ones within the tenant's
// token budget; those over budget keep no summary until a later pass.
func (s *Server) updateCommunities(ctx context.Context, tenant string) error {
	start := time.Now()
	var edges []community.Edge
	err := s.store.Edges(ctx, tenant, func(r *store.Relation) error {
		if len(edges) >= maxCommunityEdges {
			return errTooManyEdges
		}
		edges = append(edges, community.Edge{Source: r.SourceID, Target: r.TargetID, Weight: r.Weight})
		return nil
	})
	truncated := false
	switch {
	case errors.Is(err, errTooManyEdges):
		truncated = true
	case err != nil:
		return fmt.Errorf("reading edges: %w", err)
	}
	groups := community.Detect(edges, community.DefaultResolution)
	edges = nil

	// The previous communities, by their member sets.
	prev, err := s.store.GetCommunities(ctx, tenant, nil)
	if err != nil {
		return fmt.Errorf("reading communities: %w", err)
	}
	prevByKey := make(map[string]*store.Community, len(prev))
	for _, c := range prev {
		prevByKey[memberKey(c.MemberIDs)] = c
	}
	now := s.now().UTC()
	cs := make([]*store.Community, 0, len(groups))
	var toSummarise []*store.Community
	for _, g := range groups {
		c := &store.Community{Tenant: tenant, MemberIDs: g, MemberCount: len(g), UpdatedAt: now}
		if prev := prevByKey[memberKey(g)]; prev != nil && prev.Summary != "" {
			c.ID, c.Name, c.Summary = prev.ID, prev.Name, prev.Summary
			s.metrics.summaries.WithLabelValues("kept").Inc()
		} else {
			if prev != nil {
				c.ID = prev.ID
			} else {
				c.ID = newID(communityPrefix, now)
			}
			toSummarise = append(toSummarise, c)
		}
		cs = append(cs, c)
	}
	if len(toSummarise) == 0 && len(cs) == len(prev) {
		// Nothing changed: the communities and their summaries stand.
		s.log.DebugContext(ctx, "communities unchanged", "tenant", tenant, "communities", len(cs))
		return nil
	}
	if err := s.store.ReplaceCommunities(ctx, tenant, cs); err != nil {
		return fmt.Errorf("replacing communities: %w", err)
	}
	written, spent := 0, 0
	if s.opts.Summarizer != nil && len(toSummarise) > 0 {
		written, spent, err = s.summarise(ctx, tenant, toSummarise)
		if err != nil {
			return err
		}
	}
	s.log.InfoContext(ctx, "communities updated", "tenant", tenant, "truncated", truncated,
		"communities", len(cs), "summarised", written, "summary_tokens", spent, "duration", time.Since(start))
	return nil
}

var errTooManyEdges = fmt.Errorf("more than %d edges", maxCommunityEdges)

// memberKey identifies a member set.
func memberKey(ids []string) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return strings.Join(s, ",")
}

// members reads the entities of cs, at most maxSummaryMembers of each.
func (s *Server) members(ctx context.Context, tenant string, cs []*store.Community) (map[string]*store.Entity, error) {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.MemberIDs[:min(len(c.MemberIDs), maxSummaryMembers)]...)
	}
	members := make(map[string]*store.Entity, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		ents, err := s.store.GetEntities(ctx, tenant, chunk)
		if err != nil {
			return nil, fmt.Errorf("reading members: %w", err)
		}
		for _, e := range ents {
			members[e.ID] = e
		}
	}
	return members, nil
}

// summarise writes the summaries of cs, largest community first, while
// the tenant's hourly token budget allows: each summary reserves its
// estimated cost first and settles with what it cost. It returns how many
// it wrote and the tokens they cost.
func (s *Server) summarise(ctx context.Context, tenant string, cs []*store.Community) (int, int, error) {
	slices.SortStableFunc(cs, func(a, b *store.Community) int { return len(b.MemberIDs) - len(a.MemberIDs) })
	members, err := s.members(ctx, tenant, cs)
	if err != nil {
		return 0, 0, err
	}
	// The facts among each community's members, from a second walk.
	in := make(map[string]string) // entity → community
	for _, c := range cs {
		for _, id := range c.MemberIDs {
			in[id] = c.ID
		}
	}
	facts := make(map[string][]string)
	err = s.store.Edges(ctx, tenant, func(r *store.Relation) error {
		if c := in[r.SourceID]; c != "" && c == in[r.TargetID] && r.Fact != "" && len(facts[c]) < maxSummaryFacts {
			facts[c] = append(facts[c], r.Fact)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("reading facts: %w", err)
	}
	written, spent := 0, 0
	for i, c := range cs {
		var ms []community.Member
		for _, id := range c.MemberIDs {
			if e := members[id]; e != nil && len(ms) < maxSummaryMembers {
				ms = append(ms, community.Member{Name: e.Name, Type: e.Type, Summary: e.Summary})
			}
		}
		estimate := estimateSummaryTokens(ms, facts[c.ID])
		if !s.budget.Reserve(tenant, estimate) {
			s.metrics.summaries.WithLabelValues("over_budget").Add(float64(len(cs) - i))
			s.log.InfoContext(ctx, "community summaries over budget", "tenant", tenant, "left", len(cs)-i,
				"tokens_per_hour", s.budget.Limit())
			break
		}
		sum, err := s.summariseOne(ctx, ms, facts[c.ID])
		s.budget.Settle(tenant, estimate, max(sum.Tokens, 0))
		spent += max(sum.Tokens, 0)
		s.metrics.summaryTokens.Add(float64(max(sum.Tokens, 0)))
		if err != nil {
			if ctx.Err() != nil {
				return written, spent, ctx.Err()
			}
			s.metrics.summaries.WithLabelValues("error").Inc()
			s.log.WarnContext(ctx, "summarising a community", "tenant", tenant, "community", c.ID, "err", err)
			continue
		}
		if err := s.store.SetCommunitySummary(ctx, tenant, c.ID, sum.Name, sum.Summary); err != nil {
			s.metrics.summaries.WithLabelValues("error").Inc()
			s.log.WarnContext(ctx, "writing a community summary", "tenant", tenant, "community", c.ID, "err", err)
			continue
		}
		s.metrics.summaries.WithLabelValues("written").Inc()
		written++
	}
	return written, spent, nil
}

// estimateSummaryTokens guesses a summary's cost before asking: a token
// per four bytes of what the prompt lists, the instructions, and the
// answer.
func estimateSummaryTokens(ms []community.Member, facts []string) int {
	n := 0
	for _, m := range ms {
		n += len(m.Name) + len(m.Type) + len(m.Summary) + 8
	}
	for _, f := range facts {
		n += len(f) + 3
	}
	const instructions, answer = 300, 200
	return n/4 + instructions + answer
}

// summaryBackoff spaces the attempts of one summary.
var summaryBackoff = retry.Backoff{Initial: 500 * time.Millisecond, Max: 5 * time.Second}

func (s *Server) summariseOne(ctx context.Context, ms []community.Member, facts []string) (community.Summary, error) {
	var total community.Summary
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 && !retry.Sleep(ctx, summaryBackoff.Delay(attempt-1)) {
			break
		}
		var sum community.Summary
		sctx, cancel := context.WithTimeout(ctx, s.opts.ExtractTimeout)
		sum, err = s.opts.Summarizer.Summarize(sctx, ms, facts)
		cancel()
		total.Tokens += sum.Tokens
		if err == nil {
			sum.Tokens = total.Tokens
			return sum, nil
		}
		if !retryable(err) {
			break
		}
	}
	return total, err
}
