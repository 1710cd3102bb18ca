package orchestrator

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
)

// StartRun accepts a run and queues it; it returns at once with the QUEUED
// run (or, for a repeated idempotency key, the run that key started).
func (s *Server) StartRun(ctx context.Context, req *baagentv1.OrchestratorServiceStartRunRequest) (*baagentv1.OrchestratorServiceStartRunResponse, error) {
	if err := validateStartRun(req); err != nil {
		return nil, s.rejected(ctx, "StartRun", err)
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	spec := req.GetSpec()
	now := time.Now()
	rec := &baagentv1.Run{
		RunId:          newRunID(now),
		ConversationId: spec.GetConversationId(),
		Tenant:         req.GetTenant(),
		Project:        spec.GetProject(),
		State:          baagentv1.RunState_RUN_STATE_QUEUED,
		Model:          spec.GetModel(),
		Input:          spec.GetInput(),
		CreatedAt:      timestamppb.New(now),
		MaxSteps:       spec.GetMaxSteps(),
		ParentRunId:    req.GetParentRunId(),
		ScriptedModel:  s.opts.ScriptedModel,
		Labels:         spec.GetLabels(),
		TraceId:        tracing.TraceID(ctx),
		ApiKeyId:       req.GetApiKeyId(),
	}
	if rec.ConversationId == "" {
		rec.ConversationId = newConversationID()
	}
	if rec.Model == "" {
		rec.Model = s.opts.DefaultModel
	}
	if rec.MaxSteps == 0 {
		rec.MaxSteps = int32(s.opts.DefaultMaxSteps)
	}

	if key := spec.GetIdempotencyKey(); key != "" {
		holder, claimed, err := store.ClaimIdempotencyKey(ctx, rec.Tenant, key, rec.RunId)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "run store: %v", err)
		}
		if !claimed {
			prev, _, err := store.Get(ctx, rec.Tenant, holder)
			if err != nil {
				return nil, status.Errorf(codes.Unavailable, "idempotency key %q belongs to run %s, which cannot be read: %v", key, holder, err)
			}
			return &baagentv1.OrchestratorServiceStartRunResponse{Run: prev}, nil
		}
	}

	// The conversation's index entry is reserved before the run is
	// stored: a conversation being ended or deleted then either refuses
	// the run or finds it (see closeConversation).
	undo, err := s.reserveConversation(ctx, rec)
	if err != nil {
		if key := spec.GetIdempotencyKey(); key != "" {
			if rerr := store.ReleaseIdempotencyKey(context.WithoutCancel(ctx), rec.Tenant, key, rec.RunId); rerr != nil {
				s.log.WarnContext(ctx, "idempotency key of a refused run not released", "run_id", rec.RunId, "error", rerr)
			}
		}
		return nil, s.rejected(ctx, "StartRun", err)
	}
	if err := s.accept(ctx, store, rec, spec); err != nil {
		if _, _, gerr := store.Get(context.WithoutCancel(ctx), rec.Tenant, rec.RunId); errors.Is(gerr, runstore.ErrNotFound) {
			undo() // nothing was stored: the run never existed
		}
		return nil, err
	}
	s.log.InfoContext(ctx, "run accepted", "tenant", rec.Tenant, "run_id", rec.RunId, "conversation_id", rec.ConversationId, "model", rec.Model)
	return &baagentv1.OrchestratorServiceStartRunResponse{Run: rec}, nil
}

// accept checks the limits, stores the QUEUED record and publishes the
// run's work item, in that order, so that a refused run leaves nothing
// behind and a queued run is always readable.
func (s *Server) accept(ctx context.Context, store *runstore.Store, rec *baagentv1.Run, spec *baagentv1.RunSpec) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return status.Error(codes.Unavailable, "the orchestrator is shutting down; retry on another replica")
	}
	if err := s.admit(ctx, rec.GetTenant()); err != nil {
		return err
	}
	if err := s.admitBudget(ctx, rec.GetTenant(), rec.GetApiKeyId()); err != nil {
		return err
	}
	if err := store.Put(ctx, rec); err != nil {
		return status.Errorf(codes.Unavailable, "run store: %v", err)
	}
	if err := s.enqueue(ctx, rec, spec); err != nil {
		// The record must not claim a queued run nobody will execute.
		failed := proto.Clone(rec).(*baagentv1.Run)
		failed.State = baagentv1.RunState_RUN_STATE_FAILED
		failed.FinishedAt = timestamppb.Now()
		failed.Error = &baagentv1.RunError{Code: CodeQueueUnavailable, Message: "the run could not be queued: " + err.Error()}
		if perr := store.Put(context.WithoutCancel(ctx), failed); perr != nil {
			s.log.ErrorContext(ctx, "run neither queued nor marked failed", "run_id", rec.GetRunId(), "error", perr)
		}
		return status.Errorf(codes.Unavailable, "run queue: %v", err)
	}
	return nil
}

// GetRun returns a run.
func (s *Server) GetRun(ctx context.Context, req *baagentv1.OrchestratorServiceGetRunRequest) (*baagentv1.OrchestratorServiceGetRunResponse, error) {
	if err := validateGetRun(req); err != nil {
		return nil, s.rejected(ctx, "GetRun", err)
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	run, _, err := store.Get(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, storeStatus(err, req.GetRunId())
	}
	if !isFinished(run.GetState()) {
		s.withProgress(ctx, run)
		s.withEnding(ctx, run)
	}
	return &baagentv1.OrchestratorServiceGetRunResponse{Run: run}, nil
}

// withEnding reports an unfinished record as ended when the run's terminal
// event is already stored. The record is written just after that event (so
// that a crash in between loses nothing: the resuming replica reads the
// event back), and a client that saw the event must not then read RUNNING.
// Without a readable last event the record is returned as it is.
func (s *Server) withEnding(ctx context.Context, run *baagentv1.Run) {
	ev, err := s.lastEvent(ctx, run.GetTenant(), run.GetRunId())
	if err != nil || !runevent.IsTerminal(ev) {
		return
	}
	endRecord(run, ev)
	run.LastSeq = max(run.GetLastSeq(), ev.GetSeq())
}

// withProgress fills an unfinished run's step, metrics and last_seq from
// its checkpoint: the record is written only when the run's state changes,
// the checkpoint after every model response and tool result. Without a
// readable checkpoint the record is returned as it is.
func (s *Server) withProgress(ctx context.Context, run *baagentv1.Run) {
	cps, err := s.checkpoints(ctx)
	if err != nil {
		return
	}
	cp, _, err := cps.Load(ctx, run.GetTenant(), run.GetRunId())
	if err != nil || cp == nil || !cp.Started {
		return
	}
	run.Step = max(run.GetStep(), cp.Step)
	run.LastSeq = max(run.GetLastSeq(), cp.LastSeq)
	if m, err := protoenc.Unmarshal[baagentv1.ConversationMetrics](cp.Metrics); err == nil && len(cp.Metrics) > 0 {
		run.Metrics = m
	}
	if cp.Complexity != 0 {
		run.QueryComplexity, run.ComplexitySignals = baagentv1.QueryComplexity(cp.Complexity), cp.ComplexitySignals
	}
	if p := cp.Plan; p != nil && p.Decode() == nil && p.WorkPlan() != nil {
		run.Plan = p.WorkPlan()
	}
}

// ListRuns lists a tenant's runs, newest first, as summaries (see
// summarize). A page ends at page_size runs or when one more would take the
// response over the gRPC message limit, whichever comes first; the client
// continues with next_page_token either way.
func (s *Server) ListRuns(ctx context.Context, req *baagentv1.OrchestratorServiceListRunsRequest) (*baagentv1.OrchestratorServiceListRunsResponse, error) {
	if err := validateListRuns(req); err != nil {
		return nil, s.rejected(ctx, "ListRuns", err)
	}
	f := runstore.Filter{ConversationID: req.GetConversationId(), States: req.GetStates(), Limit: int(req.GetPageSize())}
	if f.Limit == 0 {
		f.Limit = DefaultPageSize
	}
	if tok := req.GetPageToken(); tok != "" {
		before, err := decodePageToken(tok)
		if err != nil {
			var e validate.Errors
			e.Add("page_token", err.Error())
			return nil, s.rejected(ctx, "ListRuns", e.Err())
		}
		f.Before = before
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	runs, more, err := store.List(ctx, req.GetTenant(), f, summarize)
	if err != nil {
		return nil, storeStatus(err, "")
	}
	runs, cut := fitPage(runs, listPageBudget(s.opts.MaxMsgBytes))
	resp := &baagentv1.OrchestratorServiceListRunsResponse{Runs: runs}
	if (more || cut) && len(runs) > 0 {
		resp.NextPageToken = encodePageToken(runs[len(runs)-1].GetRunId())
	}
	return resp, nil
}

// CancelRun cancels a run: the run's context is cancelled (stopping the
// model stream and the tool calls in flight) and the run ends with a
// `cancelled` event carrying the reason. Cancelling a finished run is a
// no-op that returns it.
func (s *Server) CancelRun(ctx context.Context, req *baagentv1.OrchestratorServiceCancelRunRequest) (*baagentv1.OrchestratorServiceCancelRunResponse, error) {
	if err := validateCancelRun(req); err != nil {
		return nil, s.rejected(ctx, "CancelRun", err)
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	reason := cancelReason(req)
	rec, _, err := store.Get(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, storeStatus(err, req.GetRunId())
	}
	// Read before the run ends (its checkpoint goes with it).
	children := s.subAgentRuns(ctx, req.GetTenant(), req.GetRunId())
	defer s.cancelSubAgents(ctx, req.GetTenant(), req.GetRunId(), children)
	switch {
	case isFinished(rec.GetState()):
	case s.cancelLocal(ctx, req.GetTenant(), req.GetRunId(), reason):
		// The execution has ended, but one that was storing a pause (a
		// question, a sub-agent wait) when the cancel came leaves the run
		// waiting instead of cancelled: end it here.
		if err := s.cancelOrphan(ctx, store, req.GetTenant(), req.GetRunId(), reason); err != nil {
			return nil, err
		}
	case rec.GetState() == baagentv1.RunState_RUN_STATE_RUNNING && s.cancelRemote(ctx, req):
		// The executing replica ends the run; wait for its record.
		s.waitFinished(ctx, store, req.GetTenant(), req.GetRunId())
	default:
		// Queued, waiting for input, or orphaned by a replica that died:
		// no goroutine executes it. Its work item, when delivered, finds
		// the run finished.
		if err := s.cancelOrphan(ctx, store, req.GetTenant(), req.GetRunId(), reason); err != nil {
			return nil, err
		}
	}
	run, _, err := store.Get(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, storeStatus(err, req.GetRunId())
	}
	return &baagentv1.OrchestratorServiceCancelRunResponse{Run: run}, nil
}

// cancelOrphan ends a run that no goroutine of this replica executes and
// that is not finished (its replica stopped before ending it): it publishes
// the `cancelled` event after the record's last seq and stores the
// CANCELLED state, guarded by the record's revision.
func (s *Server) cancelOrphan(ctx context.Context, store *runstore.Store, tenant, runID, reason string) error {
	rec, rev, err := store.Get(ctx, tenant, runID)
	if err != nil {
		return storeStatus(err, runID)
	}
	if isFinished(rec.GetState()) {
		return nil
	}
	pub, err := publish.New(s.opts.JetStream, rec, "")
	if err != nil {
		return status.Errorf(codes.Internal, "run %s: %v", runID, err)
	}
	// Continue after the last stored event (the record may lag behind a
	// replica that died).
	if last, err := s.lastEvent(ctx, tenant, runID); err != nil {
		return status.Errorf(codes.Unavailable, "read the run's events: %v", err)
	} else if last.GetSeq() > rec.GetLastSeq() {
		pub.ContinueAfter(last.GetSeq(), 0, "")
	}
	if err := pub.EmitNow(ctx, &baagentv1.Event{Step: rec.GetStep(), Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: reason}}}); err != nil {
		return status.Errorf(codes.Unavailable, "publish the cancelled event: %v", err)
	}
	now := time.Now()
	rec.State = baagentv1.RunState_RUN_STATE_CANCELLED
	rec.PendingInput = nil
	rec.FinishedAt = timestamppb.New(now)
	rec.LastSeq = pub.LastSeq()
	if err := store.Update(ctx, rec, rev); err != nil {
		return status.Errorf(codes.Aborted, "run %s changed while being cancelled; retry: %v", runID, err)
	}
	s.metrics.runs.WithLabelValues("cancelled").Inc()
	s.conversationActivity(ctx, rec)
	s.subAgentEnded(ctx, rec) // a parent waiting for this run goes on
	if cps, err := s.checkpoints(ctx); err == nil {
		if err := cps.Delete(ctx, tenant, runID); err != nil {
			s.log.WarnContext(ctx, "checkpoint of a cancelled run not deleted (it expires with the bucket's TTL)", "run_id", runID, "error", err)
		}
	}
	return nil
}

func isFinished(st baagentv1.RunState) bool {
	switch st {
	case baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_CANCELLED:
		return true
	}
	return false
}

// storeStatus maps a run store error to a gRPC status.
func storeStatus(err error, runID string) error {
	switch {
	case errors.Is(err, runstore.ErrNotFound):
		return status.Errorf(codes.NotFound, "run %s not found", runID)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "run store: %v", err)
}
