package orchestrator

import (
	"context"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// taskGate answers a task call (the toolrunner never sees one): it starts
// (or finds again) the child run and makes the run wait for it, or, once
// the child has ended (or the wait is past its deadline), turns the
// child's outcome into the observation. Every task call of the step still
// without a result is started the first time, so independent sub-agents
// work in parallel.
type taskGate struct{}

func (taskGate) applies(c gateCall) bool { return isTaskCall(c.ts, c.call) }

// isTaskCall reports whether c is a call of the task tool offered in ts.
func isTaskCall(ts *toolset, c *baagentv1.ToolCall) bool {
	return ts.task && c.GetName() == TaskToolName
}

func (taskGate) check(ctx context.Context, r *run, c gateCall) (verdict, error) {
	res, err := r.delegate(ctx, c.st, c.i, c.call, c.ts)
	switch {
	case err != nil:
		return verdict{}, err
	case r.paused:
		return verdict{kind: verdictWaiting}, nil
	}
	return answeredBy(res), nil
}

// delegate starts the step's task calls from call i on and waits for
// call i's child, or settles call i once its wait is due.
func (r *run) delegate(ctx context.Context, st *stepState, i int, c *baagentv1.ToolCall, ts *toolset) (*callResult, error) {
	// Sub-agents append to this run's stream from now on (subagent_events.go).
	if err := r.fence(); err != nil {
		return nil, err
	}
	if w := r.due(i, hitl.KindSubAgent); w != nil {
		return r.settleTask(ctx, c, w)
	}
	// Side effects: the model's response must be on record first.
	if err := st.durable.wait(); err != nil {
		return nil, err
	}
	var child *baagentv1.Run
	for j, cj := range st.msg.GetToolCalls() {
		if j < i || !isTaskCall(ts, cj) || st.record(j).Finished() {
			continue
		}
		rec, res, err := r.startTask(ctx, st, j, cj)
		if err != nil {
			return nil, err
		}
		if j == i {
			if res != nil {
				return res, nil
			}
			child = rec
		}
	}
	switch {
	case child == nil: // call i is not a task call still to answer: a bug
		return nil, newRunError(CodeInternal, nil, "task call %d of step %d has no sub-agent run", i, r.rec.GetStep())
	case isFinished(child.GetState()):
		return r.taskResult(c, time.Now(), child), nil
	}
	return r.awaitTask(ctx, i, c, child)
}
