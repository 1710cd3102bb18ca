// Package workplan holds a run's work-level plan (docs/concepts/planning.md):
// the plan and update_plan tools' schemas and arguments, the plan's steps
// and their statuses, its revisions, and the phase of planning the run is
// in. It holds no I/O: the orchestrator drives it and checkpoints State.
package workplan

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
)

// The tools' names.
const (
	PlanTool   = "plan"
	UpdateTool = "update_plan"
)

// Limits of a plan.
const (
	MaxSteps       = 20
	MaxStepText    = 1000 // bytes of a description or expected output
	MaxReason      = 1000
	MaxSummary     = 2 << 10
	maxArgumentLen = 64 << 10
)

// Phase is where a run is in planning.
type Phase string

// The phases.
const (
	// PhaseOff: the run does not plan (SIMPLE, plan NEVER, or the model
	// did not plan when it had to).
	PhaseOff Phase = ""
	// PhaseOffered: the model may plan (MODERATE, or after the reminder):
	// the plan tool is offered with the others.
	PhaseOffered Phase = "offered"
	// PhaseRequired: the run plans first (COMPLEX, plan ALWAYS): only the
	// plan and ask tools are offered.
	PhaseRequired Phase = "required"
	// PhaseExecuting: a plan step is being executed.
	PhaseExecuting Phase = "executing"
	// PhaseSynthesis: every step has ended; the model writes the answer.
	PhaseSynthesis Phase = "synthesis"
)

// State is a run's planning state, kept in its checkpoint.
type State struct {
	Phase Phase `json:"phase,omitempty"`
	// Reminded: the model was reminded once to plan.
	Reminded bool `json:"reminded,omitempty"`
	// Plan is the WorkPlan (protobuf), nil before the model plans.
	Plan []byte `json:"plan,omitempty"`
	// StepStarted: plan_step_start of the current step was published.
	StepStarted bool `json:"step_started,omitempty"`
	// Proposals counts the plans proposed and not adopted (edited by the
	// user); the next proposal's revision follows them.
	Proposals int32 `json:"proposals,omitempty"`
	// EditReason is the user's edit instructions, the reason of the next
	// proposal.
	EditReason string `json:"edit_reason,omitempty"`

	plan *baagentv1.WorkPlan
}

// Decode restores the plan after loading s from a checkpoint.
func (s *State) Decode() error {
	if len(s.Plan) == 0 {
		s.plan = nil
		return nil
	}
	p, err := protoenc.Unmarshal[baagentv1.WorkPlan](s.Plan)
	if err != nil {
		return fmt.Errorf("work plan: %w", err)
	}
	s.plan = p
	return nil
}

// Encode stores the plan into s.Plan before s is checkpointed.
func (s *State) Encode() {
	if s.plan == nil {
		s.Plan = nil
		return
	}
	s.Plan = protoenc.Marshal(s.plan)
}

// WorkPlan is the plan, nil before there is one. Callers must not modify it.
func (s *State) WorkPlan() *baagentv1.WorkPlan { return s.plan }

// Current is the step being executed, nil outside one.
func (s *State) Current() *baagentv1.PlanStep {
	if s.plan == nil || s.plan.GetCurrentStep() < 1 || int(s.plan.GetCurrentStep()) > len(s.plan.GetSteps()) {
		return nil
	}
	return s.plan.GetSteps()[s.plan.GetCurrentStep()-1]
}

// CurrentNumber is the plan step the run is in (the events' plan_step), 0
// outside one.
func (s *State) CurrentNumber() int32 {
	if s.Phase != PhaseExecuting || !s.StepStarted {
		return 0
	}
	return s.plan.GetCurrentStep()
}

// StepDraft is a step as the model writes it.
type StepDraft struct {
	Description    string `json:"description"`
	ExpectedOutput string `json:"expected_output"`
}

// Mark is update_plan's change of one step's status.
type Mark struct {
	StepNumber int32  `json:"step_number"`
	Status     string `json:"status"`
	Summary    string `json:"summary"`
}

// Update is update_plan's arguments.
type Update struct {
	Steps  []StepDraft `json:"steps"`
	Reason string      `json:"reason"`
	Mark   *Mark       `json:"mark"`
}

// ParsePlan validates the plan tool's arguments.
func ParsePlan(raw string) ([]StepDraft, error) {
	var a struct {
		Steps []StepDraft `json:"steps"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if a.Steps == nil {
		return nil, fmt.Errorf("steps: required, 1 to %d steps", MaxSteps)
	}
	return checkSteps(a.Steps)
}

// ParseUpdate validates update_plan's arguments.
func ParseUpdate(raw string) (*Update, error) {
	var u Update
	if err := decode(raw, &u); err != nil {
		return nil, err
	}
	u.Reason = strings.TrimSpace(u.Reason)
	switch {
	case u.Reason == "":
		return nil, fmt.Errorf("reason: required (why the plan changes)")
	case len(u.Reason) > MaxReason:
		return nil, fmt.Errorf("reason: at most %d bytes", MaxReason)
	case u.Steps == nil && u.Mark == nil:
		return nil, fmt.Errorf("steps or mark: give the revised remaining steps, a step's new status, or both")
	}
	if u.Steps != nil {
		steps, err := checkSteps(u.Steps)
		if err != nil {
			return nil, err
		}
		u.Steps = steps
	}
	if m := u.Mark; m != nil {
		if _, ok := markStatuses[m.Status]; !ok {
			return nil, fmt.Errorf("mark.status: one of completed, failed, skipped")
		}
		if m.StepNumber < 1 {
			return nil, fmt.Errorf("mark.step_number: a step number, from 1")
		}
		m.Summary = Cut(strings.TrimSpace(m.Summary), MaxSummary)
	}
	return &u, nil
}

var markStatuses = map[string]baagentv1.PlanStepStatus{
	"completed": baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED,
	"failed":    baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED,
	"skipped":   baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED,
}

func decode(raw string, v any) error {
	if len(raw) > maxArgumentLen {
		return fmt.Errorf("arguments: at most %d bytes", maxArgumentLen)
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return fmt.Errorf("arguments are not a JSON object of the tool's schema: %v", err)
	}
	return nil
}

func checkSteps(steps []StepDraft) ([]StepDraft, error) {
	if len(steps) == 0 || len(steps) > MaxSteps {
		return nil, fmt.Errorf("steps: 1 to %d steps, got %d", MaxSteps, len(steps))
	}
	out := make([]StepDraft, len(steps))
	for i, st := range steps {
		d, e := strings.TrimSpace(st.Description), strings.TrimSpace(st.ExpectedOutput)
		switch {
		case d == "":
			return nil, fmt.Errorf("steps[%d].description: required", i)
		case len(d) > MaxStepText || len(e) > MaxStepText:
			return nil, fmt.Errorf("steps[%d]: description and expected_output are at most %d bytes each", i, MaxStepText)
		case !utf8.ValidString(d) || !utf8.ValidString(e):
			return nil, fmt.Errorf("steps[%d]: not valid UTF-8", i)
		}
		out[i] = StepDraft{Description: d, ExpectedOutput: e}
	}
	return out, nil
}

// Propose builds the plan the model proposed, not yet adopted: revision
// after every earlier proposal, every step pending.
func (s *State) Propose(planID string, steps []StepDraft) *baagentv1.WorkPlan {
	p := &baagentv1.WorkPlan{PlanId: planID, Revision: s.Proposals + 1, Reason: s.EditReason}
	for i, st := range steps {
		p.Steps = append(p.Steps, &baagentv1.PlanStep{
			StepNumber: int32(i + 1), Description: st.Description, ExpectedOutput: st.ExpectedOutput,
			Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING,
		})
	}
	p.TotalSteps = int32(len(p.Steps))
	return p
}

// Reject records a proposal the user asked to change: the next one is a
// new revision with reason as its reason.
func (s *State) Reject(reason string) {
	s.Proposals++
	s.EditReason = Cut("edited by the user: "+reason, MaxReason)
}

// Adopt makes p the run's plan and starts executing its first step.
func (s *State) Adopt(p *baagentv1.WorkPlan) {
	s.plan = p
	s.Phase = PhaseExecuting
	s.EditReason = ""
	s.startNext()
}

// startNext moves to the next pending step, marking it in progress, or to
// the synthesis when none is left.
func (s *State) startNext() {
	s.StepStarted = false
	for _, st := range s.plan.GetSteps() {
		if st.GetStatus() == baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING {
			st.Status = baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS
			s.plan.CurrentStep = st.GetStepNumber()
			return
		}
	}
	s.plan.CurrentStep = 0
	s.Phase = PhaseSynthesis
}

// Apply applies an update_plan call. The mark comes first: marking the
// current step ends it (CurrentEnded reports it), marking a later one
// decides it in advance. Then a revision replaces every step not ended
// (the current one, if it goes on, continues as the first revised step)
// and adds a revision. On error the plan may be half-changed: callers
// apply to a copy (see the orchestrator's updatePlan).
func (s *State) Apply(u *Update) error {
	if s.plan == nil || s.Phase != PhaseExecuting {
		return fmt.Errorf("there is no plan being executed; call %s first", PlanTool)
	}
	cur := s.plan.GetCurrentStep()
	if m := u.Mark; m != nil {
		switch {
		case int(m.StepNumber) > len(s.plan.GetSteps()):
			return fmt.Errorf("mark.step_number: the plan has %d steps", len(s.plan.GetSteps()))
		case m.StepNumber < cur:
			return fmt.Errorf("mark.step_number: step %d has already ended; the current step is %d", m.StepNumber, cur)
		case m.StepNumber > cur && u.Steps != nil:
			return fmt.Errorf("mark.step_number: a revision replaces the steps after the current one; mark the current step (%d) or leave the mark out", cur)
		}
		st := s.plan.GetSteps()[m.StepNumber-1]
		st.Status = markStatuses[m.Status]
		if m.Summary != "" {
			st.Summary = m.Summary
		}
	}
	if u.Steps != nil {
		goesOn := !s.CurrentEnded()
		keep := int(cur)
		if goesOn {
			keep--
		}
		if keep+len(u.Steps) > MaxSteps {
			return fmt.Errorf("steps: the plan would have %d steps, at most %d", keep+len(u.Steps), MaxSteps)
		}
		old := s.Current()
		steps := append([]*baagentv1.PlanStep(nil), s.plan.GetSteps()[:keep]...)
		for i, d := range u.Steps {
			st := &baagentv1.PlanStep{
				StepNumber: int32(keep + i + 1), Description: d.Description, ExpectedOutput: d.ExpectedOutput,
				Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING,
			}
			if i == 0 && goesOn {
				st.Status, st.Iterations = baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS, old.GetIterations()
			}
			steps = append(steps, st)
		}
		s.plan.Steps = steps
		s.plan.TotalSteps = int32(len(steps))
		s.plan.Revision++
		s.plan.Reason = u.Reason
	}
	return nil
}

// CurrentEnded reports whether the current step has been given an end
// status (by a mark) and waits for End.
func (s *State) CurrentEnded() bool {
	st := s.Current()
	return st != nil && st.GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS
}

// End ends the current step with status (unless a mark already gave it
// one), its summary (unless it has one) and duration, and moves to the next
// step. It returns the step that ended.
func (s *State) End(status baagentv1.PlanStepStatus, summary string, durationMs float64) *baagentv1.PlanStep {
	st := s.Current()
	if st == nil {
		return nil
	}
	if st.GetStatus() == baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS {
		st.Status = status
	}
	if st.GetSummary() == "" {
		st.Summary = Cut(strings.TrimSpace(summary), MaxSummary)
	}
	st.DurationMs = durationMs
	s.startNext()
	return st
}

// Iterated counts one ReAct iteration of the current step and returns the
// step's count.
func (s *State) Iterated() int32 {
	st := s.Current()
	if st == nil {
		return 0
	}
	st.Iterations++
	return st.GetIterations()
}

// SkipRest marks every step not yet ended skipped (the run is out of
// steps) and moves to the synthesis.
func (s *State) SkipRest(reason string) {
	for _, st := range s.plan.GetSteps() {
		switch st.GetStatus() {
		case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING, baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS:
			st.Status = baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED
			if st.GetSummary() == "" {
				st.Summary = reason
			}
		}
	}
	s.plan.CurrentStep = 0
	s.Phase = PhaseSynthesis
	s.StepStarted = false
}

// Render is the plan as a numbered checklist for people and the model.
func Render(p *baagentv1.WorkPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Work plan (revision %d, %d steps):\n", p.GetRevision(), len(p.GetSteps()))
	for _, st := range p.GetSteps() {
		fmt.Fprintf(&b, "%s %d. %s", mark(st.GetStatus()), st.GetStepNumber(), st.GetDescription())
		if e := st.GetExpectedOutput(); e != "" {
			fmt.Fprintf(&b, " → %s", e)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func mark(s baagentv1.PlanStepStatus) string {
	switch s {
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED:
		return "[x]"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED:
		return "[!]"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED:
		return "[-]"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS:
		return "[>]"
	}
	return "[ ]"
}

// StepBrief is the instruction for a step: what to do and produce.
func StepBrief(p *baagentv1.WorkPlan, st *baagentv1.PlanStep) string {
	s := fmt.Sprintf("Plan step %d/%d: %s", st.GetStepNumber(), len(p.GetSteps()), st.GetDescription())
	if e := st.GetExpectedOutput(); e != "" {
		s += " Expected output: " + e + "."
	}
	return s + fmt.Sprintf(" Work on this step only. When it is done, call %s with mark {step_number: %d, status: \"completed\", summary: what you found} (or answer with the step's result in text).",
		UpdateTool, st.GetStepNumber())
}

// SynthesisBrief is the instruction of the synthesis iteration.
const SynthesisBrief = "Every step of the work plan has ended. Now write the final answer to the user's original request from the steps' results, in Markdown. Do not call tools."

// Cut returns s cut to at most n bytes on a rune boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Schemas are the plan and update_plan tools' schemas.
func Schemas() (plan, update *baagentv1.ToolSchema) {
	step := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"description":     map[string]any{"type": "string", "description": "What the step does (one action, e.g. 'Revenue by region for Q3 and Q4')."},
			"expected_output": map[string]any{"type": "string", "description": "What the step produces (e.g. 'a table of revenue per region and quarter')."},
		},
		"required": []any{"description", "expected_output"},
	}
	steps := map[string]any{"type": "array", "items": step, "minItems": 1, "maxItems": MaxSteps}
	p, _ := structpb.NewStruct(map[string]any{
		"type":       "object",
		"properties": map[string]any{"steps": steps},
		"required":   []any{"steps"},
	})
	u, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"steps":  withDescription(steps, "The revised steps from the current one on (the steps already ended are kept)."),
			"reason": map[string]any{"type": "string", "description": "Why the plan changes."},
			"mark": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"step_number": map[string]any{"type": "integer", "minimum": 1},
					"status":      map[string]any{"type": "string", "enum": []any{"completed", "failed", "skipped"}},
					"summary":     map[string]any{"type": "string", "description": "What the step found, or why it failed."},
				},
				"required": []any{"step_number", "status"},
			},
		},
		"required": []any{"reason"},
	})
	return &baagentv1.ToolSchema{
			Name: PlanTool, Parameters: p,
			Description: "Commit to a work plan before working on a multi-part request: the ordered steps (each one action with its expected output). " +
				"The run then executes the steps one at a time and finally asks you for the answer. You may ask the user a clarification first.",
		}, &baagentv1.ToolSchema{
			Name: UpdateTool, Parameters: u,
			Description: "Change the work plan: mark a step completed, failed or skipped (marking the current step completed moves to the next), " +
				"and/or replace the remaining steps when what you learned changes the plan. Always give the reason.",
		}
}

func withDescription(m map[string]any, d string) map[string]any {
	out := map[string]any{"description": d}
	for k, v := range m {
		out[k] = v
	}
	return out
}
