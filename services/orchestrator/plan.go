package orchestrator

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/complexity"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/workplan"
)

// Planning (docs/concepts/planning.md): a run whose request is COMPLEX (or
// whose spec says plan ALWAYS) first makes a work plan with the plan tool;
// a MODERATE one is offered the tool. The plan's steps then run one at a
// time, each a bounded series of ReAct iterations, and a synthesis
// iteration writes the answer. The plan lives in the run's checkpoint, so
// a run resumed elsewhere goes on at the current plan step.

// Planning settings' defaults and values.
const (
	DefaultPlanStepMaxIterations = 8
	ComplexityRules              = "rules"
	ComplexityModel              = "model"
)

// Warning codes of planning.
const (
	warnPlanNotMade      = "PLAN_NOT_MADE"
	warnPlanStepBudget   = "PLAN_STEP_BUDGET"
	warnPlanOutOfSteps   = "PLAN_OUT_OF_STEPS"
	warnComplexityFailed = "COMPLEXITY_MODEL_FAILED"
)

// planning is a run's planning state and what derives from it.
type planning struct {
	st workplan.State
	// stepBegan is when the current plan step started (or resumed) here.
	stepBegan time.Time
	// tools caches the toolsets of the phases, derived from base.
	base  *toolset
	tools map[workplan.Phase]*toolset
}

// planMode is the run's effective plan mode.
func (r *run) planMode() baagentv1.PlanMode {
	if m := r.spec.GetPlan(); m != baagentv1.PlanMode_PLAN_MODE_UNSPECIFIED {
		return m
	}
	return baagentv1.PlanMode_PLAN_MODE_AUTO
}

// planApproval reports whether the user approves the run's plan.
func (r *run) planApproval() bool {
	switch r.spec.GetPlanApproval() {
	case baagentv1.PlanApproval_PLAN_APPROVAL_ASK:
		return true
	case baagentv1.PlanApproval_PLAN_APPROVAL_OFF:
		return false
	}
	return r.s.opts.PlanApproval
}

// classify judges the request's complexity and sets the run's first
// planning phase. It runs once, before the start event; its result is in
// every checkpoint from then on.
func (r *run) classify(ctx context.Context) (warning string) {
	res := complexity.Classify(r.rec.GetInput())
	level, signals := levelProto(res.Level), res.Signals
	if r.s.opts.ComplexityClassifier == ComplexityModel {
		l, err := r.classifyByModel(ctx)
		if err == nil {
			level, signals = l, append(signals, "model")
		} else {
			r.log.Warn("model classifier failed; the rules decide", "error", err)
			warning = fmt.Sprintf("The model could not judge the request's complexity (%v); the rules judged it %s.", err, res.Level)
		}
	}
	r.rec.QueryComplexity, r.rec.ComplexitySignals = level, signals
	r.plan.st = workplan.State{Phase: firstPhase(r.planMode(), level, r.rec.GetParentRunId() != "")}
	return warning
}

// firstPhase is where planning starts. A sub-agent run does its delegated
// task without a work plan of its own: the plan is its parent's.
func firstPhase(mode baagentv1.PlanMode, level baagentv1.QueryComplexity, subAgent bool) workplan.Phase {
	switch {
	case subAgent || mode == baagentv1.PlanMode_PLAN_MODE_NEVER:
		return workplan.PhaseOff
	case mode == baagentv1.PlanMode_PLAN_MODE_ALWAYS || level == baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX:
		return workplan.PhaseRequired
	case level == baagentv1.QueryComplexity_QUERY_COMPLEXITY_MODERATE:
		return workplan.PhaseOffered
	}
	return workplan.PhaseOff
}

func levelProto(l complexity.Level) baagentv1.QueryComplexity {
	switch l {
	case complexity.Simple:
		return baagentv1.QueryComplexity_QUERY_COMPLEXITY_SIMPLE
	case complexity.Moderate:
		return baagentv1.QueryComplexity_QUERY_COMPLEXITY_MODERATE
	case complexity.Complex:
		return baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX
	}
	return baagentv1.QueryComplexity_QUERY_COMPLEXITY_UNSPECIFIED
}

// phaseTools is the toolset of the current phase, derived from base:
// unplanned runs get base as it is; a run that must plan gets the plan and
// ask tools only; one that may plan gets base and plan; a plan step gets
// base and update_plan; the synthesis gets none.
func (r *run) phaseTools(base *toolset) *toolset {
	p := &r.plan
	phase := p.st.Phase
	if phase == workplan.PhaseOff {
		return base
	}
	if p.base != base {
		p.base, p.tools = base, map[workplan.Phase]*toolset{}
	}
	if ts, ok := p.tools[phase]; ok {
		return ts
	}
	planSchema, updateSchema := workplan.Schemas()
	ts := &toolset{defs: map[string]*baagentv1.ToolDefinition{}, allow: base.allow}
	switch phase {
	case workplan.PhaseRequired:
		for _, sc := range base.schemas {
			if isAskTool(base, sc.GetName()) {
				ts.schemas = append(ts.schemas, sc)
			}
		}
		ts.ask = base.ask
		ts.schemas = append(ts.schemas, planSchema)
		ts.plan = []string{workplan.PlanTool}
	case workplan.PhaseOffered, workplan.PhaseExecuting:
		c := *base
		ts = &c
		ts.schemas = append(append([]*baagentv1.ToolSchema(nil), base.schemas...), planSchema)
		ts.plan = []string{workplan.PlanTool}
		if phase == workplan.PhaseExecuting {
			ts.schemas[len(ts.schemas)-1] = updateSchema
			ts.plan = []string{workplan.UpdateTool}
		}
	case workplan.PhaseSynthesis:
		// No tools: the model writes the answer.
	}
	ts.fingerprint = fingerprintOf(ts.schemas)
	p.tools[phase] = ts
	return ts
}

func isAskTool(ts *toolset, name string) bool {
	for _, a := range ts.ask {
		if a == name {
			return true
		}
	}
	return false
}

// planBefore prepares an iteration: the last iteration a run has left in
// the middle of a plan goes to the synthesis. It returns the tools the
// iteration offers.
func (r *run) planBefore(ctx context.Context, base *toolset) (*toolset, error) {
	if r.cur == nil && r.plan.st.Phase == workplan.PhaseExecuting &&
		r.rec.GetStep() >= r.rec.GetMaxSteps() && r.rec.GetMaxSteps() > 1 {
		if err := r.outOfSteps(ctx); err != nil {
			return nil, err
		}
	}
	return r.phaseTools(base), nil
}

// startPlanStep publishes plan_step_start of the current plan step, once.
func (r *run) startPlanStep() error {
	p := &r.plan
	if p.st.Phase != workplan.PhaseExecuting || p.st.StepStarted {
		return nil
	}
	cur, wp := p.st.Current(), p.st.WorkPlan()
	p.st.StepStarted, p.stepBegan = true, time.Now()
	r.planChanged()
	return r.emit(&baagentv1.Event{Payload: &baagentv1.Event_PlanStepStart{PlanStepStart: &baagentv1.PlanStepStartPayload{
		StepNumber: cur.GetStepNumber(), Description: cur.GetDescription(), TotalSteps: wp.GetTotalSteps(),
		ExpectedOutput: cur.GetExpectedOutput(), Revision: wp.GetRevision(),
	}}})
}

// outOfSteps ends the plan early: the run has one iteration left, which
// writes the answer from what the finished steps found.
func (r *run) outOfSteps(ctx context.Context) error {
	p := &r.plan
	cur := p.st.Current()
	if cur != nil && p.st.StepStarted {
		if err := r.endPlanStep(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED, "the run reached its step limit"); err != nil {
			return err
		}
	}
	if p.st.Phase == workplan.PhaseExecuting {
		p.st.SkipRest("the run reached its step limit")
	}
	r.planChanged()
	if err := r.warn(warnPlanOutOfSteps, fmt.Sprintf("The run reached its limit of %d steps before its plan was done; the answer is written from the steps that finished.", r.rec.GetMaxSteps())); err != nil {
		return err
	}
	if err := r.emitPlan(); err != nil {
		return err
	}
	return r.planNote(ctx, "out of steps: "+workplan.SynthesisBrief)
}

// planAfter settles an iteration that ended (the model answered, or its
// tool calls were answered): it may end the current plan step, remind the
// model to plan, or turn a step's text answer into the step's result. It
// returns the run's answer and whether it is final. A plan step that ends
// is checkpointed (PLAN_STEP) with the next one set, so a run resumed
// from here starts the next step and never ends this one twice.
func (r *run) planAfter(ctx context.Context, answer string, final bool) (string, bool, error) {
	p := &r.plan
	switch p.st.Phase {
	case workplan.PhaseRequired:
		if !final {
			return answer, final, nil
		}
		if !p.st.Reminded {
			p.st.Reminded = true
			r.planChanged()
			return "", false, r.planNote(ctx, "This request needs a work plan before any answer: call the "+workplan.PlanTool+
				" tool with the steps (or ask the user a clarification first).")
		}
		p.st.Phase = workplan.PhaseOff
		r.planChanged()
		return answer, final, r.warn(warnPlanNotMade, "The model answered without making the work plan this request needed; the run went on unplanned.")
	case workplan.PhaseExecuting:
		if !p.st.StepStarted { // the plan was adopted in this iteration
			return answer, final, r.startPlanStep()
		}
		ended, err := r.planStepAfter(ctx, answer, final)
		if err != nil || !ended {
			return answer, final && !ended, err
		}
		if err := r.startPlanStep(); err != nil {
			return "", false, err
		}
		// In the background, like TOOL_COMPLETE: nothing waits for it, the
		// next checkpoint queues behind it, and a failed write fails that.
		r.checkpointAsync(checkpoint.KindPlanStep)
		return "", false, nil
	case workplan.PhaseSynthesis, workplan.PhaseOffered, workplan.PhaseOff:
	}
	return answer, final, nil
}

// planStepAfter counts an iteration of the current plan step and ends the
// step when the model answered it in text, marked it ended, or it ran out
// of iterations. It reports whether the step ended.
func (r *run) planStepAfter(ctx context.Context, answer string, final bool) (bool, error) {
	p := &r.plan
	iters := p.st.Iterated()
	r.planChanged()
	switch {
	case final:
		if err := r.endPlanStep(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED, answer); err != nil {
			return false, err
		}
		return true, r.planNote(ctx, "Noted. "+r.nextBrief())
	case p.st.CurrentEnded():
		return true, r.endPlanStep(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED, "")
	case int(iters) >= r.s.opts.PlanStepMaxIterations:
		n := p.st.Current().GetStepNumber()
		msg := fmt.Sprintf("Plan step %d did not finish within its %d iterations; it is marked failed and the run moves on.", n, r.s.opts.PlanStepMaxIterations)
		if err := r.warn(warnPlanStepBudget, msg); err != nil {
			return false, err
		}
		if err := r.endPlanStep(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED, fmt.Sprintf("did not finish within %d iterations", r.s.opts.PlanStepMaxIterations)); err != nil {
			return false, err
		}
		return true, r.planNote(ctx, msg+" "+r.nextBrief())
	}
	return false, nil
}

// nextBrief is the instruction after a step ended: the next step's, or
// the synthesis'.
func (r *run) nextBrief() string {
	p := &r.plan
	if p.st.Phase == workplan.PhaseExecuting {
		return workplan.StepBrief(p.st.WorkPlan(), p.st.Current())
	}
	return workplan.SynthesisBrief
}

// endPlanStep ends the current plan step and publishes plan_step_end and
// the plan as it now stands.
func (r *run) endPlanStep(status baagentv1.PlanStepStatus, summary string) error {
	p := &r.plan
	began := p.stepBegan
	if began.IsZero() {
		began = time.Now()
	}
	st := p.st.End(status, summary, float64(time.Since(began).Microseconds())/1000)
	if st == nil {
		return nil
	}
	r.planChanged()
	if err := r.emit(&baagentv1.Event{PlanStep: st.GetStepNumber(), Payload: &baagentv1.Event_PlanStepEnd{PlanStepEnd: &baagentv1.PlanStepEndPayload{
		StepNumber: st.GetStepNumber(), Success: st.GetStatus() == baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED,
		DurationMs: st.GetDurationMs(), Summary: st.GetSummary(), Iterations: st.GetIterations(), Status: st.GetStatus(),
		TotalSteps: p.st.WorkPlan().GetTotalSteps(),
	}}}); err != nil {
		return err
	}
	return r.emitPlan()
}

// planNote appends an instruction of the platform's to the conversation
// (a user message, tagged as the platform's), for the model's next
// iteration. Its id makes the append idempotent on resume.
func (r *run) planNote(ctx context.Context, text string) error {
	return r.appendMessages(ctx, &baagentv1.ChatMessage{
		Id:      fmt.Sprintf("%s:s%d:plan", r.rec.GetRunId(), r.rec.GetStep()),
		Role:    baagentv1.Role_ROLE_USER,
		Content: "[work plan] " + text,
	})
}

// warn publishes a warning.
func (r *run) warn(code, msg string) error {
	return r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Warning{Warning: &baagentv1.WarningPayload{Code: code, Message: msg}}})
}

// emitPlan publishes the plan as it stands (work_plan).
func (r *run) emitPlan() error {
	wp := r.plan.st.WorkPlan()
	if wp == nil {
		return nil
	}
	return r.emit(&baagentv1.Event{Payload: &baagentv1.Event_WorkPlan{WorkPlan: proto.CloneOf(wp)}})
}

// planChanged keeps the run's record current with the plan.
func (r *run) planChanged() {
	if wp := r.plan.st.WorkPlan(); wp != nil {
		r.rec.Plan = proto.CloneOf(wp)
	}
}

// planStep is the plan step an event of the run belongs to now.
func (r *run) planStep() int32 { return r.plan.st.CurrentNumber() }

// thoughtLevel is `work` for the reasoning that makes or changes the plan,
// `task` for the rest.
func (r *run) thoughtLevel(msg *baagentv1.ChatMessage) string {
	if r.plan.st.Phase == workplan.PhaseRequired {
		return "work"
	}
	for _, c := range msg.GetToolCalls() {
		if c.GetName() == workplan.PlanTool || c.GetName() == workplan.UpdateTool {
			return "work"
		}
	}
	return "task"
}

// planCheckpoint is the planning state to checkpoint; cpMu is held.
func (r *run) planCheckpoint() *workplan.State {
	st := r.plan.st
	st.Encode()
	return &st
}

// restorePlan loads the planning state of a checkpoint. A checkpoint
// written before planning existed has none: the run goes on unplanned.
func (r *run) restorePlan(st *workplan.State) error {
	if st == nil {
		return nil
	}
	if err := st.Decode(); err != nil {
		return err
	}
	r.plan.st = *st
	r.plan.stepBegan = time.Now()
	r.planChanged()
	return nil
}
