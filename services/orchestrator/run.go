package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// cancelCause is the cancellation cause of a run cancelled by CancelRun.
type cancelCause struct{ reason string }

func (c *cancelCause) Error() string { return "cancelled: " + c.reason }

// outcome is how an execution of a run ended on this replica.
type outcome int

const (
	// outcomeEnded: the run reached its terminal event.
	outcomeEnded outcome = iota
	// outcomeHandedBack: the replica stops (shutdown) or cannot go on now;
	// the run goes back to the queue and resumes from its checkpoint.
	outcomeHandedBack
	// outcomeLost: another replica took the run over.
	outcomeLost
	// outcomeWaiting: the run waits for the user's input (holding no
	// goroutine); its work item comes back at the wait's deadline.
	outcomeWaiting
)

// run is one execution of a run on this replica. Its record and state are
// owned by the worker goroutine executing it; other goroutines only cancel
// it and wait on done.
type run struct {
	s       *Server
	log     *slog.Logger
	spec    *baagentv1.RunSpec
	attempt int // delivery of the work item (1 for the first)

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	// Owned by the executing goroutine.
	rec     *baagentv1.Run
	pub     *publisher
	metrics *convMetrics
	skills  skillStack
	models  map[string]*baagentv1.ModelInfo // GetModelInfo answers, by model
	// toolsSent is the tools fingerprint this execution last sent with its
	// schemas to the context service (see buildWindow).
	toolsSent string
	doom      doomDetector

	// Checkpoint state; cpMu serialises writes (from parallel tool calls,
	// and a write in the background, which holds it until it is done).
	cpMu   sync.Mutex
	cps    *checkpointStore
	cpRev  uint64
	cp     *checkpoint // the last state written
	cpErr  error       // a failed write: every later one fails too
	resume *checkpoint // the checkpoint this execution resumed from
	// cur is the step in progress once the model has answered.
	cur *stepState
	// wait is the question the run waits on or has just had answered;
	// paused says the run stops here to wait (outcomeWaiting).
	wait   *waitState
	paused bool
	// workSeq is the stream sequence of the work item being executed.
	workSeq uint64
	// span is this execution's span (nil without tracing); traceparent
	// its W3C form when it is sampled, for events and checkpoints.
	span        trace.Span
	traceparent string
}

func newRun(s *Server, rec *baagentv1.Run, spec *baagentv1.RunSpec) *run {
	ctx, cancel := context.WithCancelCause(s.base)
	return &run{
		s:       s,
		log:     s.log.With("tenant", rec.GetTenant(), "run_id", rec.GetRunId()),
		spec:    spec,
		attempt: 1,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		rec:     rec,
		models:  map[string]*baagentv1.ModelInfo{},
	}
}

// execute runs the loop from the run's checkpoint to its end (or to a wait
// for input, a shutdown or the loss of the run to another replica).
func (r *run) execute() outcome {
	defer close(r.done)
	defer r.s.forget(r.rec.GetRunId())
	defer r.cancel(nil)
	defer r.awaitCheckpoints() // no write outlives the execution

	r.s.metrics.runsActive.Inc()
	defer r.s.metrics.runsActive.Dec()

	terminal, err := r.prepare()
	switch {
	case errors.Is(err, errLostRun):
		r.log.Info("run taken over by another replica")
		return outcomeLost
	case err != nil && r.ctx.Err() == nil:
		r.log.Warn("run cannot be resumed now; handed back to the queue", "error", err)
		return outcomeHandedBack
	case err != nil:
		return r.interrupted(err)
	case terminal != nil:
		// The run had ended (its terminal event is stored) before the
		// replica that ended it could record it.
		r.record(terminal)
		return outcomeEnded
	}

	var answer string
	if r.ctx.Err() == nil {
		answer, err = r.loop()
	} else {
		err = context.Cause(r.ctx)
	}
	if err == nil && r.paused {
		return outcomeWaiting
	}
	if o, ok := r.stopsHere(err); ok {
		return o
	}
	r.finish(answer, err)
	return outcomeEnded
}

// stopsHere reports whether err ends this execution without ending the
// run: the run was lost to another replica, or the replica shuts down (the
// run is handed back and resumes elsewhere from its checkpoint).
func (r *run) stopsHere(err error) (outcome, bool) {
	cause := context.Cause(r.ctx)
	switch {
	case errors.Is(err, errLostRun) || errors.Is(cause, errLostRun):
		r.log.Info("run taken over by another replica; stopping here")
		return outcomeLost, true
	case errors.Is(err, errShutdown) || errors.Is(cause, errShutdown):
		r.log.Info("replica shutting down; run handed back to the queue", "step", r.rec.GetStep())
		r.flushQuietly()
		return outcomeHandedBack, true
	}
	return 0, false
}

// interrupted handles a run stopped while it was being prepared.
func (r *run) interrupted(err error) outcome {
	if o, ok := r.stopsHere(err); ok {
		return o
	}
	r.finish("", err)
	return outcomeEnded
}

func (r *run) flushQuietly() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	_ = r.pub.flush(ctx)
}

// prepare opens the publisher and the checkpoint, repairs the event tail a
// dead replica may have left, and claims the run with a fenced checkpoint
// write. It returns the terminal event when the run had already ended.
func (r *run) prepare() (*baagentv1.Event, error) {
	ctx := r.ctx
	pub, err := newPublisher(r.s.opts.JetStream, r.rec)
	if err != nil { // the ids were validated at the edge; this is a bug
		return nil, err
	}
	pub.traceparent = r.traceparent
	r.pub = pub
	cps, err := r.s.checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	r.cps = cps
	cp, rev, err := cps.load(ctx, r.rec.GetTenant(), r.rec.GetRunId())
	if err != nil {
		return nil, err
	}
	r.cpRev = rev
	r.linkPrevious(cp)
	r.metrics = newConvMetrics(r.rec.GetConversationId(), time.Now())
	if cp != nil || r.attempt > 1 || r.rec.GetState() != baagentv1.RunState_RUN_STATE_QUEUED {
		terminal, err := r.resumeEvents(ctx, cp)
		if err != nil || terminal != nil {
			return terminal, err
		}
	}
	if cp == nil {
		cp = &checkpoint{Kind: cpStart}
	} else if err := r.restore(cp); err != nil {
		return nil, err
	}
	r.resume = cp
	if cp.Kind != cpStart || cp.Started {
		r.s.metrics.resumed.Inc()
	}
	// Claim: a fenced write of the same state under this replica's name.
	return nil, r.claim(cp)
}

// restore loads the run's state from cp.
func (r *run) restore(cp *checkpoint) error {
	r.rec.Step = cp.Step
	if len(cp.Metrics) > 0 {
		m, err := unmarshalProto[baagentv1.ConversationMetrics](cp.Metrics)
		if err != nil {
			return err
		}
		r.metrics = &convMetrics{m: m}
	}
	for _, f := range cp.Skills {
		mod, err := unmarshalProto[baagentv1.ContextModifier](f.Modifier)
		if err != nil {
			return err
		}
		r.skills.push(activation{name: f.Name, id: f.ID, modifier: mod})
	}
	r.doom.restore(cp.Calls)
	r.log.Info("resuming run from its checkpoint", "checkpoint", cp.Kind, "step", cp.Step, "last_seq", r.pub.lastSeq(), "previous_owner", cp.Owner, "attempt", r.attempt)
	return nil
}

// claim rewrites cp under this replica's name (fenced): from here on a
// replica that executed the run before fails its next checkpoint write.
// Every event up to the publisher's position is stored by now (the outbox
// was published again), so the claim holds no outbox.
func (r *run) claim(cp *checkpoint) error {
	c := *cp
	c.Owner, c.Attempt, c.At, c.Span = r.s.opts.Replica, r.attempt, time.Now(), r.traceparent
	c.LastSeq, c.LastPos = r.pub.position()
	c.Outbox = nil
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	return r.store(&c)
}

// maxOutboxBytes bounds the unconfirmed events a checkpoint carries; with
// more, the checkpoint waits for their acks instead.
const maxOutboxBytes = 128 << 10

// checkpoint stores the run's state as kind: step, skills, metrics,
// doom-loop window, the step in progress (model response, tool records)
// and the wait. It does not wait for the acks of the events emitted so
// far: it records the last confirmed one and carries the others (the
// outbox), which a resuming replica publishes again if the stream lacks
// them. It fails with errLostRun when another replica wrote since.
func (r *run) checkpoint(kind string) error {
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	cp, err := r.snapshot(kind)
	if err != nil {
		return err
	}
	return r.store(cp)
}

// pendingWrite is a checkpoint being written in the background.
type pendingWrite struct {
	done chan struct{}
	err  error
}

// wait returns once the checkpoint is stored (or failed); a nil
// pendingWrite is a checkpoint already stored.
func (w *pendingWrite) wait() error {
	if w == nil {
		return nil
	}
	<-w.done
	return w.err
}

// checkpointAsync takes the checkpoint now and stores it in the background,
// so that work which does not depend on it (a read-only tool call) starts
// at once. Checkpoints stay in order: the next one waits for this write
// (cpMu is held until it is done), and a failed write fails every later
// one. The caller must wait on the result before anything that depends on
// the checkpoint; the run waits for it before it ends (awaitCheckpoints).
func (r *run) checkpointAsync(kind string) *pendingWrite {
	w := &pendingWrite{done: make(chan struct{})}
	r.cpMu.Lock()
	cp, err := r.snapshot(kind)
	if err != nil {
		r.cpMu.Unlock()
		w.err = err
		close(w.done)
		return w
	}
	go func() {
		defer close(w.done)
		defer r.cpMu.Unlock()
		w.err = r.store(cp)
	}()
	return w
}

// awaitCheckpoints waits until no checkpoint write is in flight.
func (r *run) awaitCheckpoints() {
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
}

// snapshot builds the checkpoint of the run's current state; cpMu is held.
func (r *run) snapshot(kind string) (*checkpoint, error) {
	if r.cpErr != nil {
		return nil, r.cpErr
	}
	now := time.Now()
	cp := &checkpoint{
		Kind:    kind,
		Owner:   r.s.opts.Replica,
		Attempt: r.attempt,
		At:      now,
		Step:    r.rec.GetStep(),
		Started: true,
		Metrics: marshalProto(r.metrics.snapshot(now, false)),
		Calls:   r.doom.window(),
		Wait:    r.wait,
		Span:    r.traceparent,
	}
	var size int
	cp.LastSeq, cp.LastPos, cp.Outbox, size = r.pub.unconfirmed()
	if size > maxOutboxBytes {
		if err := r.flush(); err != nil {
			return nil, err
		}
		cp.LastSeq, cp.LastPos = r.pub.position()
		cp.Outbox = nil
	}
	for _, f := range r.skills.frames {
		cp.Skills = append(cp.Skills, skillFrame{Name: f.name, ID: f.id, Modifier: marshalProto(f.modifier)})
	}
	if st := r.cur; st != nil {
		cp.Assistant, cp.ModelMs = marshalProto(st.msg), st.modelMs
		st.mu.Lock()
		cp.Tools = append([]toolRecord(nil), st.records...)
		st.mu.Unlock()
	}
	return cp, nil
}

// store writes cp at the revision this replica last wrote; cpMu is held.
// A failure is kept: no later checkpoint may be written over the gap.
func (r *run) store(cp *checkpoint) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	rev, err := r.cps.write(ctx, r.rec.GetTenant(), r.rec.GetRunId(), cp, r.cpRev)
	if err != nil {
		if errors.Is(err, errLostRun) {
			r.cancel(errLostRun)
			r.cpErr = errLostRun
			return errLostRun
		}
		r.cpErr = newRunError(CodeCheckpointUnavailable, err, "the run's checkpoint cannot be stored: %v", err)
		return r.cpErr
	}
	r.cpRev, r.cp = rev, cp
	return nil
}

// record stores the final state a stored terminal event describes.
func (r *run) record(ev *baagentv1.Event) {
	r.awaitCheckpoints() // none may land after the delete below
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	endRecord(r.rec, ev)
	if r.rec.FinishedAt == nil { // the terminal event was not published
		r.rec.FinishedAt = timestamppb.Now()
	}
	r.save(ctx)
	r.s.subAgentEnded(ctx, r.rec) // a parent waiting for this run goes on
	if err := r.cps.delete(ctx, r.rec.GetTenant(), r.rec.GetRunId()); err != nil {
		r.log.Warn("checkpoint of a finished run not deleted (it expires with the bucket's TTL)", "error", err)
	}
}

// endRecord sets what a run's terminal event says in its record: the final
// state, answer or error, and when it ended.
func endRecord(rec *baagentv1.Run, ev *baagentv1.Event) {
	switch p := ev.GetPayload().(type) {
	case *baagentv1.Event_Complete:
		rec.State = baagentv1.RunState_RUN_STATE_COMPLETED
		rec.FinalAnswer = p.Complete.GetContent()
		rec.Metrics = p.Complete.GetMetrics()
	case *baagentv1.Event_Cancelled:
		rec.State = baagentv1.RunState_RUN_STATE_CANCELLED
	case *baagentv1.Event_Error:
		rec.State = baagentv1.RunState_RUN_STATE_FAILED
		rec.Error = &baagentv1.RunError{Code: p.Error.GetCode(), Message: p.Error.GetMessage()}
	}
	rec.PendingInput = nil
	rec.FinishedAt = ev.GetTs()
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
		ev.Payload = &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: answer, Format: "markdown", Metrics: metrics}}
	case errors.As(err, &cc) || errors.As(context.Cause(r.ctx), &cc):
		outcome = "cancelled"
		ev.Payload = &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: cc.reason}}
	default:
		outcome = "failed"
		re := asRunError(err)
		ev.Payload = &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Code: re.code, Message: re.message}}
		r.log.Warn("run failed", "code", re.code, "error", re.message)
	}
	perr := r.pub.emitNow(ctx, ev)
	if errors.Is(perr, context.DeadlineExceeded) {
		// A flush cut short by its deadline (acks lost in a NATS restart,
		// then a reorder repair) gets one more bounded try, so the record
		// names every stored event.
		retry, cancelRetry := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
		perr = r.pub.flush(retry)
		cancelRetry()
	}
	if perr != nil {
		r.s.metrics.eventFailures.Inc()
		r.log.Error("terminal event not published", "type", runevent.Type(ev), "error", perr)
	}
	r.rec.Metrics = metrics
	r.record(ev)
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

// hold numbers an event of the current step without publishing it until
// the next flush (see publisher.hold).
func (r *run) hold(ev *baagentv1.Event) error {
	ev.Step = r.rec.GetStep()
	return r.eventsErr(r.pub.hold(r.ctx, ev))
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
