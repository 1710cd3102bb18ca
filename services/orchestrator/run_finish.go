package orchestrator

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// finish publishes the one terminal event and stores the final record. It
// works on a context detached from the run's (which may be cancelled) and
// bounded by finalizeTimeout.
func (r *run) finish(answer string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	now := time.Now()
	metrics := r.metrics.Snapshot(now, true)
	ev := &baagentv1.Event{Step: r.rec.GetStep()}
	outcome := "completed"
	var cc *cancelCause
	switch {
	case err == nil:
		ev.Payload = &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: answer, Format: "markdown", Metrics: metrics}}
		// Queued before the terminal event: a crash in between completes
		// the run again and queues it again, which is deduplicated.
		r.captureEpisode(ctx, answer)
	case errors.As(err, &cc) || errors.As(context.Cause(r.ctx), &cc):
		outcome = "cancelled"
		ev.Payload = &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: cc.reason}}
	default:
		outcome = "failed"
		re := asRunError(err)
		ev.Payload = &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Code: re.code, Message: re.message}}
		r.log.Warn("run failed", "code", re.code, "error", re.message)
	}
	// Queued before the terminal event, whatever the end (patterns_record.go).
	r.captureTrace(ev)
	// Saved before the terminal event: a client that starts the next round
	// on seeing it finds the stack.
	r.saveSkills(ctx)
	perr := r.pub.EmitNow(ctx, ev)
	if errors.Is(perr, context.DeadlineExceeded) {
		// A flush cut short by its deadline (acks lost in a NATS restart,
		// then a reorder repair) gets one more bounded try, so the record
		// names every stored event.
		retry, cancelRetry := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
		perr = r.pub.Flush(retry)
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

// record stores the final state a stored terminal event describes.
func (r *run) record(ev *baagentv1.Event) {
	r.awaitCheckpoints() // none may land after the delete below
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	endRecord(r.rec, ev)
	if r.rec.FinishedAt == nil { // the terminal event was not published
		r.rec.FinishedAt = timestamppb.Now()
	}
	// A parent that finds this run ended finds all its events mirrored.
	r.drainMirror(ctx)
	r.save(ctx)
	r.s.conversationActivity(ctx, r.rec)
	r.s.subAgentEnded(ctx, r.rec) // a parent waiting for this run goes on
	if err := r.cps.Delete(ctx, r.rec.GetTenant(), r.rec.GetRunId()); err != nil {
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

// save stores the current record with the seq of the last acknowledged
// event; a failure is logged, not fatal (events remain the source of truth
// for clients watching the run).
func (r *run) save(ctx context.Context) {
	r.rec.LastSeq = r.pub.LastSeq()
	store, err := r.s.runStore(ctx)
	if err == nil {
		err = store.Put(ctx, r.rec)
	}
	if err != nil {
		r.log.Warn("run record not saved", "state", r.rec.GetState().String(), "error", err)
	}
}
