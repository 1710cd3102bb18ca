package memory

import (
	"context"
	"errors"
	"slices"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/memory/scrub"
	"github.com/baagent/baagent/services/memory/store"
)

// waitPoll is how often a wait=true call re-reads its episode when no
// notification from this replica comes: the episode may be processed by
// another replica.
var waitPoll = retry.Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Multiplier: 2}

// AddEpisode stores an episode, scrubbed of personal data and secrets, and
// wakes a worker. RUN episodes of a tenant or conversation whose capture is
// off are skipped; USER and AGENT episodes are always stored.
func (s *Server) AddEpisode(ctx context.Context, req *baagentv1.AddEpisodeRequest) (*baagentv1.AddEpisodeResponse, error) {
	if err := validateAddEpisode(req); err != nil {
		return nil, err
	}
	tenant := req.GetTenant()
	source := store.EpisodeSource(req.GetSource())
	if source == 0 {
		source = store.SourceUser
	}
	if source == store.SourceRun {
		set, err := s.store.GetSettings(ctx, tenant)
		if err != nil {
			return nil, s.storeError(ctx, "AddEpisode", "settings", err)
		}
		if !captured(set, req.GetConversationId()) {
			s.metrics.episodes.WithLabelValues(outcomeSkipped).Inc()
			return &baagentv1.AddEpisodeResponse{Skipped: true}, nil
		}
	}
	content, redactions := scrub.Scrub(req.GetContent())
	now := s.now().UTC()
	ep, created, err := s.store.CreateEpisode(ctx, &store.Episode{
		ID:             newID(episodePrefix, now),
		Tenant:         tenant,
		Source:         source,
		Content:        content,
		ConversationID: req.GetConversationId(),
		RunID:          req.GetRunId(),
		IdempotencyKey: req.GetIdempotencyKey(),
		CreatedAt:      now,
		Status:         store.StatusPending,
		Redactions:     redactions,
	})
	if err != nil {
		return nil, s.storeError(ctx, "AddEpisode", "episode", err)
	}
	if created {
		s.metrics.episodes.WithLabelValues(outcomeStored).Inc()
		s.log.DebugContext(ctx, "episode stored", "tenant", tenant, "episode", ep.ID, "source", source, "bytes", len(content), "redactions", redactions)
		s.signalWork()
	} else {
		s.metrics.episodes.WithLabelValues(outcomeDuplicate).Inc()
	}
	if req.GetWait() && !finished(ep.Status) {
		ep = s.waitEpisode(ctx, ep)
	}
	return &baagentv1.AddEpisodeResponse{Episode: episodeProto(ep)}, nil
}

// captured reports whether runs of conversation (the tenant's, when
// empty) become episodes under set.
func captured(set store.Settings, conversation string) bool {
	if !set.CaptureRuns {
		return false
	}
	return conversation == "" || !slices.Contains(set.CaptureDisabledConversations, conversation)
}

func finished(st store.EpisodeStatus) bool {
	return st == store.StatusSynced || st == store.StatusFailed
}

// waitEpisode waits until ep is synced or failed, or until shortly before
// the call's deadline (MaxWait without one), and returns its last state:
// a wait cut short answers with the pending episode rather than an error.
func (s *Server) waitEpisode(ctx context.Context, ep *store.Episode) *store.Episode {
	limit := s.opts.MaxWait
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		// Leave time for the answer to reach the client before its
		// deadline.
		limit = left - min(left/10, time.Second)
	}
	if limit <= 0 {
		return ep
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done, release, _ := s.waiters.add(ep.ID)
	defer release()
	last := ep
	for n := 0; ; n++ {
		cur, err := s.store.GetEpisode(wctx, ep.Tenant, ep.ID)
		switch {
		case err == nil:
			last = cur
			if finished(cur.Status) {
				return cur
			}
		case errors.Is(err, store.ErrNotFound):
			// Deleted while we waited: answer with what was stored.
			return last
		case wctx.Err() == nil:
			s.log.WarnContext(ctx, "reading a waited-for episode", "tenant", ep.Tenant, "episode", ep.ID, "err", err)
		}
		t := time.NewTimer(waitPoll.Delay(n))
		select {
		case <-done:
			done = nil // closed: re-read once, then poll
		case <-t.C:
		case <-wctx.Done():
			t.Stop()
			return last
		}
		t.Stop()
	}
}

// GetEpisode reads one episode and the entities it mentions.
func (s *Server) GetEpisode(ctx context.Context, req *baagentv1.GetEpisodeRequest) (*baagentv1.GetEpisodeResponse, error) {
	if err := validateTenantAndID(req.GetTenant(), "id", req.GetId(), episodePrefix); err != nil {
		return nil, err
	}
	ep, err := s.store.GetEpisode(ctx, req.GetTenant(), req.GetId())
	if err != nil {
		return nil, s.storeError(ctx, "GetEpisode", "episode", err)
	}
	resp := &baagentv1.GetEpisodeResponse{Episode: episodeProto(ep)}
	if len(ep.EntityIDs) > 0 {
		ents, err := s.store.GetEntities(ctx, req.GetTenant(), ep.EntityIDs)
		if err != nil {
			return nil, s.storeError(ctx, "GetEpisode", "entities", err)
		}
		for _, e := range ents {
			resp.Entities = append(resp.Entities, entityProto(e))
		}
	}
	return resp, nil
}

// ListEpisodes lists a tenant's episodes, newest first.
func (s *Server) ListEpisodes(ctx context.Context, req *baagentv1.ListEpisodesRequest) (*baagentv1.ListEpisodesResponse, error) {
	if err := validateListEpisodes(req); err != nil {
		return nil, err
	}
	eps, next, err := s.store.ListEpisodes(ctx, req.GetTenant(),
		store.EpisodeFilter{ConversationID: req.GetConversationId(), Status: store.EpisodeStatus(req.GetStatus())},
		store.Page{Size: pageSize(req.GetPageSize()), Token: req.GetPageToken()})
	if err != nil {
		return nil, s.pageError(ctx, "ListEpisodes", req.GetPageToken(), err, func() error {
			_, _, err := s.store.ListEpisodes(ctx, req.GetTenant(), store.EpisodeFilter{}, store.Page{Size: 1})
			return err
		})
	}
	resp := &baagentv1.ListEpisodesResponse{NextPageToken: next}
	for _, ep := range eps {
		resp.Episodes = append(resp.Episodes, episodeProto(ep))
	}
	return resp, nil
}

// DeleteEpisode removes an episode and what only it supported.
func (s *Server) DeleteEpisode(ctx context.Context, req *baagentv1.DeleteEpisodeRequest) (*baagentv1.DeleteEpisodeResponse, error) {
	if err := validateTenantAndID(req.GetTenant(), "id", req.GetId(), episodePrefix); err != nil {
		return nil, err
	}
	out, err := s.store.DeleteEpisode(ctx, req.GetTenant(), req.GetId())
	if err != nil {
		return nil, s.storeError(ctx, "DeleteEpisode", "episode", err)
	}
	s.waiters.notify(req.GetId())
	s.log.InfoContext(ctx, "episode deleted", "tenant", req.GetTenant(), "episode", req.GetId(),
		"entities_removed", out.Entities, "relations_removed", out.Relations)
	return &baagentv1.DeleteEpisodeResponse{EntitiesRemoved: clamp32(out.Entities), RelationsRemoved: clamp32(out.Relations)}, nil
}

// DeleteConversationMemory removes a conversation's episodes.
func (s *Server) DeleteConversationMemory(ctx context.Context, req *baagentv1.DeleteConversationMemoryRequest) (*baagentv1.DeleteConversationMemoryResponse, error) {
	if err := validateDeleteConversation(req); err != nil {
		return nil, err
	}
	out, err := s.store.DeleteConversation(ctx, req.GetTenant(), req.GetConversationId())
	if err != nil {
		return nil, s.storeError(ctx, "DeleteConversationMemory", "conversation", err)
	}
	s.log.InfoContext(ctx, "conversation memory deleted", "tenant", req.GetTenant(), "conversation", req.GetConversationId(),
		"episodes_removed", out.Episodes, "entities_removed", out.Entities, "traces_removed", out.Traces)
	return &baagentv1.DeleteConversationMemoryResponse{EpisodesRemoved: clamp32(out.Episodes), EntitiesRemoved: clamp32(out.Entities)}, nil
}

func pageSize(n int32) int {
	if n == 0 {
		return DefaultPageSize
	}
	return int(n)
}

// pageError maps a listing's error. The stores refuse a page token they
// did not write with an error of their own; a listing that fails with the
// token and succeeds without it had a bad token, which is the client's
// mistake.
func (s *Server) pageError(ctx context.Context, op, token string, err error, again func() error) error {
	if token != "" && ctx.Err() == nil && again() == nil {
		var e validate.Errors
		e.Add("page_token", "not a token from a previous response")
		return e.Err()
	}
	return s.storeError(ctx, op, "page", err)
}
