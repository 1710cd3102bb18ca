package orchestrator

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
)

// What a tool call does when the toolrunner goes away in the middle of it
// (the call fails Unavailable: the process died or was restarted).
//
// Every call carries its idempotency key, and the toolrunner records a
// call with side effects in a store every replica shares before it runs
// it, so sending the call again is safe for any tool: the replica that
// gets it (another one, or the restarted one) answers with the recorded
// outcome, waits for the execution still running, or — when the
// toolrunner that ran it died mid-call — answers TOOL_OUTCOME_UNKNOWN. It
// never runs the call a second time. The call is sent up to
// toolRunnerAttempts times in all, with a short backoff.
//
// If the toolrunner stays away: a read-only call ends the run with
// PEER_UNAVAILABLE; a call with side effects gets an error observation
// saying its outcome is unknown (it may have run before its toolrunner
// went away), and the model decides (typically: look, then retry).
const (
	toolRunnerAttempts = 3
	// codeToolRunnerLost is the observation's code for a call with side
	// effects whose toolrunner went away mid-call and stayed away; the
	// toolrunner uses the same code when it finds such a call's record.
	codeToolRunnerLost = "TOOL_OUTCOME_UNKNOWN"
)

// toolRunnerBackoff waits 250 ms before the second attempt, 500 ms before
// the third.
var toolRunnerBackoff = retry.Backoff{Initial: 250 * time.Millisecond, Multiplier: 2}

// invokeToolRunner sends req, again after an Unavailable answer.
func (r *run) invokeToolRunner(ctx context.Context, req *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) {
	for attempt := 1; ; attempt++ {
		resp, err := r.s.opts.ToolRunner.Invoke(ctx, req)
		if err == nil || attempt >= toolRunnerAttempts || status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return resp, err
		}
		r.log.Warn("toolrunner unavailable during a call; sending it again with its idempotency key",
			"tool", req.GetRequest().GetToolName(), "tool_call_id", req.GetRequest().GetToolCallId(), "attempt", attempt, "error", err)
		if !retry.Sleep(ctx, toolRunnerBackoff.Delay(attempt-1)) {
			return nil, ctx.Err()
		}
	}
}

// lostWrite is the observation of a call with side effects whose
// toolrunner went away before answering.
func (r *run) lostWrite(c *baagentv1.ToolCall, began time.Time, err error) *callResult {
	return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, codeToolRunnerLost,
		"The tool service stopped while running this call and did not come back ("+status.Convert(err).Message()+"), so it is not known whether the call took effect. "+
			"Check its effect (for example, read what it should have written) before calling it again.")
}
