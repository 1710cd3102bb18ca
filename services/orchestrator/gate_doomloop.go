package orchestrator

import (
	"context"
	"fmt"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/doomloop"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// Error codes of a doom-loop intervention.
const (
	codeDoomLoopCorrect = "REPEATED_CALL"
	// CodeDoomLoop ends a run stopped at a doom-loop intervention.
	CodeDoomLoop = "DOOM_LOOP"
)

// doomLoopGate stops a call that completes a doom loop (the detector
// flagged it when the model made it) until the user decides: stop the
// run, continue (the call runs), or correct (the model is told to change
// its approach). Without an answer by the deadline the run stops.
type doomLoopGate struct{}

// cpDoomLoopDecided is the checkpoint of a resolved doom-loop decision.
const cpDoomLoopDecided = "DOOM_LOOP_DECIDED"

// applies: a call that completes a doom loop, until it is decided, and a
// decided call that must not run (stop, correct) without its result yet
// (the execution that decided stopped before it stored one).
func (doomLoopGate) applies(c gateCall) bool {
	return c.rec.Doom && c.rec.Decision != hitl.LabelContinue
}

func (doomLoopGate) check(_ context.Context, r *run, c gateCall) (verdict, error) {
	if err := c.st.durable.wait(); err != nil { // the question is about the model's response
		return verdict{}, err
	}
	timeout := r.s.opts.DecisionTimeout
	if c.rec.Decision != "" { // decided, and published, by an earlier execution
		return doomVerdict(r, c, c.rec.Decision, c.rec.DecisionTimedOut, timeout)
	}
	w := r.due(c.i, hitl.KindDoomLoop)
	if w == nil {
		step := r.rec.GetStep()
		q := doomQuestion(c.call, step, c.i, timeout, time.Now())
		args, _ := parseArgs(c.call.GetArguments())
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_DoomLoopDetected{DoomLoopDetected: &baagentv1.DoomLoopDetectedPayload{
			ToolName: c.call.GetName(), ToolInput: args, RepeatCount: doomloop.Threshold, TimeWindowMs: doomloop.Window.Milliseconds(), DecisionId: q.ID,
		}}}); err != nil {
			return verdict{}, err
		}
		return r.askUser(c.i, q)
	}
	decision, timedOut := doomDecision(w)
	if err := r.answered(w, decision, timedOut); err != nil {
		return verdict{}, err
	}
	r.doom.Forget(c.call.GetName(), c.call.GetArguments())
	c.st.setDecision(c.i, decision, timedOut)
	if err := r.intervened(c, w.ID, decision, timedOut); err != nil {
		return verdict{}, err
	}
	return doomVerdict(r, c, decision, timedOut, timeout)
}

// intervened publishes the doom_loop_intervened event of the decision
// about c. Held, it is stored with the checkpoint that records the
// decision (in its outbox, with the decision_answered event before it):
// a resumed run finds the call decided and publishes neither again, or
// finds it undecided and neither published.
func (r *run) intervened(c gateCall, decisionID, decision string, timedOut bool) error {
	if err := r.hold(&baagentv1.Event{Payload: &baagentv1.Event_DoomLoopIntervened{DoomLoopIntervened: &baagentv1.DoomLoopIntervenedPayload{
		DecisionId: decisionID, Choice: decision, TimedOut: timedOut, Intervention: doomIntervention(decision),
		ToolName: c.call.GetName(), ToolCallId: c.call.GetId(),
	}}}); err != nil {
		return err
	}
	if err := r.checkpoint(cpDoomLoopDecided); err != nil {
		return err
	}
	return r.flush()
}

// doomIntervention is what the run does for the user's decision.
func doomIntervention(decision string) baagentv1.DoomLoopIntervention {
	switch decision {
	case hitl.LabelContinue:
		return baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE
	case hitl.LabelCorrect:
		return baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CORRECT
	}
	return baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP
}

// doomVerdict applies the decision about c.
func doomVerdict(r *run, c gateCall, decision string, timedOut bool, timeout time.Duration) (verdict, error) {
	switch decision {
	case hitl.LabelContinue:
		return verdict{kind: verdictPass}, nil
	case hitl.LabelCorrect:
		return answeredBy(r.failedCall(c.call, time.Now(), baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, codeDoomLoopCorrect, doomCorrection(c.call))), nil
	}
	return verdict{}, doomStopped(c.call, timedOut, timeout)
}

// doomQuestion is the decision the user is asked about the step's call i.
func doomQuestion(c *baagentv1.ToolCall, step int32, i int, timeout time.Duration, now time.Time) *hitl.Wait {
	return hitl.SystemDecision(hitl.KindDoomLoop, fmt.Sprintf("doom_s%d_c%d", step, i), step,
		fmt.Sprintf("The agent called %s with the same arguments %d times within %d s and may be stuck in a loop. Stop the run, let it continue, or tell it to correct its arguments?",
			c.GetName(), doomloop.Threshold, int(doomloop.Window.Seconds())),
		timeout, now,
		&baagentv1.DecisionOption{Label: hitl.LabelStop, Description: "Stop the run now, without an answer.", IsRecommended: true},
		&baagentv1.DecisionOption{Label: hitl.LabelContinue, Description: "Run the call again as it is."},
		&baagentv1.DecisionOption{Label: hitl.LabelCorrect, Description: "Do not run it; tell the agent to change its approach or arguments."})
}

// doomDecision is the user's intervention, stop when no one answered.
func doomDecision(w *hitl.Wait) (decision string, timedOut bool) {
	if w.Answer == nil {
		return hitl.LabelStop, true
	}
	return w.Answer.Text, false
}

// doomCorrection is the observation of a call the user told the model to
// correct.
func doomCorrection(c *baagentv1.ToolCall) string {
	return fmt.Sprintf("You called %s with the same arguments %d times. The user asked you not to repeat it: correct the arguments or take another approach.", c.GetName(), doomloop.Threshold)
}

// doomStopped is the error that ends a run stopped at a doom loop.
func doomStopped(c *baagentv1.ToolCall, timedOut bool, timeout time.Duration) error {
	if timedOut {
		return newRunError(CodeDoomLoop, nil,
			"the agent called %s with the same arguments %d times within %d s and no one answered within %d s whether it should go on, so the run stopped without an answer",
			c.GetName(), doomloop.Threshold, int(doomloop.Window.Seconds()), int(timeout.Seconds()))
	}
	return newRunError(CodeDoomLoop, nil,
		"the user stopped the run after the agent called %s with the same arguments %d times", c.GetName(), doomloop.Threshold)
}
