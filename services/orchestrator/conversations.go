package orchestrator

import (
	"context"
	"errors"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/orchestrator/internal/convindex"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
	"github.com/baagent/baagent/services/orchestrator/internal/skillstack"
)

// The conversation API (docs/concepts/conversations.md). The index of a
// tenant's conversations is kept in natsx.BucketConversations by
// convindex: StartRun reserves the conversation's entry (refusing an ended
// or deleting one) before it stores the run, and a top-level run that ends
// moves the entry's last activity. Conversations whose runs predate the
// index are backfilled from the run records, once per tenant.

const (
	// MaxHistoryPageSize is the largest GetConversationMessages page (the
	// context service's maximum).
	MaxHistoryPageSize = 1000
	// finishWait bounds how long End and Delete wait for the final record
	// of a run whose terminal event is stored already.
	finishWait = 5 * time.Second
	// backfillCacheSize bounds the tenants remembered as backfilled.
	backfillCacheSize = 4096
)

// Outcomes of the conversation RPCs, the label of conversation_ops_total.
const (
	convOK      = "ok"
	convRefused = "refused" // invalid, unknown, or a run is active
	convFailed  = "error"
)

// convIndex returns the conversation index, opening its bucket on first
// use.
func (s *Server) convIndex(ctx context.Context) (*convindex.Store, error) {
	if s.configErr != nil {
		return nil, status.Errorf(codes.Unavailable, "orchestrator is not configured: %v", s.configErr)
	}
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.convs == nil {
		idx, err := convindex.Open(ctx, s.opts.JetStream)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "conversation index unavailable: %v", err)
		}
		s.convs = idx
	}
	return s.convs, nil
}

// convStatus maps an index error to a status.
func convStatus(err error, conversationID string) error {
	switch {
	case errors.Is(err, convindex.ErrNotFound):
		return status.Errorf(codes.NotFound, "conversation %s not found", conversationID)
	case errors.Is(err, convindex.ErrContention):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Unavailable, "conversation index: %v", err)
}

// toConversation is an entry as the API returns it.
func toConversation(e *convindex.Entry) *baagentv1.Conversation {
	c := &baagentv1.Conversation{
		ConversationId: e.ConversationID,
		Title:          e.Title,
		CreatedAt:      timestamppb.New(e.CreatedAt),
		LastActivityAt: timestamppb.New(e.LastActivityAt),
		RunCount:       e.RunCount,
		LastRunId:      e.LastRunID,
	}
	switch e.State {
	case convindex.StateActive:
		c.State = baagentv1.ConversationState_CONVERSATION_STATE_ACTIVE
	case convindex.StateEnded:
		c.State = baagentv1.ConversationState_CONVERSATION_STATE_ENDED
	case convindex.StateDeleting:
		c.State = baagentv1.ConversationState_CONVERSATION_STATE_DELETING
	}
	if !e.EndedAt.IsZero() {
		c.EndedAt = timestamppb.New(e.EndedAt)
	}
	return c
}

// closedError is the refusal of a run into a conversation that is not
// active.
func closedError(e *convindex.Entry) error {
	if e.State == convindex.StateEnded {
		return status.Errorf(codes.FailedPrecondition, "conversation %s has ended; start a new conversation", e.ConversationID)
	}
	return status.Errorf(codes.FailedPrecondition, "conversation %s is being deleted", e.ConversationID)
}

// reserveConversation records a top-level run in its conversation's index
// entry before the run is stored (creating the entry for a new
// conversation), and refuses a run into an ended or deleting one. A
// sub-agent run is only checked. The returned function undoes the
// reservation of a run that was not accepted after all.
func (s *Server) reserveConversation(ctx context.Context, rec *baagentv1.Run) (undo func(), err error) {
	nop := func() {}
	if natsx.ValidateToken("conversation_id", rec.GetConversationId()) != nil {
		// No history can be kept under such an id either; the run fails
		// at its first step, as it did before the index.
		return nop, nil
	}
	idx, err := s.convIndex(ctx)
	if err != nil {
		return nil, err
	}
	if rec.GetParentRunId() != "" {
		e, _, err := idx.Get(ctx, rec.GetTenant(), rec.GetConversationId())
		switch {
		case errors.Is(err, convindex.ErrNotFound):
			return nop, nil
		case err != nil:
			return nil, convStatus(err, rec.GetConversationId())
		case e.State != convindex.StateActive:
			return nil, closedError(e)
		}
		return nop, nil
	}
	now := rec.GetCreatedAt().AsTime()
	var prevLast string
	var created bool
	_, err = idx.Update(ctx, rec.GetTenant(), rec.GetConversationId(), func(cur *convindex.Entry) (*convindex.Entry, error) {
		next := cur
		created = cur == nil
		if cur == nil {
			next = &convindex.Entry{
				ConversationID: rec.GetConversationId(),
				Title:          convindex.Title(rec.GetInput()),
				CreatedAt:      now,
				State:          convindex.StateActive,
			}
		} else if cur.State != convindex.StateActive {
			return nil, closedError(cur)
		}
		prevLast = next.LastRunID
		next.RunCount++
		next.LastRunID = rec.GetRunId()
		next.LastActivityAt = maxTime(next.LastActivityAt, now)
		next.PruneStarting(time.Now())
		next.Starting = append(next.Starting, convindex.Start{RunID: rec.GetRunId(), At: time.Now()})
		return next, nil
	})
	if err != nil {
		return nil, convStatus(err, rec.GetConversationId())
	}
	return func() {
		s.unreserveConversation(context.WithoutCancel(ctx), idx, rec, prevLast, created)
	}, nil
}

// unreserveConversation takes back a reservation whose run was refused.
func (s *Server) unreserveConversation(ctx context.Context, idx *convindex.Store, rec *baagentv1.Run, prevLast string, created bool) {
	ctx, cancel := context.WithTimeout(ctx, finalizeTimeout)
	defer cancel()
	var empty bool
	_, err := idx.Update(ctx, rec.GetTenant(), rec.GetConversationId(), func(cur *convindex.Entry) (*convindex.Entry, error) {
		if cur == nil {
			return nil, nil
		}
		cur.Starting = slices.DeleteFunc(cur.Starting, func(st convindex.Start) bool { return st.RunID == rec.GetRunId() })
		cur.RunCount = max(cur.RunCount-1, 0)
		if cur.LastRunID == rec.GetRunId() {
			cur.LastRunID = prevLast
		}
		empty = created && cur.RunCount == 0 && cur.State == convindex.StateActive
		return cur, nil
	})
	if err == nil && empty {
		err = idx.Remove(ctx, rec.GetTenant(), rec.GetConversationId())
	}
	if err != nil {
		s.log.WarnContext(ctx, "conversation index not corrected after a refused run", "conversation_id", rec.GetConversationId(), "run_id", rec.GetRunId(), "error", err)
		s.metrics.convIndexFailures.Inc()
	}
}

// conversationActivity moves a conversation's last activity to when its
// top-level run rec ended. A missing entry is not recreated (the
// conversation was deleted, or predates the index and is backfilled).
func (s *Server) conversationActivity(ctx context.Context, rec *baagentv1.Run) {
	if rec.GetParentRunId() != "" || natsx.ValidateToken("conversation_id", rec.GetConversationId()) != nil {
		return
	}
	idx, err := s.convIndex(ctx)
	if err == nil {
		at := time.Now()
		if rec.GetFinishedAt() != nil {
			at = rec.GetFinishedAt().AsTime()
		}
		_, err = idx.Update(ctx, rec.GetTenant(), rec.GetConversationId(), func(cur *convindex.Entry) (*convindex.Entry, error) {
			if cur == nil || cur.State == convindex.StateDeleting || !at.After(cur.LastActivityAt) {
				return nil, nil
			}
			cur.LastActivityAt = at
			cur.Starting = slices.DeleteFunc(cur.Starting, func(st convindex.Start) bool { return st.RunID == rec.GetRunId() })
			return cur, nil
		})
	}
	if err != nil {
		s.log.WarnContext(ctx, "conversation index not updated at the end of a run", "conversation_id", rec.GetConversationId(), "run_id", rec.GetRunId(), "error", err)
		s.metrics.convIndexFailures.Inc()
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ensureBackfilled indexes, once per tenant, the conversations whose runs
// were stored before the index existed. It merges what the run records
// say into the entries (earliest creation and title, latest activity and
// run, the larger run count), so that replicas backfilling at once, or a
// backfill racing new runs, agree.
func (s *Server) ensureBackfilled(ctx context.Context, tenant string) error {
	if _, ok := s.backfilled.Get(tenant); ok {
		return nil
	}
	idx, err := s.convIndex(ctx)
	if err != nil {
		return err
	}
	done, err := idx.Backfilled(ctx, tenant)
	if err != nil {
		return convStatus(err, "")
	}
	if done {
		s.backfilled.Put(tenant, struct{}{}, 1, 0)
		return nil
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return err
	}
	type agg struct {
		first, last  *baagentv1.Run
		count        int32
		lastActivity time.Time
	}
	convs := map[string]*agg{}
	err = store.Scan(ctx, tenant, func(r *baagentv1.Run) {
		if r.GetParentRunId() != "" || natsx.ValidateToken("conversation_id", r.GetConversationId()) != nil {
			return
		}
		a := convs[r.GetConversationId()]
		if a == nil {
			a = &agg{first: r, last: r}
			convs[r.GetConversationId()] = a
		}
		a.count++
		if r.GetRunId() < a.first.GetRunId() {
			a.first = r
		}
		if r.GetRunId() > a.last.GetRunId() {
			a.last = r
		}
		a.lastActivity = maxTime(a.lastActivity, r.GetCreatedAt().AsTime())
		if r.GetFinishedAt() != nil {
			a.lastActivity = maxTime(a.lastActivity, r.GetFinishedAt().AsTime())
		}
		// Only what the entry needs is kept of the records.
		a.first, a.last = brief(a.first), brief(a.last)
	}, nil)
	if err != nil {
		return storeStatus(err, "")
	}
	for id, a := range convs {
		created := a.first.GetCreatedAt().AsTime()
		_, err := idx.Update(ctx, tenant, id, func(cur *convindex.Entry) (*convindex.Entry, error) {
			if cur == nil {
				return &convindex.Entry{
					ConversationID: id, Title: a.first.GetInput(), CreatedAt: created,
					LastActivityAt: a.lastActivity, RunCount: a.count, State: convindex.StateActive, LastRunID: a.last.GetRunId(),
				}, nil
			}
			if cur.State == convindex.StateDeleting {
				return nil, nil
			}
			if created.Before(cur.CreatedAt) {
				cur.CreatedAt, cur.Title = created, a.first.GetInput()
			}
			cur.LastActivityAt = maxTime(cur.LastActivityAt, a.lastActivity)
			cur.RunCount = max(cur.RunCount, a.count)
			if a.last.GetRunId() > cur.LastRunID {
				cur.LastRunID = a.last.GetRunId()
			}
			return cur, nil
		})
		if err != nil {
			return convStatus(err, id)
		}
	}
	if err := idx.MarkBackfilled(ctx, tenant, time.Now()); err != nil {
		return convStatus(err, "")
	}
	s.backfilled.Put(tenant, struct{}{}, 1, 0)
	if len(convs) > 0 {
		s.log.InfoContext(ctx, "conversation index backfilled from run records", "tenant", tenant, "conversations", len(convs))
	}
	return nil
}

// brief keeps of a run record what a backfilled entry needs, with the
// title already cut.
func brief(r *baagentv1.Run) *baagentv1.Run {
	if r.GetFinalAnswer() == "" && r.GetMetrics() == nil && len(r.GetInput()) <= convindex.TitleRunes*4 {
		return r
	}
	return &baagentv1.Run{RunId: r.GetRunId(), CreatedAt: r.GetCreatedAt(), FinishedAt: r.GetFinishedAt(), Input: convindex.Title(r.GetInput())}
}

// getConversation returns the entry, backfilling the tenant first.
func (s *Server) getConversation(ctx context.Context, tenant, id string) (*convindex.Store, *convindex.Entry, error) {
	if err := s.ensureBackfilled(ctx, tenant); err != nil {
		return nil, nil, err
	}
	idx, err := s.convIndex(ctx)
	if err != nil {
		return nil, nil, err
	}
	e, _, err := idx.Get(ctx, tenant, id)
	if err != nil {
		return nil, nil, convStatus(err, id)
	}
	return idx, e, nil
}

// ListConversations lists a tenant's conversations, newest activity first.
func (s *Server) ListConversations(ctx context.Context, req *baagentv1.ListConversationsRequest) (*baagentv1.ListConversationsResponse, error) {
	resp, err := s.listConversations(ctx, req)
	s.convOutcome("list", err)
	return resp, err
}

func (s *Server) listConversations(ctx context.Context, req *baagentv1.ListConversationsRequest) (*baagentv1.ListConversationsResponse, error) {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	var after *convindex.Cursor
	if tok := req.GetPageToken(); tok != "" && e.Len() == 0 {
		c, err := convindex.DecodePageToken(tok)
		if err != nil {
			e.Add("page_token", err.Error())
		}
		after = &c
	}
	if err := e.Err(); err != nil {
		return nil, s.rejected(ctx, "ListConversations", err)
	}
	limit := int(req.GetPageSize())
	if limit == 0 {
		limit = DefaultPageSize
	}
	if err := s.ensureBackfilled(ctx, req.GetTenant()); err != nil {
		return nil, err
	}
	idx, err := s.convIndex(ctx)
	if err != nil {
		return nil, err
	}
	entries, more, err := idx.List(ctx, req.GetTenant(), after, limit)
	if err != nil {
		return nil, convStatus(err, "")
	}
	resp := &baagentv1.ListConversationsResponse{Conversations: make([]*baagentv1.Conversation, 0, len(entries))}
	for _, en := range entries {
		resp.Conversations = append(resp.Conversations, toConversation(en))
	}
	if more && len(entries) > 0 {
		resp.NextPageToken = convindex.EncodePageToken(entries[len(entries)-1])
	}
	return resp, nil
}

func validateConversationRef(tenant, id string) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", tenant)
	validate.ID(&e, "conversation_id", id)
	return e.Err()
}

// GetConversation returns a conversation.
func (s *Server) GetConversation(ctx context.Context, req *baagentv1.GetConversationRequest) (*baagentv1.GetConversationResponse, error) {
	if err := validateConversationRef(req.GetTenant(), req.GetConversationId()); err != nil {
		s.convOutcome("get", err)
		return nil, s.rejected(ctx, "GetConversation", err)
	}
	_, e, err := s.getConversation(ctx, req.GetTenant(), req.GetConversationId())
	s.convOutcome("get", err)
	if err != nil {
		return nil, err
	}
	return &baagentv1.GetConversationResponse{Conversation: toConversation(e)}, nil
}

// GetConversationMessages returns a page of a conversation's history from
// the context service, in its message shapes.
func (s *Server) GetConversationMessages(ctx context.Context, req *baagentv1.GetConversationMessagesRequest) (*baagentv1.GetConversationMessagesResponse, error) {
	resp, err := s.conversationMessages(ctx, req)
	s.convOutcome("messages", err)
	return resp, err
}

func (s *Server) conversationMessages(ctx context.Context, req *baagentv1.GetConversationMessagesRequest) (*baagentv1.GetConversationMessagesResponse, error) {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxHistoryPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	if err := e.Err(); err != nil {
		return nil, s.rejected(ctx, "GetConversationMessages", err)
	}
	if _, _, err := s.getConversation(ctx, req.GetTenant(), req.GetConversationId()); err != nil {
		return nil, err
	}
	h, err := s.opts.Context.GetHistory(ctx, &baagentv1.GetHistoryRequest{
		Tenant: req.GetTenant(), ConversationId: req.GetConversationId(),
		PageSize: req.GetPageSize(), PageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, peerStatus("context", "GetHistory", err)
	}
	return &baagentv1.GetConversationMessagesResponse{Messages: h.GetMessages(), NextPageToken: h.GetNextPageToken(), TotalCount: h.GetTotalCount()}, nil
}

// peerStatus passes a peer's refusal of the request on with its code
// (InvalidArgument for a bad page token, NotFound, …) and reports any other
// failure as Unavailable naming the peer.
func peerStatus(peer, rpc string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return status.Errorf(codes.Unavailable, "%s.%s: %v", peer, rpc, err)
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted:
		return err
	}
	return status.Errorf(codes.Unavailable, "%s.%s: %s", peer, rpc, st.Message())
}

// convRuns are the runs of a conversation: its own and every sub-agent run
// under them, and the StartRun idempotency keys that name them.
type convRuns struct {
	runs     []*baagentv1.Run
	idemKeys []string
}

func (c *convRuns) ids() map[string]bool {
	m := make(map[string]bool, len(c.runs))
	for _, r := range c.runs {
		m[r.GetRunId()] = true
	}
	return m
}

// conversationRuns reads the runs of a conversation from the run records.
func (s *Server) conversationRuns(ctx context.Context, store *runstore.Store, tenant, id string) (*convRuns, error) {
	type ref struct{ parent, conv, workspace string }
	all := map[string]ref{}
	var recs []*baagentv1.Run
	idem := map[string]string{}
	err := store.Scan(ctx, tenant, func(r *baagentv1.Run) {
		all[r.GetRunId()] = ref{r.GetParentRunId(), r.GetConversationId(), r.GetLabels()[labelWorkspace]}
		if r.GetConversationId() == id || r.GetParentRunId() != "" {
			recs = append(recs, &baagentv1.Run{
				RunId: r.GetRunId(), ConversationId: r.GetConversationId(), ParentRunId: r.GetParentRunId(),
				State: r.GetState(), Tenant: r.GetTenant(), Labels: r.GetLabels(),
			})
		}
	}, func(key, runID string) { idem[key] = runID })
	if err != nil {
		return nil, storeStatus(err, "")
	}
	// A run belongs to the conversation when it, or a run it descends
	// from, does (bounded walk: a cycle cannot come from real records).
	belongs := func(runID string) bool {
		for range 64 {
			r, ok := all[runID]
			if !ok {
				return false
			}
			if r.conv == id || r.parent != "" && r.workspace == id {
				return true
			}
			if r.parent == "" {
				return false
			}
			runID = r.parent
		}
		return false
	}
	out := &convRuns{}
	for _, r := range recs {
		if belongs(r.GetRunId()) {
			out.runs = append(out.runs, r)
		}
	}
	ids := out.ids()
	for key, runID := range idem {
		if ids[runID] {
			out.idemKeys = append(out.idemKeys, key)
		}
	}
	slices.SortFunc(out.runs, func(a, b *baagentv1.Run) int { return cmpStrings(a.GetRunId(), b.GetRunId()) })
	slices.Sort(out.idemKeys)
	return out, nil
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// refuseActive fails with FailedPrecondition when a run of the
// conversation has not ended. A run whose terminal event is stored but
// whose final record is not yet (it is written just after) is waited for,
// up to finishWait.
func (s *Server) refuseActive(ctx context.Context, store *runstore.Store, id string, runs *convRuns) error {
	for _, r := range runs.runs {
		if isFinished(r.GetState()) {
			continue
		}
		ev, err := s.lastEvent(ctx, r.GetTenant(), r.GetRunId())
		if err != nil {
			return status.Errorf(codes.Unavailable, "read the events of run %s: %v", r.GetRunId(), err)
		}
		if !runevent.IsTerminal(ev) {
			return status.Errorf(codes.FailedPrecondition, "run %s of conversation %s is %s; cancel it or wait for it to end", r.GetRunId(), id, runStateName(r.GetState()))
		}
		if err := s.awaitRecord(ctx, store, r.GetTenant(), r.GetRunId()); err != nil {
			return err
		}
		r.State = baagentv1.RunState_RUN_STATE_COMPLETED // ended; the exact state does not matter here
	}
	return nil
}

// awaitRecord waits, up to finishWait, for a run's final record.
func (s *Server) awaitRecord(ctx context.Context, store *runstore.Store, tenant, runID string) error {
	ctx, cancel := context.WithTimeout(ctx, finishWait)
	defer cancel()
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		rec, _, err := store.Get(ctx, tenant, runID)
		if err == nil && isFinished(rec.GetState()) || errors.Is(err, runstore.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return status.Errorf(codes.Unavailable, "run %s has ended but its final record is not stored yet; retry", runID)
		case <-t.C:
		}
	}
}

// awaitStarting waits, up to finishWait, until every run that reserved
// the entry recently has stored its record or given up its reservation.
func (s *Server) awaitStarting(ctx context.Context, idx *convindex.Store, store *runstore.Store, tenant, id string) error {
	ctx, cancel := context.WithTimeout(ctx, finishWait)
	defer cancel()
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		e, _, err := idx.Get(ctx, tenant, id)
		if err != nil {
			return convStatus(err, id)
		}
		pending := 0
		for _, st := range e.Starting {
			if time.Since(st.At) >= convindex.StartGrace {
				continue
			}
			if _, _, err := store.Get(ctx, tenant, st.RunID); errors.Is(err, runstore.ErrNotFound) {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return status.Errorf(codes.Unavailable, "a run of conversation %s is being started; retry", id)
		case <-t.C:
		}
	}
}

func runStateName(st baagentv1.RunState) string {
	switch st {
	case baagentv1.RunState_RUN_STATE_QUEUED:
		return "queued"
	case baagentv1.RunState_RUN_STATE_RUNNING:
		return "running"
	case baagentv1.RunState_RUN_STATE_WAITING_INPUT:
		return "waiting for input"
	}
	return "not finished"
}

// closeConversation moves a conversation to ENDED or DELETING once no run
// of it is active: it checks the runs, sets the state (so no new run
// starts), waits for runs that were being started, and checks again; a run
// found active then restores the previous state. It returns the entry as
// stored and the conversation's runs.
func (s *Server) closeConversation(ctx context.Context, tenant, id, target string) (*convindex.Entry, *convRuns, error) {
	idx, cur, err := s.getConversation(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	if cur.State == convindex.StateDeleting && target == convindex.StateEnded {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "conversation %s is being deleted", id)
	}
	if cur.State != target {
		runs, err := s.conversationRuns(ctx, store, tenant, id)
		if err != nil {
			return nil, nil, err
		}
		if err := s.refuseActive(ctx, store, id, runs); err != nil {
			return nil, nil, err
		}
	}
	now := time.Now()
	var prev string
	e, err := idx.Update(ctx, tenant, id, func(c *convindex.Entry) (*convindex.Entry, error) {
		if c == nil {
			return nil, convindex.ErrNotFound
		}
		prev = c.State
		switch {
		case c.State == target:
			return nil, nil
		case c.State == convindex.StateDeleting:
			return nil, status.Errorf(codes.FailedPrecondition, "conversation %s is being deleted", id)
		}
		if target == convindex.StateDeleting {
			c.PrevState = c.State
		} else {
			c.EndedAt = now
		}
		c.State = target
		return c, nil
	})
	if err != nil {
		return nil, nil, convStatus(err, id)
	}
	if err := s.awaitStarting(ctx, idx, store, tenant, id); err != nil {
		return nil, nil, err
	}
	runs, err := s.conversationRuns(ctx, store, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	if aerr := s.refuseActive(ctx, store, id, runs); aerr != nil {
		if prev != target { // this call closed it: reopen
			s.reopen(ctx, idx, tenant, id, target, prev)
		}
		return nil, nil, aerr
	}
	return e, runs, nil
}

// reopen restores the state a conversation had before a refused close.
func (s *Server) reopen(ctx context.Context, idx *convindex.Store, tenant, id, from, to string) {
	_, err := idx.Update(context.WithoutCancel(ctx), tenant, id, func(c *convindex.Entry) (*convindex.Entry, error) {
		if c == nil || c.State != from {
			return nil, nil
		}
		c.State, c.PrevState = to, ""
		if to != convindex.StateEnded {
			c.EndedAt = time.Time{}
		}
		return c, nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "conversation state not restored after a refused close", "conversation_id", id, "state", to, "error", err)
		s.metrics.convIndexFailures.Inc()
	}
}

// EndConversation ends a conversation: no run may continue it, its
// workspace and artifacts are freed through the toolrunner, its history
// and runs are kept. Ending an ended conversation frees again what is
// left.
func (s *Server) EndConversation(ctx context.Context, req *baagentv1.EndConversationRequest) (*baagentv1.EndConversationResponse, error) {
	resp, err := s.endConversation(ctx, req)
	s.convOutcome("end", err)
	return resp, err
}

func (s *Server) endConversation(ctx context.Context, req *baagentv1.EndConversationRequest) (*baagentv1.EndConversationResponse, error) {
	if err := validateConversationRef(req.GetTenant(), req.GetConversationId()); err != nil {
		return nil, s.rejected(ctx, "EndConversation", err)
	}
	tenant, id := req.GetTenant(), req.GetConversationId()
	e, _, err := s.closeConversation(ctx, tenant, id, convindex.StateEnded)
	if err != nil {
		return nil, err
	}
	rel, err := s.opts.ToolRunner.ReleaseConversation(ctx, &baagentv1.ReleaseConversationRequest{Tenant: tenant, ConversationId: id})
	if err != nil {
		return nil, peerStatus("toolrunner", "ReleaseConversation", err)
	}
	s.log.InfoContext(ctx, "conversation ended", "tenant", tenant, "conversation_id", id, "artifacts", rel.GetArtifactsDeleted(), "bytes", rel.GetBytesFreed())
	return &baagentv1.EndConversationResponse{Conversation: toConversation(e), ArtifactsDeleted: rel.GetArtifactsDeleted(), BytesFreed: rel.GetBytesFreed()}, nil
}

// DeleteConversation deletes a conversation and everything stored for it.
// The entry is marked DELETING first, so a deletion cut short (a crash, a
// peer down) is resumed by calling it again; every step removes what is
// left and is safe to repeat, and the entry goes last.
func (s *Server) DeleteConversation(ctx context.Context, req *baagentv1.OrchestratorServiceDeleteConversationRequest) (*baagentv1.OrchestratorServiceDeleteConversationResponse, error) {
	resp, err := s.deleteConversation(ctx, req)
	s.convOutcome("delete", err)
	return resp, err
}

func (s *Server) deleteConversation(ctx context.Context, req *baagentv1.OrchestratorServiceDeleteConversationRequest) (*baagentv1.OrchestratorServiceDeleteConversationResponse, error) {
	if err := validateConversationRef(req.GetTenant(), req.GetConversationId()); err != nil {
		return nil, s.rejected(ctx, "DeleteConversation", err)
	}
	tenant, id := req.GetTenant(), req.GetConversationId()
	_, runs, err := s.closeConversation(ctx, tenant, id, convindex.StateDeleting)
	if err != nil {
		return nil, err
	}
	resp := &baagentv1.OrchestratorServiceDeleteConversationResponse{}
	if err := s.purgeConversation(ctx, tenant, id, runs, resp); err != nil {
		s.log.WarnContext(ctx, "conversation deletion interrupted; it resumes when called again", "tenant", tenant, "conversation_id", id, "error", err)
		return nil, err
	}
	s.log.InfoContext(ctx, "conversation deleted", "tenant", tenant, "conversation_id", id,
		"runs", resp.GetRunsDeleted(), "events", resp.GetEventsDeleted(), "messages", resp.GetMessagesDeleted(),
		"artifacts", resp.GetArtifactsDeleted(), "bytes", resp.GetBytesFreed())
	return resp, nil
}

// purgeConversation removes, in order: each run's events, queue item and
// checkpoint; the sub-agent conversations' history and skill stacks; the
// conversation's skill stack and history; its workspace, artifacts and
// tool idempotency records (toolrunner); the StartRun idempotency keys
// and run records (which the steps before are found from); and the index
// entry.
func (s *Server) purgeConversation(ctx context.Context, tenant, id string, runs *convRuns, resp *baagentv1.OrchestratorServiceDeleteConversationResponse) error {
	js := s.opts.JetStream
	convs := []string{}
	for _, r := range runs.runs {
		rid := r.GetRunId()
		subj, err := natsx.EventSubject(tenant, rid)
		if err != nil {
			return status.Errorf(codes.Internal, "run %s: %v", rid, err)
		}
		n, err := natsx.PurgeSubject(ctx, js, natsx.StreamEvents, subj)
		if err != nil {
			return status.Errorf(codes.Unavailable, "delete the events of run %s: %v", rid, err)
		}
		resp.EventsDeleted += int64(n) //nolint:gosec // a message count
		qsubj, _ := natsx.RunSubject(tenant, rid)
		if _, err := natsx.PurgeSubject(ctx, js, natsx.StreamRuns, qsubj); err != nil {
			return status.Errorf(codes.Unavailable, "delete the queue item of run %s: %v", rid, err)
		}
		key, _ := natsx.CheckpointKey(tenant, rid)
		if _, err := natsx.PurgeKeys(ctx, js, natsx.BucketCheckpoints, key); err != nil {
			return status.Errorf(codes.Unavailable, "delete the checkpoint of run %s: %v", rid, err)
		}
		if c := r.GetConversationId(); c != id && !slices.Contains(convs, c) && natsx.ValidateToken("conversation_id", c) == nil {
			convs = append(convs, c)
		}
	}
	convs = append(convs, id) // the conversation's own last
	for _, c := range convs {
		key, err := skillstack.Key(tenant, c)
		if err != nil {
			return status.Errorf(codes.Internal, "conversation %s: %v", c, err)
		}
		if _, err := natsx.PurgeKeys(ctx, js, natsx.BucketCheckpoints, key); err != nil {
			return status.Errorf(codes.Unavailable, "delete the skill stack of conversation %s: %v", c, err)
		}
		h, err := s.opts.Context.DeleteConversation(ctx, &baagentv1.DeleteConversationRequest{Tenant: tenant, ConversationId: c})
		if err != nil {
			return peerStatus("context", "DeleteConversation", err)
		}
		resp.MessagesDeleted += h.GetDeletedCount()
	}
	rel, err := s.opts.ToolRunner.ReleaseConversation(ctx, &baagentv1.ReleaseConversationRequest{Tenant: tenant, ConversationId: id})
	if err != nil {
		return peerStatus("toolrunner", "ReleaseConversation", err)
	}
	resp.ArtifactsDeleted, resp.BytesFreed = rel.GetArtifactsDeleted(), rel.GetBytesFreed()
	episodes, err := s.purgeConversationMemory(ctx, tenant, id)
	if err != nil {
		return err
	}
	if episodes > 0 {
		s.log.InfoContext(ctx, "conversation's memory deleted", "tenant", tenant, "conversation_id", id, "episodes", episodes)
	}
	for _, key := range runs.idemKeys {
		if _, err := natsx.PurgeKeys(ctx, js, natsx.BucketRuns, key); err != nil {
			return status.Errorf(codes.Unavailable, "delete an idempotency key: %v", err)
		}
	}
	for _, r := range runs.runs {
		key, _ := natsx.RunKey(tenant, r.GetRunId())
		if _, err := natsx.PurgeKeys(ctx, js, natsx.BucketRuns, key); err != nil {
			return status.Errorf(codes.Unavailable, "delete the record of run %s: %v", r.GetRunId(), err)
		}
		resp.RunsDeleted++
	}
	idx, err := s.convIndex(ctx)
	if err != nil {
		return err
	}
	if err := idx.Remove(ctx, tenant, id); err != nil {
		return status.Errorf(codes.Unavailable, "%v", err)
	}
	return nil
}

// convOutcome counts a conversation RPC by outcome.
func (s *Server) convOutcome(op string, err error) {
	outcome := convOK
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition:
			outcome = convRefused
		default:
			outcome = convFailed
		}
	}
	s.metrics.convOps.WithLabelValues(op, outcome).Inc()
}
