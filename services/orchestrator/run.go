package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/convmetrics"
	"github.com/baagent/baagent/services/orchestrator/internal/doomloop"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/mirror"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
	"github.com/baagent/baagent/services/orchestrator/internal/skillstack"
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
	pub     *publish.Publisher
	metrics *convmetrics.Accumulator
	skills  skillstack.Stack
	// roundReady says the stack is this round's: restored from the
	// previous round (beginRound) or from the run's checkpoint. Only then
	// is it saved for the next round.
	roundReady bool
	models     map[string]*baagentv1.ModelInfo // GetModelInfo answers, by model
	// toolsSent is the tools fingerprint this execution last sent with its
	// schemas to the context service (see buildWindow).
	toolsSent string
	doom      doomloop.Detector
	// mirror copies a sub-agent run's events into its parent's stream.
	mirror *mirror.Mirror
	// plan is the run's planning state (plan.go).
	plan planning

	// Checkpoint state; cpMu serialises writes (from parallel tool calls,
	// and a write in the background, which holds it until it is done).
	cpMu   sync.Mutex
	cps    *checkpoint.Store
	cpRev  uint64
	cp     *checkpoint.State // the last state written
	cpErr  error             // a failed write: every later one fails too
	resume *checkpoint.State // the checkpoint this execution resumed from
	// cur is the step in progress once the model has answered.
	cur *stepState
	// wait is the question the run waits on or has just had answered;
	// paused says the run stops here to wait (outcomeWaiting).
	wait   *hitl.Wait
	paused bool
	// workSeq is the stream sequence of the work item being executed.
	workSeq uint64
	// span is this execution's span (nil without tracing); traceparent
	// its W3C form when it is sampled, for events and checkpoints.
	span        trace.Span
	traceparent string
	// budget is the run's budget state (budgets.go).
	budget runBudget
	// notes are the key observations of the run's episode (memory.go).
	notes episodeNotes
	// pattern is the interaction pattern matched at the start and the
	// user's decision about it (patterns.go); nil until matched.
	pattern *checkpoint.Pattern
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
	if err == nil {
		var stop func()
		stop, err = r.startSubAgentEvents()
		defer stop()
	}
	switch {
	case errors.Is(err, checkpoint.ErrLostRun):
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
	case errors.Is(err, checkpoint.ErrLostRun) || errors.Is(cause, checkpoint.ErrLostRun):
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
	_ = r.pub.Flush(ctx)
}

// prepare opens the publisher and the checkpoint, repairs the event tail a
// dead replica may have left, and claims the run with a fenced checkpoint
// write. It returns the terminal event when the run had already ended.
func (r *run) prepare() (*baagentv1.Event, error) {
	ctx := r.ctx
	pub, err := publish.New(r.s.opts.JetStream, r.rec, r.traceparent)
	if err != nil { // the ids were validated at the edge; this is a bug
		return nil, err
	}
	r.pub = pub
	cps, err := r.s.checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	r.cps = cps
	cp, rev, err := cps.Load(ctx, r.rec.GetTenant(), r.rec.GetRunId())
	if err != nil {
		return nil, err
	}
	r.cpRev = rev
	r.linkPrevious(cp)
	r.metrics = convmetrics.New(r.rec.GetConversationId(), time.Now())
	if cp != nil || r.attempt > 1 || r.rec.GetState() != baagentv1.RunState_RUN_STATE_QUEUED {
		terminal, err := r.resumeEvents(ctx, cp)
		if err != nil || terminal != nil {
			return terminal, err
		}
	}
	if cp == nil {
		cp = &checkpoint.State{Kind: checkpoint.KindStart}
	} else if err := r.restore(cp); err != nil {
		return nil, err
	}
	r.resume = cp
	if cp.Kind != checkpoint.KindStart || cp.Started {
		r.s.metrics.resumed.Inc()
	}
	// Claim: a fenced write of the same state under this replica's name.
	return nil, r.claim(cp)
}

// restore loads the run's state from cp.
func (r *run) restore(cp *checkpoint.State) error {
	r.rec.Step = cp.Step
	if len(cp.Metrics) > 0 {
		m, err := protoenc.Unmarshal[baagentv1.ConversationMetrics](cp.Metrics)
		if err != nil {
			return err
		}
		r.metrics = convmetrics.Restore(m)
	}
	for _, f := range cp.Skills {
		mod, err := protoenc.Unmarshal[baagentv1.ContextModifier](f.Modifier)
		if err != nil {
			return err
		}
		r.skills.Push(skillstack.Activation{Name: f.Name, ID: f.ID, Revision: f.Revision, Modifier: mod})
	}
	r.roundReady = cp.Started
	r.doom.Restore(cp.Calls)
	r.notes.restore(cp.MemoryNotes)
	r.restorePattern(cp.Pattern)
	r.rec.QueryComplexity, r.rec.ComplexitySignals = baagentv1.QueryComplexity(cp.Complexity), cp.ComplexitySignals
	if err := r.restorePlan(cp.Plan); err != nil {
		return err
	}
	r.log.Info("resuming run from its checkpoint", "checkpoint", cp.Kind, "step", cp.Step, "last_seq", r.pub.LastSeq(), "previous_owner", cp.Owner, "attempt", r.attempt)
	return nil
}

// claim rewrites cp under this replica's name (fenced): from here on a
// replica that executed the run before fails its next checkpoint write.
// Every event up to the publisher's position is stored by now (the outbox
// was published again), so the claim holds no outbox.
func (r *run) claim(cp *checkpoint.State) error {
	c := *cp
	c.Owner, c.Attempt, c.At, c.Span = r.s.opts.Replica, r.attempt, time.Now(), r.traceparent
	c.LastSeq, c.LastPos = r.pub.Position()
	c.Outbox = nil
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	return r.store(&c)
}
