package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// maxPermissionArgs bounds the arguments a permission_asked event quotes.
const maxPermissionArgs = 4 << 10

// waitingCall is the step's tool call a wait is about (nil if none).
func (r *run) waitingCall(w *waitState) *baagentv1.ToolCall {
	if r.cur == nil || w.CallIndex < 0 || w.CallIndex >= len(r.cur.msg.GetToolCalls()) {
		return nil
	}
	return r.cur.msg.GetToolCalls()[w.CallIndex]
}

// Error codes of observations about the user's decisions.
const (
	codeDoomLoopCorrect = "REPEATED_CALL"
	codePermissionDeny  = "PERMISSION_DENIED_BY_USER"
	// CodeDoomLoop ends a run stopped at a doom-loop intervention.
	CodeDoomLoop = "DOOM_LOOP"
)

// runTools answers the step's tool calls. Calls with a result in the
// step's records (a resumed step) keep it. Then, in the model's order, the
// calls that need the user — a doom-loop intervention, ask_clarification,
// ask_decision — are asked (pausing the run) or answered; then the other
// calls run on the toolrunner in parallel (skill activations one at a
// time, each nesting in the previous); then calls the toolrunner refused
// for want of the user's approval are asked about, and task calls start
// their sub-agents and wait for their reports. Every result is
// published (observe) and checkpointed as it arrives. Only read-only calls
// start before the step's LLM_COMPLETE checkpoint is stored: a call with
// side effects must be on record before it runs. It returns the tool
// messages in the model's order followed by any injected skill messages,
// and the longest tool duration. With r.paused set, the run waits.
func (r *run) runTools(ctx context.Context, st *stepState, ts *toolset) ([]*baagentv1.ChatMessage, time.Duration, error) {
	calls := st.msg.GetToolCalls()
	results := make([]*callResult, len(calls))
	for i, rec := range st.records {
		if !rec.finished() {
			continue
		}
		res, err := restoredResult(rec)
		if err != nil {
			return nil, 0, newRunError(CodeInternal, err, "the run's checkpoint cannot be read: %v", err)
		}
		results[i] = res
	}

	for i, c := range calls {
		if results[i] != nil {
			continue
		}
		rec := st.record(i)
		if (rec.Doom && rec.Decision == "") || slices.Contains(ts.ask, c.GetName()) {
			if err := st.durable.wait(); err != nil {
				return nil, 0, err
			}
		}
		if rec.Doom && rec.Decision == "" {
			res, err := r.doomGate(st, i, c)
			if err != nil || r.paused {
				return nil, 0, err
			}
			if res != nil {
				if err := r.complete(st, i, res); err != nil {
					return nil, 0, err
				}
				results[i] = res
				continue
			}
		}
		if slices.Contains(ts.ask, c.GetName()) {
			res, err := r.askGate(st, i, c)
			if err != nil || r.paused {
				return nil, 0, err
			}
			if err := r.complete(st, i, res); err != nil {
				return nil, 0, err
			}
			results[i] = res
		}
	}

	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	caller := r.skills.callerID()
	finish := func(i int, res *callResult, err error) {
		if err == nil && res.approval {
			st.setApproval(i, "asked")
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
		if results[i] != nil || (ts.skill && c.GetName() == SkillToolName) || isTaskCall(ts, c) || st.record(i).Approval == "asked" {
			continue
		}
		rec := st.record(i)
		readOnly := ts.defs[c.GetName()].GetReadOnly()
		wg.Go(func() {
			if !readOnly {
				if err := st.durable.wait(); err != nil {
					cancel(err)
					return
				}
			}
			res, err := r.invoke(tctx, c, ts, caller, st.usage, rec.IdempotencyKey, rec.Approval == labelAllow)
			finish(i, res, err)
		})
	}
	for i, c := range calls {
		if ts.skill && c.GetName() == SkillToolName && results[i] == nil && tctx.Err() == nil {
			if err := st.durable.wait(); err != nil { // an activation changes the run's state
				cancel(err)
				break
			}
			res, err := r.activateSkill(tctx, i, c)
			finish(i, res, err)
		}
	}
	wg.Wait()
	if err := context.Cause(tctx); err != nil {
		return nil, 0, err
	}

	for i, c := range calls {
		if results[i] != nil {
			continue
		}
		gate := r.permissionGate
		if isTaskCall(ts, c) {
			gate = r.taskGate
		}
		res, err := gate(ctx, st, i, c, ts, caller)
		if err != nil || r.paused {
			return nil, 0, err
		}
		if err := r.complete(st, i, res); err != nil {
			return nil, 0, err
		}
		results[i] = res
	}

	var longest time.Duration
	msgs := make([]*baagentv1.ChatMessage, 0, len(calls))
	var injected []*baagentv1.ChatMessage
	for i, res := range results {
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
	r.checkpointAsync(cpToolComplete)
	return nil
}

func (st *stepState) record(i int) toolRecord {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.records[i]
}

func (st *stepState) setApproval(i int, v string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.records[i].Approval = v
}

func (st *stepState) setDecision(i int, v string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.records[i].Decision = v
}

// pause makes the run wait on w, asked about the step's call i.
func (r *run) pause(i int, w *waitState) error {
	w.CallIndex = i
	w.WorkSeq = r.workSeq
	p := w.pending()
	ev := &baagentv1.Event{}
	switch c := r.waitingCall(w); {
	case p.GetClarification() != nil:
		ev.Payload = &baagentv1.Event_ClarificationAsked{ClarificationAsked: p.GetClarification()}
	case w.Kind == waitPermission:
		args := c.GetArguments()
		if len(args) > maxPermissionArgs {
			args = strings.ToValidUTF8(args[:maxPermissionArgs], "") + "…"
		}
		ev.Payload = &baagentv1.Event_PermissionAsked{PermissionAsked: &baagentv1.PermissionAskedPayload{
			ToolCallId: c.GetId(), ToolName: c.GetName(), Arguments: args, Decision: p.GetDecision(),
		}}
	default:
		ev.Payload = &baagentv1.Event_DecisionAsked{DecisionAsked: p.GetDecision()}
	}
	// The question is published only once the run is on record as
	// waiting (checkpoint and record), so a client that answers the moment
	// it sees the question finds the run ready for the answer. Held until
	// then, it rides in the checkpoint's outbox: a replica that dies here
	// is replaced by one that publishes it.
	if err := r.hold(ev); err != nil {
		return err
	}
	r.wait, r.paused = w, true
	r.rec.State = baagentv1.RunState_RUN_STATE_WAITING_INPUT
	r.rec.PendingInput = p
	if err := r.checkpoint(cpWaitingInput); err != nil {
		return err
	}
	r.save(r.ctx)
	// Stored before the run lets go of its work item, and named by the
	// record's last_seq.
	if err := r.flush(); err != nil {
		return err
	}
	r.save(r.ctx)
	r.s.metrics.waits.WithLabelValues(w.Kind).Inc()
	r.log.Info("run waits for input", "kind", w.Kind, "input_id", w.ID, "deadline", w.Deadline)
	return nil
}

// due returns the wait for the step's call i of kind, when it can be
// settled now (answered or past its deadline); nil when the question must
// (still) be asked.
func (r *run) due(i int, kinds ...string) *waitState {
	w := r.wait
	if w == nil || w.CallIndex != i {
		return nil
	}
	for _, k := range kinds {
		if w.Kind == k {
			r.wait = nil
			return w
		}
	}
	return nil
}

// answered publishes the answered event of w.
func (r *run) answered(w *waitState, answer string, timedOut bool) error {
	ev := &baagentv1.Event{}
	switch {
	case w.Kind == waitClarification:
		ev.Payload = &baagentv1.Event_ClarificationAnswered{ClarificationAnswered: &baagentv1.ClarificationAnsweredPayload{QuestionId: w.ID, Answer: answer, TimedOut: timedOut}}
	case w.Kind == waitPermission:
		c := r.waitingCall(w)
		ev.Payload = &baagentv1.Event_PermissionReplied{PermissionReplied: &baagentv1.PermissionRepliedPayload{
			ToolCallId: c.GetId(), ToolName: c.GetName(), DecisionId: w.ID, Reply: answer, TimedOut: timedOut,
		}}
	default:
		var sel []string
		if w.Answer != nil {
			sel = w.Answer.Selected
		}
		ev.Payload = &baagentv1.Event_DecisionAnswered{DecisionAnswered: &baagentv1.DecisionAnsweredPayload{DecisionId: w.ID, Answer: answer, SelectedOptions: sel, TimedOut: timedOut}}
	}
	return r.emit(ev)
}

// doomGate handles a call that completes a doom loop: it asks the user
// (stop / continue / correct) or applies the answer. It returns a result
// for `correct`, nil for `continue` (the call runs), and a run error for
// `stop` or no answer.
func (r *run) doomGate(st *stepState, i int, c *baagentv1.ToolCall) (*callResult, error) {
	step := r.rec.GetStep()
	w := r.due(i, waitDoomLoop)
	if w == nil {
		now := time.Now()
		id := fmt.Sprintf("doom_s%d_c%d", step, i)
		args, _ := parseArgs(c.GetArguments())
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_DoomLoopDetected{DoomLoopDetected: &baagentv1.DoomLoopDetectedPayload{
			ToolName: c.GetName(), ToolInput: args, RepeatCount: doomThreshold, TimeWindowMs: doomWindow.Milliseconds(), DecisionId: id,
		}}}); err != nil {
			return nil, err
		}
		w = systemDecision(waitDoomLoop, id, step,
			fmt.Sprintf("The agent called %s with the same arguments %d times within %d s and may be stuck in a loop. Stop the run, let it continue, or tell it to correct its arguments?",
				c.GetName(), doomThreshold, int(doomWindow.Seconds())),
			r.s.opts.DecisionTimeout, now,
			&baagentv1.DecisionOption{Label: labelStop, Description: "Stop the run now, without an answer.", IsRecommended: true},
			&baagentv1.DecisionOption{Label: labelContinue, Description: "Run the call again as it is."},
			&baagentv1.DecisionOption{Label: labelCorrect, Description: "Do not run it; tell the agent to change its approach or arguments."})
		return nil, r.pause(i, w)
	}
	decision, timedOut := labelStop, w.Answer == nil
	if !timedOut {
		decision = w.Answer.Text
	}
	if err := r.answered(w, decision, timedOut); err != nil {
		return nil, err
	}
	r.doom.forget(c.GetName(), c.GetArguments())
	st.setDecision(i, decision)
	switch decision {
	case labelContinue:
		return nil, nil
	case labelCorrect:
		return r.failedCall(c, time.Now(), baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, codeDoomLoopCorrect,
			fmt.Sprintf("You called %s with the same arguments %d times. The user asked you not to repeat it: correct the arguments or take another approach.", c.GetName(), doomThreshold)), nil
	}
	if timedOut {
		return nil, newRunError(CodeDoomLoop, nil,
			"the agent called %s with the same arguments %d times within %d s and no one answered within %d s whether it should go on, so the run stopped without an answer",
			c.GetName(), doomThreshold, int(doomWindow.Seconds()), int(r.s.opts.DecisionTimeout.Seconds()))
	}
	return nil, newRunError(CodeDoomLoop, nil,
		"the user stopped the run after the agent called %s with the same arguments %d times", c.GetName(), doomThreshold)
}

// askGate answers an ask_clarification / ask_decision call: it asks the
// user (pausing), or turns the answer — or the recommended option at the
// deadline — into the observation.
func (r *run) askGate(st *stepState, i int, c *baagentv1.ToolCall) (*callResult, error) {
	step := r.rec.GetStep()
	began := time.Now()
	w := r.due(i, waitClarification, waitDecision)
	if w == nil {
		w, err := parseAsk(c.GetName(), c.GetArguments(), fmt.Sprintf("q_s%d_c%d", step, i), step, began,
			askTimeouts{clarification: r.s.opts.ClarificationTimeout, decision: r.s.opts.DecisionTimeout})
		if err != nil {
			return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, err.Error()), nil
		}
		return nil, r.pause(i, w)
	}
	var answer, obs string
	timedOut := w.Answer == nil
	if !timedOut {
		answer = w.Answer.Text
		obs = "The user answered: " + answer
	} else {
		timeout := w.pending().GetClarification().GetTimeoutSeconds() + w.pending().GetDecision().GetTimeoutSeconds()
		if rec := recommended(w.pending()); rec != "" {
			answer = rec
			obs = fmt.Sprintf("The user did not answer within %d s; continuing with the recommended option %q.", timeout, rec)
		} else {
			obs = fmt.Sprintf("The user did not answer within %d s and no option was recommended; proceed with your best judgment and state the assumption you made.", timeout)
		}
	}
	if err := r.answered(w, answer, timedOut); err != nil {
		return nil, err
	}
	return r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId: c.GetId(), ToolName: c.GetName(), Observation: obs, Success: true,
		DurationMs: float64(time.Since(began).Microseconds()) / 1000,
	}), nil
}

// permissionGate asks the user to approve a call the toolrunner refused
// for want of approval (permission ASK), or applies the answer: allow
// runs it approved; deny, or no answer by the deadline, does not.
func (r *run) permissionGate(ctx context.Context, st *stepState, i int, c *baagentv1.ToolCall, ts *toolset, caller string) (*callResult, error) {
	step := r.rec.GetStep()
	w := r.due(i, waitPermission)
	if w == nil {
		args := c.GetArguments()
		if len(args) > 500 {
			args = args[:500] + "…"
		}
		w = systemDecision(waitPermission, fmt.Sprintf("perm_s%d_c%d", step, i), step,
			fmt.Sprintf("The agent wants to run %s with %s. This tool needs your approval. Allow it?", c.GetName(), args),
			r.s.opts.DecisionTimeout, time.Now(),
			&baagentv1.DecisionOption{Label: labelAllow, Description: "Run the tool this once."},
			&baagentv1.DecisionOption{Label: labelDeny, Description: "Do not run it; the agent is told it was denied.", IsRecommended: true})
		return nil, r.pause(i, w)
	}
	allowed, timedOut := w.Answer != nil && w.Answer.Text == labelAllow, w.Answer == nil
	answer := labelDeny
	if allowed {
		answer = labelAllow
	}
	if err := r.answered(w, answer, timedOut); err != nil {
		return nil, err
	}
	if allowed {
		st.setApproval(i, labelAllow)
		rec := st.record(i)
		return r.invoke(ctx, c, ts, caller, st.usage, rec.IdempotencyKey, true)
	}
	st.setApproval(i, labelDeny)
	msg := fmt.Sprintf("The user denied running %s; it did not run. Continue without it or ask the user how to proceed.", c.GetName())
	if timedOut {
		msg = fmt.Sprintf("%s needs the user's approval and no one approved it within %d s; it did not run. Continue without it.", c.GetName(), int(r.s.opts.DecisionTimeout.Seconds()))
	}
	return r.failedCall(c, time.Now(), baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codePermissionDeny, msg), nil
}
