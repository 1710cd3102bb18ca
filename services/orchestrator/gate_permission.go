package orchestrator

import (
	"context"
	"fmt"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// codePermissionDeny is the observation's code of a call the user did not
// approve.
const codePermissionDeny = "PERMISSION_DENIED_BY_USER"

// approvalPending is the record's Approval of a call the toolrunner refused
// for want of the user's approval (permission ASK); the user's answer
// replaces it with hitl.LabelAllow or hitl.LabelDeny.
const approvalPending = "asked"

// permissionGate asks the user to approve a call the toolrunner refused
// for want of approval, then applies the answer: allow runs it approved;
// deny, or no answer by the deadline, does not.
type permissionGate struct{}

func (permissionGate) applies(c gateCall) bool { return c.rec.Approval == approvalPending }

func (permissionGate) check(ctx context.Context, r *run, c gateCall) (verdict, error) {
	timeout := r.s.opts.DecisionTimeout
	w := r.due(c.i, hitl.KindPermission)
	if w == nil {
		return r.askUser(c.i, permissionQuestion(c.call, r.rec.GetStep(), c.i, timeout, time.Now()))
	}
	allowed, timedOut := permissionAnswer(w)
	reply := hitl.LabelDeny
	if allowed {
		reply = hitl.LabelAllow
	}
	if err := r.answered(w, reply, timedOut); err != nil {
		return verdict{}, err
	}
	c.st.setApproval(c.i, reply)
	if allowed {
		rec := c.st.record(c.i)
		res, err := r.invoke(ctx, c.call, c.ts, c.caller, c.st.usage, rec.IdempotencyKey, true)
		if err != nil {
			return verdict{}, err
		}
		return answeredBy(res), nil
	}
	return answeredBy(r.failedCall(c.call, time.Now(), baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codePermissionDeny,
		permissionDenied(c.call.GetName(), timedOut, timeout))), nil
}

// permissionQuestion is the decision the user is asked about the step's
// call i.
func permissionQuestion(c *baagentv1.ToolCall, step int32, i int, timeout time.Duration, now time.Time) *hitl.Wait {
	args := c.GetArguments()
	if len(args) > 500 {
		args = args[:500] + "…"
	}
	return hitl.SystemDecision(hitl.KindPermission, fmt.Sprintf("perm_s%d_c%d", step, i), step,
		fmt.Sprintf("The agent wants to run %s with %s. This tool needs your approval. Allow it?", c.GetName(), args),
		timeout, now,
		&baagentv1.DecisionOption{Label: hitl.LabelAllow, Description: "Run the tool this once."},
		&baagentv1.DecisionOption{Label: hitl.LabelDeny, Description: "Do not run it; the agent is told it was denied.", IsRecommended: true})
}

// permissionAnswer reports whether the user allowed the call; no answer
// by the deadline denies it.
func permissionAnswer(w *hitl.Wait) (allowed, timedOut bool) {
	return w.Answer != nil && w.Answer.Text == hitl.LabelAllow, w.Answer == nil
}

// permissionDenied is the observation of a call that did not run for want
// of the user's approval.
func permissionDenied(tool string, timedOut bool, timeout time.Duration) string {
	if timedOut {
		return fmt.Sprintf("%s needs the user's approval and no one approved it within %d s; it did not run. Continue without it.", tool, int(timeout.Seconds()))
	}
	return fmt.Sprintf("The user denied running %s; it did not run. Continue without it or ask the user how to proceed.", tool)
}
