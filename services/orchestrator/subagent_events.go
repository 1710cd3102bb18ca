package orchestrator

import (
	"context"
	"time"

	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/mirror"
)

// Sub-agent events on the parent's stream (docs/concepts/events.md): the
// execution of a sub-agent run copies its events into its parent's stream
// (internal/mirror), and a run that delegates publishes fenced
// (internal/publish) from the moment it may have a sub-agent working, so
// that both append to the parent's stream with contiguous seqs.

// startSubAgentEvents starts, once the run is prepared, the mirror of a
// sub-agent run, and fences the publisher of a run resumed in a step that
// delegates. The returned func stops the mirror after it has copied every
// event this execution stored (bounded by finalizeTimeout).
func (r *run) startSubAgentEvents() (stop func(), err error) {
	if r.resume != nil && delegates(r.resume) {
		if err := r.fence(); err != nil {
			return func() {}, err
		}
	}
	if _, child := r.subAgent(); !child {
		return func() {}, nil
	}
	resumed := r.attempt > 1 || r.resume == nil || r.resume.Kind != checkpoint.KindStart || r.resume.Started
	m, err := mirror.Start(r.ctx, mirror.Config{
		JetStream: r.s.opts.JetStream,
		Tenant:    r.rec.GetTenant(),
		Parent:    r.rec.GetParentRunId(),
		Child:     r.rec.GetRunId(),
		Resumed:   resumed,
		Since:     r.rec.GetCreatedAt().AsTime(),
		Log:       r.log,
	})
	if err != nil {
		// The run goes on; a later execution copies what this one could not.
		r.log.Warn("sub-agent events not mirrored into the parent's stream", "parent_run_id", r.rec.GetParentRunId(), "error", err)
		return func() {}, nil
	}
	r.mirror = m
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
		defer cancel()
		r.drainMirror(ctx)
		m.Stop()
	}, nil
}

// drainMirror waits until every event of the run stored so far is in its
// parent's stream: before the parent is woken by the run's end, and before
// the execution lets the run go.
func (r *run) drainMirror(ctx context.Context) {
	if r.mirror == nil || r.pub == nil {
		return
	}
	began := time.Now()
	if err := r.mirror.Wait(ctx, r.pub.LastSeq()); err != nil {
		r.log.Warn("sub-agent events not all mirrored into the parent's stream; the next execution copies the rest", "error", err)
		return
	}
	if d := time.Since(began); d > time.Second {
		r.log.Info("waited for the sub-agent's events to reach the parent's stream", "duration", d)
	}
}

// fence makes the run's publisher fenced: a sub-agent of it may append to
// its stream from now on.
func (r *run) fence() error {
	return r.eventsErr(r.pub.Fence(r.ctx))
}

// delegates reports whether the checkpoint's step has a task call: its
// sub-agents may be working.
func delegates(cp *checkpoint.State) bool {
	for _, t := range cp.Tools {
		if t.ToolName == TaskToolName {
			return true
		}
	}
	return false
}
