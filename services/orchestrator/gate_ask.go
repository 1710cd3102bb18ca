package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// askGate answers the ask_clarification / ask_decision calls: it asks the
// user (pausing the run), then turns the answer — or, at the deadline, the
// recommended option — into the call's observation.
type askGate struct{}

func (askGate) applies(c gateCall) bool { return slices.Contains(c.ts.ask, c.call.GetName()) }

func (askGate) check(_ context.Context, r *run, c gateCall) (verdict, error) {
	if err := c.st.durable.wait(); err != nil { // the question is the model's response
		return verdict{}, err
	}
	step := r.rec.GetStep()
	began := time.Now()
	w := r.due(c.i, hitl.KindClarification, hitl.KindDecision)
	if w == nil {
		q, err := hitl.ParseAsk(c.call.GetName(), c.call.GetArguments(), fmt.Sprintf("q_s%d_c%d", step, c.i), step, began,
			hitl.Timeouts{Clarification: r.s.opts.ClarificationTimeout, Decision: r.s.opts.DecisionTimeout})
		if err != nil {
			return answeredBy(r.failedCall(c.call, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, err.Error())), nil
		}
		return r.askUser(c.i, q)
	}
	ans, obs, timedOut := askAnswer(w)
	if err := r.answered(w, ans, timedOut); err != nil {
		return verdict{}, err
	}
	return answeredBy(r.result(c.call, began, &baagentv1.ObservePayload{
		ToolCallId: c.call.GetId(), ToolName: c.call.GetName(), Observation: obs, Success: true,
		DurationMs: float64(time.Since(began).Microseconds()) / 1000,
	})), nil
}

// askAnswer is the answer the run takes from a settled question and the
// observation the model gets: the user's answer, else the recommended
// option, else the model is told to use its judgment.
func askAnswer(w *hitl.Wait) (answer, observation string, timedOut bool) {
	if w.Answer != nil {
		return w.Answer.Text, "The user answered: " + w.Answer.Text, false
	}
	p := w.Pending()
	timeout := p.GetClarification().GetTimeoutSeconds() + p.GetDecision().GetTimeoutSeconds()
	if rec := hitl.Recommended(p); rec != "" {
		return rec, fmt.Sprintf("The user did not answer within %d s; continuing with the recommended option %q.", timeout, rec), true
	}
	return "", fmt.Sprintf("The user did not answer within %d s and no option was recommended; proceed with your best judgment and state the assumption you made.", timeout), true
}
