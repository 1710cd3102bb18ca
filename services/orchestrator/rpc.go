package orchestrator

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
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
		holder, claimed, err := store.claimIdempotencyKey(ctx, rec.Tenant, key, rec.RunId)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "run store: %v", err)
		}
		if !claimed {
			prev, _, err := store.get(ctx, rec.Tenant, holder)
			if err != nil {
				return nil, status.Errorf(codes.Unavailable, "idempotency key %q belongs to run %s, which cannot be read: %v", key, holder, err)
			}
			return &baagentv1.OrchestratorServiceStartRunResponse{Run: prev}, nil
		}
	}

	r, err := s.accept(ctx, store, rec, proto.Clone(spec).(*baagentv1.RunSpec))
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "run accepted", "tenant", rec.Tenant, "run_id", rec.RunId, "conversation_id", rec.ConversationId, "model", rec.Model)
	return &baagentv1.OrchestratorServiceStartRunResponse{Run: r.initial}, nil
}

// accept stores the QUEUED record and hands the run to the workers. The
// capacity check, the record and the enqueue happen in that order so that a
// refused run leaves nothing behind and a queued run is always readable.
func (s *Server) accept(ctx context.Context, store *runStore, rec *baagentv1.Run, spec *baagentv1.RunSpec) (*run, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "the orchestrator is shutting down; retry on another replica")
	}
	if len(s.runs) >= cap(s.queue) {
		s.mu.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted,
			"this orchestrator already holds %d runs (%d executing at most, the rest queued); retry later", len(s.runs), s.opts.MaxConcurrentRuns)
	}
	r := newRun(s, rec, spec)
	s.runs[rec.RunId] = r
	s.mu.Unlock()

	if err := store.put(ctx, rec); err != nil {
		s.forget(rec.RunId)
		r.cancel(errors.New("not accepted"))
		return nil, status.Errorf(codes.Unavailable, "run store: %v", err)
	}
	s.metrics.runsQueued.Inc()
	s.queue <- r // never blocks: len(s.runs) < cap(s.queue)
	return r, nil
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
	run, _, err := store.get(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, storeStatus(err, req.GetRunId())
	}
	return &baagentv1.OrchestratorServiceGetRunResponse{Run: run}, nil
}

// ListRuns lists a tenant's runs, newest first.
func (s *Server) ListRuns(ctx context.Context, req *baagentv1.OrchestratorServiceListRunsRequest) (*baagentv1.OrchestratorServiceListRunsResponse, error) {
	if err := validateListRuns(req); err != nil {
		return nil, s.rejected(ctx, "ListRuns", err)
	}
	f := listFilter{conversationID: req.GetConversationId(), states: req.GetStates(), limit: int(req.GetPageSize())}
	if f.limit == 0 {
		f.limit = DefaultPageSize
	}
	if tok := req.GetPageToken(); tok != "" {
		before, err := decodePageToken(tok)
		if err != nil {
			var e validate.Errors
			e.Add("page_token", err.Error())
			return nil, s.rejected(ctx, "ListRuns", e.Err())
		}
		f.before = before
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	runs, more, err := store.list(ctx, req.GetTenant(), f)
	if err != nil {
		return nil, storeStatus(err, "")
	}
	resp := &baagentv1.OrchestratorServiceListRunsResponse{Runs: runs}
	if more {
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
	reason := req.GetReason()
	if reason == "" {
		reason = "cancelled by the client"
	}
	if r := s.local(req.GetRunId()); r != nil && r.initial.GetTenant() == req.GetTenant() {
		r.cancel(&cancelCause{reason: reason})
		wait, stop := context.WithTimeout(ctx, DefaultCancelWait)
		defer stop()
		select {
		case <-r.done:
		case <-wait.Done():
		}
	} else if err := s.cancelOrphan(ctx, store, req.GetTenant(), req.GetRunId(), reason); err != nil {
		return nil, err
	}
	run, _, err := store.get(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, storeStatus(err, req.GetRunId())
	}
	return &baagentv1.OrchestratorServiceCancelRunResponse{Run: run}, nil
}

// cancelOrphan ends a run that no goroutine of this replica executes and
// that is not finished (its replica stopped before ending it): it publishes
// the `cancelled` event after the record's last seq and stores the
// CANCELLED state, guarded by the record's revision.
func (s *Server) cancelOrphan(ctx context.Context, store *runStore, tenant, runID, reason string) error {
	rec, rev, err := store.get(ctx, tenant, runID)
	if err != nil {
		return storeStatus(err, runID)
	}
	if isFinished(rec.GetState()) {
		return nil
	}
	pub, err := newPublisher(s.opts.JetStream, rec)
	if err != nil {
		return status.Errorf(codes.Internal, "run %s: %v", runID, err)
	}
	if err := pub.emitNow(ctx, &baagentv1.Event{Step: rec.GetStep(), Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: reason}}}); err != nil {
		return status.Errorf(codes.Unavailable, "publish the cancelled event: %v", err)
	}
	now := time.Now()
	rec.State = baagentv1.RunState_RUN_STATE_CANCELLED
	rec.FinishedAt = timestamppb.New(now)
	rec.LastSeq = pub.lastSeq()
	if err := store.update(ctx, rec, rev); err != nil {
		return status.Errorf(codes.Aborted, "run %s changed while being cancelled; retry: %v", runID, err)
	}
	s.metrics.runs.WithLabelValues("cancelled").Inc()
	return nil
}

// SubmitInput answers the question a WAITING_INPUT run waits on. Runs do not
// ask questions yet (human in the loop comes with durable runs).
func (s *Server) SubmitInput(ctx context.Context, req *baagentv1.OrchestratorServiceSubmitInputRequest) (*baagentv1.OrchestratorServiceSubmitInputResponse, error) {
	if err := validateSubmitInput(req); err != nil {
		return nil, s.rejected(ctx, "SubmitInput", err)
	}
	return nil, notImplemented("SubmitInput")
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
	case errors.Is(err, errRunNotFound):
		return status.Errorf(codes.NotFound, "run %s not found", runID)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "run store: %v", err)
}
