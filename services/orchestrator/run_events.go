package orchestrator

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// emit publishes an event of the current step (pipelined: its ack is
// awaited by the next flush). A publish that fails after retries ends the
// run: clients could no longer follow it.
func (r *run) emit(ev *baagentv1.Event) error {
	ev.Step = r.rec.GetStep()
	if ev.PlanStep == 0 {
		ev.PlanStep = r.planStep()
	}
	return r.eventsErr(r.pub.Emit(r.ctx, ev))
}

// hold numbers an event of the current step without publishing it until
// the next flush (see publisher.hold).
func (r *run) hold(ev *baagentv1.Event) error {
	ev.Step = r.rec.GetStep()
	if ev.PlanStep == 0 {
		ev.PlanStep = r.planStep()
	}
	return r.eventsErr(r.pub.Hold(r.ctx, ev))
}

// flush waits until every event emitted so far is stored.
func (r *run) flush() error {
	return r.eventsErr(r.pub.Flush(r.ctx))
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
