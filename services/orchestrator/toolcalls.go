package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// runTools answers the step's tool calls, in four phases:
//
//  1. restore: calls with a result in the step's records (a resumed step)
//     keep it;
//  2. beforeRun gates, in the model's order: a doom-loop intervention,
//     ask_clarification, ask_decision are asked (pausing the run) or
//     answered;
//  3. run: the other calls run on the toolrunner in parallel (skill
//     activations one at a time, each nesting in the previous);
//  4. afterRun gates: task calls start their sub-agents and wait for their
//     reports, and calls the toolrunner refused for want of the user's
//     approval are asked about.
//
// Every result is published (observe) and checkpointed as it arrives. Only
// read-only calls start before the step's LLM_COMPLETE checkpoint is
// stored: a call with side effects must be on record before it runs. It
// returns the tool messages in the model's order followed by any injected
// skill messages, and the longest tool duration. With r.paused set, the
// run waits.
func (r *run) runTools(ctx context.Context, st *stepState, ts *toolset) ([]*baagentv1.ChatMessage, time.Duration, error) {
	results, err := restoredResults(st)
	if err != nil {
		return nil, 0, err
	}
	caller := r.skills.CallerID()
	if paused, err := r.gateCalls(ctx, beforeRun, st, ts, caller, results); err != nil || paused {
		return nil, 0, err
	}
	if err := r.runCalls(ctx, st, ts, caller, results); err != nil {
		return nil, 0, err
	}
	if paused, err := r.gateCalls(ctx, afterRun, st, ts, caller, results); err != nil || paused {
		return nil, 0, err
	}
	msgs, longest, err := r.toolMessages(results)
	return msgs, longest, err
}

// restoredResults returns the results the step's records hold, by call.
func restoredResults(st *stepState) ([]*callResult, error) {
	results := make([]*callResult, len(st.msg.GetToolCalls()))
	for i, rec := range st.records {
		if !rec.Finished() {
			continue
		}
		res, err := restoredResult(rec)
		if err != nil {
			return nil, newRunError(CodeInternal, err, "the run's checkpoint cannot be read: %v", err)
		}
		results[i] = res
	}
	return results, nil
}

// runCalls runs the calls still without a result on the toolrunner, in
// parallel, and the skill activations one at a time, leaving the calls an
// afterRun gate settles. A call the toolrunner refuses for want of the
// user's approval is marked for the permission gate.
func (r *run) runCalls(ctx context.Context, st *stepState, ts *toolset, caller string, results []*callResult) error {
	calls := st.msg.GetToolCalls()
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	finish := func(i int, res *callResult, err error) {
		if err == nil && res.approval {
			st.setApproval(i, approvalPending)
			return
		}
		if err == nil {
			err = r.complete(st, i, res)
		}
		if err != nil {
			cancel(err)
			return
		}
		results[i] = res
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		if results[i] != nil || ts.answersSkillCall(c) {
			continue
		}
		rec := st.record(i)
		if settledAfterRun(gateCall{i: i, call: c, rec: rec, st: st, ts: ts, caller: caller}) {
			continue
		}
		readOnly := ts.defs[c.GetName()].GetReadOnly()
		wg.Go(func() {
			if !readOnly {
				if err := st.durable.wait(); err != nil {
					cancel(err)
					return
				}
			}
			res, err := r.invoke(tctx, c, ts, caller, st.usage, rec.IdempotencyKey, rec.Approval == hitl.LabelAllow)
			finish(i, res, err)
		})
	}
	// Skill calls run one at a time in the model's order, so that a read
	// after an activation in the same step reads the skill just activated.
	for i, c := range calls {
		if !ts.answersSkillCall(c) || results[i] != nil || tctx.Err() != nil {
			continue
		}
		if err := st.durable.wait(); err != nil { // an activation changes the run's state
			cancel(err)
			break
		}
		var res *callResult
		var err error
		if c.GetName() == SkillToolName {
			res, err = r.activateSkill(tctx, i, c)
		} else {
			res, err = r.readSkill(tctx, c)
		}
		finish(i, res, err)
	}
	wg.Wait()
	return context.Cause(tctx)
}

// answersSkillCall reports whether the run answers c itself as a skill
// call: the skill meta-tool, or skill_read while it is offered.
func (ts *toolset) answersSkillCall(c *baagentv1.ToolCall) bool {
	return (ts.skill && c.GetName() == SkillToolName) || (ts.read && c.GetName() == SkillReadToolName)
}

// settledAfterRun reports whether an afterRun gate settles the call, which
// therefore does not run with the others.
func settledAfterRun(c gateCall) bool {
	for _, g := range afterRun {
		if g.applies(c) {
			return true
		}
	}
	return false
}

// toolMessages returns the step's tool messages in the model's order,
// followed by the messages skill activations inject, and the longest tool
// duration.
func (r *run) toolMessages(results []*callResult) ([]*baagentv1.ChatMessage, time.Duration, error) {
	var longest time.Duration
	msgs := make([]*baagentv1.ChatMessage, 0, len(results))
	var injected []*baagentv1.ChatMessage
	for i, res := range results {
		if res == nil { // every call is settled by now: a bug
			return nil, 0, newRunError(CodeInternal, nil, "tool call %d of step %d has no result", i, r.rec.GetStep())
		}
		// Ids derive from position, not from the model's tool_call_id,
		// which need not be a valid message id.
		res.msg.Id = fmt.Sprintf("%s:s%d:tool:%d", r.rec.GetRunId(), r.rec.GetStep(), i)
		for j, m := range res.inject {
			m.Id = fmt.Sprintf("%s:s%d:skill:%d:%d", r.rec.GetRunId(), r.rec.GetStep(), i, j)
		}
		msgs = append(msgs, res.msg)
		injected = append(injected, res.inject...)
		longest = max(longest, time.Duration(res.observe.GetDurationMs()*float64(time.Millisecond)))
	}
	return append(msgs, injected...), longest, nil
}

// complete publishes a call's observation, records its result and
// checkpoints it (TOOL_COMPLETE) in the background. The write queues behind
// the step's LLM_COMPLETE (checkpoints are written in order), so once every
// call is complete the model's response is stored and the step's messages
// may enter the history. Nothing waits for TOOL_COMPLETE itself: a replica
// resuming without it invokes the call again with its idempotency key (a
// write that ran is answered from the toolrunner's record) and the history
// append is idempotent by message id; a failed write fails the run's next
// checkpoint.
func (r *run) complete(st *stepState, i int, res *callResult) error {
	if err := r.observed(res); err != nil {
		return err
	}
	st.mu.Lock()
	callResultRecord(&st.records[i], res)
	st.mu.Unlock()
	r.checkpointAsync(checkpoint.KindToolComplete)
	return nil
}

func (st *stepState) record(i int) checkpoint.ToolRecord {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.records[i]
}

func (st *stepState) setApproval(i int, v string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.records[i].Approval = v
}

func (st *stepState) setDecision(i int, v string, timedOut bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.records[i].Decision = v
	st.records[i].DecisionTimedOut = timedOut
}
