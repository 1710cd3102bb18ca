package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/workplan"
)

// planGate answers the plan and update_plan calls: it validates them
// (an invalid call is a tool error the model can correct), asks the user
// to approve a plan when the run says so, adopts or revises the plan and
// publishes it (work_plan).
type planGate struct{}

func (planGate) applies(c gateCall) bool { return slices.Contains(c.ts.plan, c.call.GetName()) }

// A call that publishes the plan (work_plan) waits for the step's
// LLM_COMPLETE checkpoint first: a plan is published only once the
// response that made it is stored, so a resumed run never shows a plan
// the model did not keep. A mark alone publishes nothing and does not wait
// (its result is checkpointed after the response, in order).
func (planGate) check(_ context.Context, r *run, c gateCall) (verdict, error) {
	began := time.Now()
	if c.call.GetName() == workplan.UpdateTool {
		return r.updatePlan(c, began)
	}
	return r.proposePlan(c, began)
}

// codePlanInvalid is the observation's code of a plan call refused.
const codePlanInvalid = "PLAN_INVALID"

func (r *run) planRefused(c gateCall, began time.Time, err error) verdict {
	return answeredBy(r.failedCall(c.call, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codePlanInvalid, err.Error()))
}

func (r *run) planAnswer(c gateCall, began time.Time, obs string) verdict {
	return answeredBy(r.result(c.call, began, &baagentv1.ObservePayload{
		ToolCallId: c.call.GetId(), ToolName: c.call.GetName(), Observation: obs, Success: true,
		DurationMs: float64(time.Since(began).Microseconds()) / 1000,
	}))
}

// proposePlan answers a plan call: the plan is adopted at once, or once
// the user approves it.
func (r *run) proposePlan(c gateCall, began time.Time) (verdict, error) {
	p := &r.plan
	if p.st.WorkPlan() != nil {
		return r.planRefused(c, began, fmt.Errorf("the run already has a plan; change it with %s", workplan.UpdateTool)), nil
	}
	steps, err := workplan.ParsePlan(c.call.GetArguments())
	if err != nil {
		return r.planRefused(c, began, err), nil
	}
	proposed := p.st.Propose(r.rec.GetRunId()+"-plan", steps)
	if err := c.st.durable.wait(); err != nil {
		return verdict{}, err
	}
	if r.planApproval() {
		w := r.due(c.i, hitl.KindPlan)
		if w == nil {
			if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_WorkPlan{WorkPlan: proto.CloneOf(proposed)}}); err != nil {
				return verdict{}, err
			}
			return r.askUser(c.i, planQuestion(proposed, r.rec.GetStep(), c.i, r.s.opts.DecisionTimeout, began))
		}
		choice, edit, timedOut := planDecision(w)
		said := choice
		if edit != "" {
			said = edit
		}
		if err := r.answered(w, said, timedOut); err != nil {
			return verdict{}, err
		}
		switch choice {
		case hitl.LabelCancel:
			return verdict{}, &cancelCause{reason: "the user cancelled the work plan"}
		case hitl.LabelEdit:
			p.st.Reject(edit)
			r.planChanged()
			obs := "The user wants the plan changed before it runs"
			if edit != "" {
				obs += ": " + edit
			}
			return r.planAnswer(c, began, obs+". Call "+workplan.PlanTool+" again with the revised steps."), nil
		}
	}
	p.st.Adopt(proposed)
	r.planChanged()
	if err := r.emitPlan(); err != nil {
		return verdict{}, err
	}
	return r.planAnswer(c, began, fmt.Sprintf("Plan adopted (%d steps). %s", len(proposed.GetSteps()),
		workplan.StepBrief(p.st.WorkPlan(), p.st.Current()))), nil
}

// updatePlan answers an update_plan call.
func (r *run) updatePlan(c gateCall, began time.Time) (verdict, error) {
	p := &r.plan
	u, err := workplan.ParseUpdate(c.call.GetArguments())
	if err != nil {
		return r.planRefused(c, began, err), nil
	}
	wp := p.st.WorkPlan()
	if wp == nil {
		return r.planRefused(c, began, fmt.Errorf("there is no plan yet; call %s first", workplan.PlanTool)), nil
	}
	saved := proto.CloneOf(wp)
	if err := p.st.Apply(u); err != nil {
		proto.Reset(wp)
		proto.Merge(wp, saved) // nothing half-applied
		return r.planRefused(c, began, err), nil
	}
	r.planChanged()
	var obs strings.Builder
	if wp.GetRevision() != saved.GetRevision() {
		if err := c.st.durable.wait(); err != nil {
			return verdict{}, err
		}
		if err := r.emitPlan(); err != nil {
			return verdict{}, err
		}
		fmt.Fprintf(&obs, "Plan revised (revision %d). %s", wp.GetRevision(), workplan.Render(wp))
	}
	if m := u.Mark; m != nil {
		fmt.Fprintf(&obs, "Step %d marked %s. ", m.StepNumber, m.Status)
	}
	if p.st.CurrentEnded() {
		obs.WriteString("Next: ")
		obs.WriteString(r.briefAfterCurrent())
	}
	return r.planAnswer(c, began, strings.TrimSpace(obs.String())), nil
}

// briefAfterCurrent is the instruction for what follows the current step,
// which has been marked ended: the next pending step's, or the synthesis'.
func (r *run) briefAfterCurrent() string {
	wp := r.plan.st.WorkPlan()
	for _, st := range wp.GetSteps() {
		if st.GetStatus() == baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING {
			return workplan.StepBrief(wp, st)
		}
	}
	return workplan.SynthesisBrief
}

// planQuestion is the decision that asks the user to approve a plan.
func planQuestion(p *baagentv1.WorkPlan, step int32, i int, timeout time.Duration, now time.Time) *hitl.Wait {
	id := fmt.Sprintf("plan_s%d_c%d", step, i)
	w := &hitl.Wait{Kind: hitl.KindPlan, ID: id, Deadline: now.Add(timeout)}
	hitl.SetQuestion(w, &baagentv1.PendingInput{Question: &baagentv1.PendingInput_Decision{Decision: &baagentv1.DecisionPoint{
		DecisionId: id, DecisionType: baagentv1.DecisionType_DECISION_TYPE_CUSTOM, StepNumber: step,
		Context: workplan.Cut(workplan.Render(p)+"\nApprove this plan, edit it (answer with what to change), or cancel the run?", hitl.MaxQuestionText),
		Options: []*baagentv1.DecisionOption{
			{Label: hitl.LabelApprove, Description: "Run the plan as proposed.", IsRecommended: true},
			{Label: hitl.LabelEdit, Description: "Change the plan: answer in free text with what to change."},
			{Label: hitl.LabelCancel, Description: "Cancel the run."},
		},
		TimeoutSeconds: int32(timeout.Seconds()),
	}}})
	return w
}

// planDecision reads the user's answer to a plan approval: approve (also
// when no one answered in time), cancel, or edit with the instructions
// (free text is an edit).
func planDecision(w *hitl.Wait) (choice, edit string, timedOut bool) {
	if w.Answer == nil {
		return hitl.LabelApprove, "", true
	}
	text := strings.TrimSpace(w.Answer.Text)
	switch strings.ToLower(text) {
	case hitl.LabelApprove, hitl.LabelCancel:
		return strings.ToLower(text), "", false
	case hitl.LabelEdit:
		return hitl.LabelEdit, "", false
	}
	return hitl.LabelEdit, workplan.Cut(text, workplan.MaxReason), false
}
