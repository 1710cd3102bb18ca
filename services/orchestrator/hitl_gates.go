package orchestrator

import (
	"context"
	"fmt"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Error codes of observations about the user's decisions.
const (
	codeDoomLoopCorrect = "REPEATED_CALL"
	codePermissionDeny  = "PERMISSION_DENIED_BY_USER"
	// CodeDoomLoop ends a run stopped at a doom-loop intervention.
	CodeDoomLoop = "DOOM_LOOP"
)

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
