package main

import (
	"bytes"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Sub-agent events. A run that delegates carries its sub-agents' events in
// its own stream, tagged with subagent_run_id; the live view prints them
// indented under a "sub-agent" mark with the child's short id, and never
// takes a child's complete, error or cancelled for the run's end. A
// question a sub-agent asks is shown, not prompted for: it is answered on
// the child's run id.

// childPreview bounds a sub-agent's report shown inline.
const childPreview = 300

// showMirrored prints ev, an event of the sub-agent child.
func (v *liveView) showMirrored(ev *baagentv1.Event, child string) error {
	var buf bytes.Buffer
	sub := &liveView{w: &buf}
	switch p := ev.GetPayload().(type) {
	case *baagentv1.Event_Start:
		sub.printf("started (run %s, model %s, at most %d steps)\n", child, p.Start.GetModel(), p.Start.GetMaxSteps())
	case *baagentv1.Event_StepStart:
		sub.printf("step %d\n", p.StepStart.GetStepNumber())
	case *baagentv1.Event_StepEnd:
		return nil
	case *baagentv1.Event_Complete:
		sub.printf("finished in %d steps: %s\n", ev.GetStep(), shorten(p.Complete.GetContent(), childPreview))
	case *baagentv1.Event_Error:
		sub.printf("failed: %s (%s)\n", p.Error.GetMessage(), p.Error.GetCode())
	case *baagentv1.Event_Cancelled:
		sub.printf("cancelled: %s\n", p.Cancelled.GetReason())
	default:
		// The child's event as its own stream has it (not tagged).
		plain := &baagentv1.Event{RunId: child, Type: ev.GetType(), Step: ev.GetStep(), Payload: ev.GetPayload()}
		if err := sub.show(plain); err != nil {
			return err
		}
		if isQuestion(ev) {
			sub.printf("  (the sub-agent asks: answer with baagentctl input %s ANSWER)\n", child)
		}
	}
	prefix := "  ┆ " + shortRunID(child) + " "
	for line := range strings.Lines(buf.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		v.printf("%s%s", prefix, line)
	}
	return nil
}

// isQuestion reports whether ev asks the user something.
func isQuestion(ev *baagentv1.Event) bool {
	switch ev.GetPayload().(type) {
	case *baagentv1.Event_ClarificationAsked, *baagentv1.Event_DecisionAsked, *baagentv1.Event_PermissionAsked:
		return true
	}
	return false
}

// shortRunID is the tail of a run id, enough to tell sub-agents apart.
func shortRunID(id string) string {
	const keep = 8
	if len(id) <= keep {
		return id
	}
	return "…" + id[len(id)-keep:]
}

// showAssigned prints a delegation.
func (v *liveView) showAssigned(a *baagentv1.SubagentAssignedPayload) {
	what := a.GetDescription()
	if what == "" {
		what = shorten(a.GetPrompt(), 120)
	}
	v.printf("⇢ delegated to sub-agent %s (run %s): %s\n", a.GetSubagentType(), a.GetChildRunId(), what)
}

// showIntervened prints what a doom-loop decision made the run do.
func (v *liveView) showIntervened(d *baagentv1.DoomLoopIntervenedPayload) {
	did := map[baagentv1.DoomLoopIntervention]string{
		baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP:     "the run stops",
		baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE: "the call runs again",
		baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CORRECT:  "the agent is told to change its approach",
		baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_SKIP:     "the call is skipped",
	}[d.GetIntervention()]
	choice := d.GetChoice()
	if d.GetTimedOut() {
		choice = "no answer in time"
	}
	v.printf("! loop on %s: %s; %s\n", d.GetToolName(), choice, did)
}
