package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
)

// SubmitInput answers the question a WAITING_INPUT run waits on. The answer
// is validated against the question (an offered option; free text for
// clarifications and custom decisions), stored in the run's checkpoint, and
// the run is requeued at once; a replica resumes it with the answer.
func (s *Server) SubmitInput(ctx context.Context, req *baagentv1.OrchestratorServiceSubmitInputRequest) (*baagentv1.OrchestratorServiceSubmitInputResponse, error) {
	if err := validateSubmitInput(req); err != nil {
		return nil, s.rejected(ctx, "SubmitInput", err)
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	rec, _, err := store.Get(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, storeStatus(err, req.GetRunId())
	}
	if rec.GetState() != baagentv1.RunState_RUN_STATE_WAITING_INPUT {
		return nil, status.Errorf(codes.FailedPrecondition, "run %s is %s, not waiting for input", rec.GetRunId(), stateName(rec.GetState()))
	}
	cps, err := s.checkpoints(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "checkpoints: %v", err)
	}
	cp, rev, err := cps.Load(ctx, req.GetTenant(), req.GetRunId())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "checkpoints: %v", err)
	}
	if cp == nil || cp.Wait == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "run %s has no open question", rec.GetRunId())
	}
	w := cp.Wait
	if id := req.GetInput().GetInputId(); id != w.ID {
		var e validate.Errors
		e.Add("input.input_id", fmt.Sprintf("the run waits on %q, not %q", w.ID, id))
		return nil, s.rejected(ctx, "SubmitInput", e.Err())
	}
	if w.Answer != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "question %s was already answered", w.ID)
	}
	now := time.Now()
	if !now.Before(w.Deadline) {
		return nil, status.Errorf(codes.FailedPrecondition, "question %s timed out at %s; the run goes on without the answer", w.ID, w.Deadline.Format(time.RFC3339))
	}
	ans, err := hitl.CheckAnswer(w, req.GetInput(), now)
	if err != nil {
		var e validate.Errors
		e.Add("input.answer", err.Error())
		return nil, s.rejected(ctx, "SubmitInput", e.Err())
	}
	w.Answer = ans
	if _, err := cps.Write(ctx, req.GetTenant(), req.GetRunId(), cp, rev); err != nil {
		if errors.Is(err, checkpoint.ErrLostRun) {
			return nil, status.Errorf(codes.Aborted, "run %s changed while answering; read it again and retry", rec.GetRunId())
		}
		return nil, status.Errorf(codes.Unavailable, "checkpoints: %v", err)
	}
	if err := s.wake(ctx, rec, w); err != nil {
		// The answer is stored: the run resumes with it at the deadline.
		s.log.WarnContext(ctx, "answered run not requeued; it resumes at its question's deadline", "run_id", rec.GetRunId(), "error", err)
	}
	s.log.InfoContext(ctx, "input submitted", "tenant", rec.GetTenant(), "run_id", rec.GetRunId(), "input_id", w.ID)
	return &baagentv1.OrchestratorServiceSubmitInputResponse{Run: rec}, nil
}

// wake replaces a waiting run's work item (due at the question's deadline)
// with one due now: the new item is published first, then the old one
// deleted, so the run is never without one.
func (s *Server) wake(ctx context.Context, rec *baagentv1.Run, w *hitl.Wait) error {
	st, err := s.runsStream(ctx)
	if err != nil {
		return err
	}
	old, err := st.GetMsg(ctx, w.WorkSeq)
	if err != nil {
		return fmt.Errorf("read the run's work item: %w", err)
	}
	subject, err := natsx.RunSubject(rec.GetTenant(), rec.GetRunId())
	if err != nil {
		return err
	}
	if old.Subject != subject {
		return fmt.Errorf("work item %d belongs to %s", w.WorkSeq, old.Subject)
	}
	// The new item keeps the old one's trace context: the run goes on in
	// the trace it started in, not in that of the answer's call.
	msg := &nats.Msg{Subject: subject, Data: old.Data, Header: traceHeaders(old.Header)}
	if _, err := s.opts.JetStream.PublishMsg(ctx, msg, jetstream.WithMsgID(rec.GetRunId()+":"+w.ID)); err != nil {
		return fmt.Errorf("requeue: %w", err)
	}
	if err := st.DeleteMsg(ctx, w.WorkSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("delete the waiting work item: %w", err)
	}
	return nil
}

func stateName(st baagentv1.RunState) string {
	switch st {
	case baagentv1.RunState_RUN_STATE_QUEUED:
		return "queued"
	case baagentv1.RunState_RUN_STATE_RUNNING:
		return "running"
	case baagentv1.RunState_RUN_STATE_COMPLETED:
		return "completed"
	case baagentv1.RunState_RUN_STATE_FAILED:
		return "failed"
	case baagentv1.RunState_RUN_STATE_CANCELLED:
		return "cancelled"
	}
	return st.String()
}

// cancelLocal cancels the run if this replica executes it, and waits (up
// to DefaultCancelWait) for it to end.
func (s *Server) cancelLocal(ctx context.Context, tenant, runID, reason string) bool {
	r := s.local(runID)
	if r == nil || r.rec.GetTenant() != tenant {
		return false
	}
	r.cancel(&cancelCause{reason: reason})
	wait, stop := context.WithTimeout(ctx, DefaultCancelWait)
	defer stop()
	select {
	case <-r.done:
	case <-wait.Done():
	}
	return true
}

// waitFinished polls the run's record until it is finished or
// DefaultCancelWait passes.
func (s *Server) waitFinished(ctx context.Context, store *runstore.Store, tenant, runID string) {
	ctx, cancel := context.WithTimeout(ctx, DefaultCancelWait)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if rec, _, err := store.Get(ctx, tenant, runID); err == nil && isFinished(rec.GetState()) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lastEvent returns the run's last stored event (an empty one if none).
func (s *Server) lastEvent(ctx context.Context, tenant, runID string) (*baagentv1.Event, error) {
	subject, err := natsx.EventSubject(tenant, runID)
	if err != nil {
		return nil, err
	}
	st, err := s.opts.JetStream.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		return nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return &baagentv1.Event{}, nil
	}
	if err != nil {
		return nil, err
	}
	ev := &baagentv1.Event{}
	if err := proto.Unmarshal(m.Data, ev); err != nil {
		return nil, err
	}
	return ev, nil
}
