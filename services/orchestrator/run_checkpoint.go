package orchestrator

import (
	"context"
	"errors"
	"time"

	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
)

// maxOutboxBytes bounds the unconfirmed events a checkpoint carries; with
// more, the checkpoint waits for their acks instead.
const maxOutboxBytes = 128 << 10

// checkpoint stores the run's state as kind: step, skills, metrics,
// doom-loop window, the step in progress (model response, tool records)
// and the wait. It does not wait for the acks of the events emitted so
// far: it records the last confirmed one and carries the others (the
// outbox), which a resuming replica publishes again if the stream lacks
// them. It fails with checkpoint.ErrLostRun when another replica wrote
// since.
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
	defer r.cpMu.Unlock() //nolint:gocritic // taking the lock is the wait
}

// snapshot builds the checkpoint of the run's current state; cpMu is held.
func (r *run) snapshot(kind string) (*checkpoint.State, error) {
	if r.cpErr != nil {
		return nil, r.cpErr
	}
	now := time.Now()
	cp := &checkpoint.State{
		Kind:    kind,
		Owner:   r.s.opts.Replica,
		Attempt: r.attempt,
		At:      now,
		Step:    r.rec.GetStep(),
		Started: true,
		Metrics: protoenc.Marshal(r.metrics.Snapshot(now, false)),
		Calls:   r.doom.Window(),

		MemoryNotes: r.checkpointNotes(),
		Wait:        r.wait,
		Span:        r.traceparent,

		Plan:              r.planCheckpoint(),
		Pattern:           r.patternCheckpoint(),
		Complexity:        int32(r.rec.GetQueryComplexity()),
		ComplexitySignals: r.rec.GetComplexitySignals(),
	}
	var size int
	cp.LastSeq, cp.LastPos, cp.Outbox, size = r.pub.Unconfirmed()
	if size > maxOutboxBytes {
		if err := r.flush(); err != nil {
			return nil, err
		}
		cp.LastSeq, cp.LastPos = r.pub.Position()
		cp.Outbox = nil
	}
	for _, f := range r.skills.Frames() {
		cp.Skills = append(cp.Skills, checkpoint.SkillFrame{Name: f.Name, ID: f.ID, Revision: f.Revision, Modifier: protoenc.Marshal(f.Modifier)})
	}
	if st := r.cur; st != nil {
		cp.Assistant, cp.ModelMs = protoenc.Marshal(st.msg), st.modelMs
		st.mu.Lock()
		cp.Tools = append([]checkpoint.ToolRecord(nil), st.records...)
		st.mu.Unlock()
	}
	return cp, nil
}

// store writes cp at the revision this replica last wrote; cpMu is held.
// A failure is kept: no later checkpoint may be written over the gap.
func (r *run) store(cp *checkpoint.State) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	rev, err := r.cps.Write(ctx, r.rec.GetTenant(), r.rec.GetRunId(), cp, r.cpRev)
	if err != nil {
		if errors.Is(err, checkpoint.ErrLostRun) {
			r.cancel(checkpoint.ErrLostRun)
			r.cpErr = checkpoint.ErrLostRun
			return checkpoint.ErrLostRun
		}
		r.cpErr = newRunError(CodeCheckpointUnavailable, err, "the run's checkpoint cannot be stored: %v", err)
		return r.cpErr
	}
	r.cpRev, r.cp = rev, cp
	return nil
}
