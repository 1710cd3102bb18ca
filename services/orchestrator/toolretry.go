package orchestrator

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// What a tool call does when the toolrunner goes away in the middle of it
// (the call fails Unavailable: the process died or was restarted).
//
//   - A read-only call is sent again, up to toolRunnerAttempts in all with
//     a short backoff: running a read twice is harmless. If the toolrunner
//     stays away, the run ends with PEER_UNAVAILABLE.
//   - A call with side effects is never sent again: the toolrunner's
//     idempotency record may have died with it, so a second send could run
//     the write twice. The model gets an error observation saying the
//     outcome is unknown, and decides (typically: look, then retry).
const (
	toolRunnerAttempts = 3
	toolRunnerBackoff  = 250 * time.Millisecond
	// codeToolRunnerLost is the observation's code for a write whose
	// toolrunner went away mid-call.
	codeToolRunnerLost = "TOOLRUNNER_LOST_DURING_CALL"
)

// invokeToolRunner sends req, again after an Unavailable answer when the
// tool is read-only.
func (r *run) invokeToolRunner(ctx context.Context, req *baagentv1.InvokeRequest, readOnly bool) (*baagentv1.InvokeResponse, error) {
	backoff := toolRunnerBackoff
	for attempt := 1; ; attempt++ {
		resp, err := r.s.opts.ToolRunner.Invoke(ctx, req)
		if err == nil || !readOnly || attempt >= toolRunnerAttempts || status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return resp, err
		}
		r.log.Warn("toolrunner unavailable during a read-only call; sending it again",
			"tool", req.GetRequest().GetToolName(), "tool_call_id", req.GetRequest().GetToolCallId(), "attempt", attempt, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		backoff *= 2
	}
}

// lostWrite is the observation of a call with side effects whose
// toolrunner went away before answering.
func (r *run) lostWrite(c *baagentv1.ToolCall, began time.Time, err error) *callResult {
	return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, codeToolRunnerLost,
		"The tool service stopped while running this call ("+status.Convert(err).Message()+"), so it is not known whether the call took effect. "+
			"It was not sent again because it has side effects: check its effect (for example, read what it should have written) before calling it again.")
}
