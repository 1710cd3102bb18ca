package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// cancelCause is the cancellation cause of a run cancelled by CancelRun.
type cancelCause struct{ reason string }

func (c *cancelCause) Error() string { return "cancelled: " + c.reason }

// run is one accepted run on this replica. Its record and state are owned by
// the worker goroutine executing it; other goroutines only cancel it and
// wait on done.
type run struct {
	s       *Server
	log     *slog.Logger
	initial *baagentv1.Run // the QUEUED record, as returned by StartRun
	spec    *baagentv1.RunSpec

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	// Owned by the executing goroutine.
	rec     *baagentv1.Run
	pub     *publisher
	metrics *convMetrics
	skills  skillStack
	models  map[string]*baagentv1.ModelInfo // GetModelInfo answers, by model
}

func newRun(s *Server, rec *baagentv1.Run, spec *baagentv1.RunSpec) *run {
	ctx, cancel := context.WithCancelCause(s.base)
	return &run{
		s:       s,
		log:     s.log.With("tenant", rec.GetTenant(), "run_id", rec.GetRunId()),
		initial: proto.Clone(rec).(*baagentv1.Run),
		spec:    spec,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		rec:     rec,
		models:  map[string]*baagentv1.ModelInfo{},
	}
}

// execute runs the loop to its end and publishes the terminal event.
func (r *run) execute() {
	defer close(r.done)
	defer r.s.forget(r.rec.GetRunId())
	defer r.cancel(nil)

	pub, err := newPublisher(r.s.opts.JetStream, r.rec)
	if err != nil { // the ids were validated at the edge; this is a bug
		r.log.Error("run cannot publish events", "error", err)
		return
	}
	r.pub = pub
	start := time.Now()
	r.metrics = newConvMetrics(r.rec.GetConversationId(), start)
	r.s.metrics.runsActive.Inc()
	defer r.s.metrics.runsActive.Dec()

	var answer string
	if r.ctx.Err() == nil {
		answer, err = r.loop()
	} else {
		err = context.Cause(r.ctx)
	}
	r.finish(answer, err)
}

// finish publishes the one terminal event and stores the final record. It
// works on a context detached from the run's (which may be cancelled) and
// bounded by finalizeTimeout.
func (r *run) finish(answer string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	now := time.Now()
	metrics := r.metrics.snapshot(now, true)
	ev := &baagentv1.Event{Step: r.rec.GetStep()}
	outcome := "completed"
	var cc *cancelCause
	switch {
	case err == nil:
		r.rec.State = baagentv1.RunState_RUN_STATE_COMPLETED
		r.rec.FinalAnswer = answer
		ev.Payload = &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: answer, Format: "markdown", Metrics: metrics}}
	case errors.As(err, &cc) || errors.As(context.Cause(r.ctx), &cc):
		outcome = "cancelled"
		r.rec.State = baagentv1.RunState_RUN_STATE_CANCELLED
		ev.Payload = &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: cc.reason}}
	default:
		outcome = "failed"
		re := asRunError(err)
		if errors.Is(err, errShutdown) || errors.Is(context.Cause(r.ctx), errShutdown) {
			re = newRunError(CodeShutdown, errShutdown, "the orchestrator shut down before the run finished; start it again")
		}
		r.rec.State = baagentv1.RunState_RUN_STATE_FAILED
		r.rec.Error = &baagentv1.RunError{Code: re.code, Message: re.message}
		ev.Payload = &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Code: re.code, Message: re.message}}
		r.log.Warn("run failed", "code", re.code, "error", re.message)
	}
	if perr := r.pub.emitNow(ctx, ev); perr != nil {
		r.s.metrics.eventFailures.Inc()
		r.log.Error("terminal event not published", "type", EventType(ev), "error", perr)
	}
	r.rec.FinishedAt = timestamppb.New(now)
	r.rec.Metrics = metrics
	r.rec.LastSeq = r.pub.lastSeq()
	r.save(ctx)
	r.s.metrics.runs.WithLabelValues(outcome).Inc()
	r.log.Info("run ended", "state", r.rec.GetState().String(), "steps", r.rec.GetStep(), "events", r.rec.GetLastSeq(), "duration", now.Sub(metrics.GetStartTime().AsTime()))
}

// save stores the current record with the seq of the last acknowledged
// event; a failure is logged, not fatal (events remain the source of truth
// for clients watching the run).
func (r *run) save(ctx context.Context) {
	r.rec.LastSeq = r.pub.lastSeq()
	store, err := r.s.runStore(ctx)
	if err == nil {
		err = store.put(ctx, r.rec)
	}
	if err != nil {
		r.log.Warn("run record not saved", "state", r.rec.GetState().String(), "error", err)
	}
}

// emit publishes an event of the current step (pipelined: its ack is
// awaited by the next flush). A publish that fails after retries ends the
// run: clients could no longer follow it.
func (r *run) emit(ev *baagentv1.Event) error {
	ev.Step = r.rec.GetStep()
	return r.eventsErr(r.pub.emit(r.ctx, ev))
}

// flush waits until every event emitted so far is stored.
func (r *run) flush() error {
	return r.eventsErr(r.pub.flush(r.ctx))
}

func (r *run) eventsErr(err error) error {
	if err == nil {
		return nil
	}
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	r.s.metrics.eventFailures.Inc()
	return newRunError(CodeEventsUnavailable, err, "run events cannot be published: %v", err)
}
