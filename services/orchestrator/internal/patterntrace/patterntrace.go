// Package patterntrace turns a finished run's events into the
// InteractionTrace the memory service learns interaction patterns from
// (docs/concepts/patterns.md, "Traces"). It is pure: no clock, no I/O; the
// orchestrator reads the events and publishes the trace.
//
// The rules, event by event (events mirrored from sub-agent runs, those
// with subagent_run_id set, are skipped: a trace is the top-level run's):
//
//   - goal: the run's input.
//   - clarifications: a clarification_asked question with the
//     clarification_answered answer of the same question id (empty when it
//     timed out).
//   - decisions: a decision_asked DecisionPoint with its decision_answered:
//     question = the context, options = the labels, recommended = the
//     is_recommended label, user choice = the selected labels (empty when it
//     timed out). Impact is `high` for a risk acceptance or a confirmation,
//     and for the decisions the orchestrator asks itself about the plan
//     (approval) and a doom loop; `medium` for every other decision. The
//     decision whether to reuse a matched pattern is not the task's and is
//     left out.
//   - plan steps: the steps of the last work_plan; a step is done when a
//     plan_step_end said it completed (or the last plan says so); its tools
//     are the tools its successful calls used.
//   - tool calls: the act/observe pairs of the run itself in act order
//     (not the calls a tool composition made, not the orchestrator's own ask
//     and plan tools); success from the observe, plan step from the event.
//   - corrections: (a) the user edited a proposed plan when asked to
//     approve it (agent error: the plan as proposed; fix: the edit, in free
//     text: the bare label `edit` fixes nothing);
//     (b) the user answered a doom-loop intervention (error: the repeated
//     call; fix: the choice); (c) a tool call failed and, later in the same
//     plan step, the user answered a clarification or a decision (error: the
//     failed call's result, cut; fix: the answer; tools: the tools that then
//     succeeded in that step).
//   - final result and success: the complete event (result cut to 4 KiB);
//     an error or a cancellation is a failure.
//   - human interventions: answers given (clarifications, decisions,
//     permissions; not timeouts, not the pattern decision) plus corrections
//     of kind (a).
//   - pattern: pattern_matched gives the pattern id; mode `reference` is
//     used as it is, mode `reuse` only when its decision was answered
//     `Reuse`. A reuse declined or timed out is no use: the pattern id stays
//     (the pattern the run was offered) and the mode is empty, which tells
//     the memory service not to count the run as a use of it.
//
// Everything is bounded whatever the events: at most MaxToolCalls tool
// calls, MaxItems clarifications, decisions and corrections, MaxPlanSteps
// plan steps, texts cut to MaxTextBytes (MaxGoalBytes, MaxResultBytes), and
// the builder's own state is bounded the same way.
package patterntrace

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/textcut"
)

// Bounds of a trace.
const (
	MaxGoalBytes   = 16 << 10 // the goal, as MatchPatterns takes it
	MaxResultBytes = 4 << 10  // the final result
	MaxTextBytes   = 2 << 10  // a question, an answer, an option, an error, a fix
	MaxNameBytes   = 200      // a tool name, an option label
	MaxToolCalls   = 200
	MaxItems       = 50 // clarifications, decisions, corrections
	MaxPlanSteps   = 20
	MaxOptions     = 10 // options of a decision
	MaxStepTools   = 20 // tools of a plan step or a correction
	// maxTracked bounds the builder's maps of asked questions and calls in
	// flight.
	maxTracked = 256
)

// Decision ids the orchestrator gives its own decisions, and what answers
// them.
const (
	PlanDecisionPrefix    = "plan_"
	DoomDecisionPrefix    = "doom_"
	PatternDecisionPrefix = "pattern_"
	// ReuseLabel accepts a matched pattern; FromScratchLabel declines it.
	ReuseLabel       = "Reuse"
	FromScratchLabel = "Plan from scratch"
)

// Pattern modes.
const (
	ModeReuse     = "reuse"
	ModeReference = "reference"
)

// Impacts of a decision.
const (
	ImpactHigh   = "high"
	ImpactMedium = "medium"
)

// Tools of the orchestrator itself, not the task's.
var ownTools = []string{"ask_clarification", "ask_decision", "plan", "update_plan"}

// Run is what the run's record says.
type Run struct {
	RunID          string
	ConversationID string
	Goal           string
	Started, Ended time.Time
}

type decisionKind int

const (
	decisionTask decisionKind = iota
	decisionPlan
	decisionDoom
	decisionPattern
)

type askedDecision struct {
	kind  decisionKind
	index int    // in the trace's decisions; -1 when not kept
	plan  string // the plan as proposed (plan approval)
}

type openCorrection struct {
	index int
	step  int32
}

type failedCall struct {
	step int32
	text string
}

// Builder folds a run's events, in order, into its trace.
type Builder struct {
	t *baagentv1.InteractionTrace

	clar      map[string]int // question id → index in t.Clarifications
	decisions map[string]askedDecision
	calls     map[string]int    // tool call id → index in t.ToolCalls
	doom      map[string]string // doom decision id → the repeated call
	completed map[int32]bool    // plan steps a plan_step_end completed
	stepTools map[int32][]string
	plan      []*baagentv1.PlanStep // the last work_plan's steps (cut)
	failed    *failedCall           // the last failed call not yet corrected
	open      *openCorrection       // a correction of kind (c) still taking tools

	patternID, patternMode, patternDecision string
	answers                                 int
	planEdits                               int
}

// New starts the trace of run.
func New(run Run) *Builder {
	return &Builder{
		t: &baagentv1.InteractionTrace{
			RunId:          textcut.Mark(run.RunID, MaxNameBytes),
			ConversationId: textcut.Mark(run.ConversationID, MaxNameBytes),
			UserGoal:       textcut.Mark(strings.TrimSpace(run.Goal), MaxGoalBytes),
			DurationMs:     max(0, run.Ended.Sub(run.Started).Milliseconds()),
		},
		clar:      map[string]int{},
		decisions: map[string]askedDecision{},
		calls:     map[string]int{},
		doom:      map[string]string{},
		completed: map[int32]bool{},
		stepTools: map[int32][]string{},
	}
}

// Build is the trace of run from its events.
func Build(run Run, events []*baagentv1.Event) *baagentv1.InteractionTrace {
	b := New(run)
	for _, ev := range events {
		b.Add(ev)
	}
	return b.Trace()
}

// Add folds one event in.
func (b *Builder) Add(ev *baagentv1.Event) {
	if ev == nil || ev.GetSubagentRunId() != "" {
		return
	}
	step := ev.GetPlanStep()
	switch p := ev.GetPayload().(type) {
	case *baagentv1.Event_Start:
		if b.t.UserGoal == "" {
			b.t.UserGoal = textcut.Mark(strings.TrimSpace(p.Start.GetInput()), MaxGoalBytes)
		}
	case *baagentv1.Event_ClarificationAsked:
		b.clarificationAsked(p.ClarificationAsked)
	case *baagentv1.Event_ClarificationAnswered:
		b.clarificationAnswered(p.ClarificationAnswered, step)
	case *baagentv1.Event_DecisionAsked:
		b.decisionAsked(p.DecisionAsked)
	case *baagentv1.Event_DecisionAnswered:
		b.decisionAnswered(p.DecisionAnswered, step)
	case *baagentv1.Event_PermissionReplied:
		if !p.PermissionReplied.GetTimedOut() {
			b.answers++
		}
	case *baagentv1.Event_DoomLoopDetected:
		if id := p.DoomLoopDetected.GetDecisionId(); id != "" && len(b.doom) < maxTracked {
			b.doom[id] = textcut.Mark("called "+p.DoomLoopDetected.GetToolName()+" with the same arguments "+itoa(int64(p.DoomLoopDetected.GetRepeatCount()))+" times", MaxTextBytes)
		}
	case *baagentv1.Event_DoomLoopIntervened:
		b.doomIntervened(p.DoomLoopIntervened, step)
	case *baagentv1.Event_WorkPlan:
		b.workPlan(p.WorkPlan)
	case *baagentv1.Event_PlanStepEnd:
		if e := p.PlanStepEnd; e.GetStatus() == baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED && len(b.completed) < maxTracked {
			b.completed[e.GetStepNumber()] = true
		}
	case *baagentv1.Event_Act:
		b.act(p.Act, step)
	case *baagentv1.Event_Observe:
		b.observe(p.Observe, step)
	case *baagentv1.Event_PatternMatched:
		b.patternMatched(p.PatternMatched)
	case *baagentv1.Event_Complete:
		b.t.Success = true
		b.t.FinalResult = textcut.Mark(strings.TrimSpace(p.Complete.GetContent()), MaxResultBytes)
	case *baagentv1.Event_Error, *baagentv1.Event_Cancelled:
		b.t.Success = false
		b.t.FinalResult = ""
	}
}

// Trace returns the trace of the events added so far (a copy: adding more
// does not change it).
func (b *Builder) Trace() *baagentv1.InteractionTrace {
	t := proto.CloneOf(b.t)
	t.HumanInterventions = int32(min(b.answers+b.planEdits, 1<<30))
	t.PatternId, t.PatternMode = b.patternID, b.patternMode
	for i, s := range b.plan {
		n := int32(i + 1)
		if s.GetStepNumber() > 0 {
			n = s.GetStepNumber()
		}
		t.PlanSteps = append(t.PlanSteps, &baagentv1.TracePlanStep{
			Description:    s.GetDescription(),
			ExpectedOutput: s.GetExpectedOutput(),
			Tools:          slices.Clone(b.stepTools[n]),
			Done:           b.completed[n] || s.GetStatus() == baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED,
		})
	}
	return t
}

func (b *Builder) clarificationAsked(q *baagentv1.ClarificationQuestion) {
	id := q.GetQuestionId()
	if _, seen := b.clar[id]; seen || len(b.t.Clarifications) >= MaxItems {
		return
	}
	b.clar[id] = len(b.t.Clarifications)
	b.t.Clarifications = append(b.t.Clarifications, &baagentv1.TraceClarification{Question: textcut.Mark(strings.TrimSpace(q.GetQuestion()), MaxTextBytes)})
}

func (b *Builder) clarificationAnswered(a *baagentv1.ClarificationAnsweredPayload, step int32) {
	if a.GetTimedOut() {
		return
	}
	answer := textcut.Mark(strings.TrimSpace(a.GetAnswer()), MaxTextBytes)
	b.answers++
	if i, ok := b.clar[a.GetQuestionId()]; ok {
		b.t.Clarifications[i].Answer = answer
	}
	b.userAnswered(answer, step)
}

func (b *Builder) decisionAsked(d *baagentv1.DecisionPoint) {
	id := d.GetDecisionId()
	if _, seen := b.decisions[id]; seen || len(b.decisions) >= maxTracked {
		return
	}
	a := askedDecision{kind: decisionTask, index: -1}
	switch {
	case id == b.patternDecision && id != "":
		a.kind = decisionPattern
	case strings.HasPrefix(id, PatternDecisionPrefix):
		a.kind = decisionPattern
	case strings.HasPrefix(id, PlanDecisionPrefix):
		a.kind = decisionPlan
		a.plan = b.renderPlan()
	case strings.HasPrefix(id, DoomDecisionPrefix) || b.doom[id] != "":
		a.kind = decisionDoom
	}
	if a.kind != decisionPattern && len(b.t.Decisions) < MaxItems {
		td := &baagentv1.TraceDecision{Question: textcut.Mark(strings.TrimSpace(d.GetContext()), MaxTextBytes), Impact: ImpactMedium}
		switch {
		case a.kind == decisionPlan || a.kind == decisionDoom,
			d.GetDecisionType() == baagentv1.DecisionType_DECISION_TYPE_RISK_ACCEPTANCE,
			d.GetDecisionType() == baagentv1.DecisionType_DECISION_TYPE_CONFIRMATION:
			td.Impact = ImpactHigh
		}
		for _, o := range d.GetOptions() {
			if len(td.Options) == MaxOptions {
				break
			}
			l := textcut.Mark(strings.TrimSpace(o.GetLabel()), MaxNameBytes)
			td.Options = append(td.Options, l)
			if o.GetIsRecommended() && td.Recommended == "" {
				td.Recommended = l
			}
		}
		a.index = len(b.t.Decisions)
		b.t.Decisions = append(b.t.Decisions, td)
	}
	b.decisions[id] = a
}

func (b *Builder) decisionAnswered(a *baagentv1.DecisionAnsweredPayload, step int32) {
	id := a.GetDecisionId()
	asked, ok := b.decisions[id]
	if !ok && id != "" && id == b.patternDecision {
		asked, ok = askedDecision{kind: decisionPattern, index: -1}, true
	}
	choice := strings.Join(a.GetSelectedOptions(), ", ")
	if choice == "" {
		choice = a.GetAnswer()
	}
	choice = textcut.Mark(strings.TrimSpace(choice), MaxTextBytes)
	if ok && asked.kind == decisionPattern {
		if id == b.patternDecision && b.patternMode == "" && !a.GetTimedOut() &&
			slices.ContainsFunc(append(slices.Clone(a.GetSelectedOptions()), a.GetAnswer()), func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), ReuseLabel) }) {
			b.patternMode = ModeReuse
		}
		return
	}
	if a.GetTimedOut() {
		return
	}
	b.answers++
	if ok && asked.index >= 0 {
		b.t.Decisions[asked.index].UserChoice = choice
	}
	switch {
	case ok && asked.kind == decisionPlan:
		edit := textcut.Mark(strings.TrimSpace(a.GetAnswer()), MaxTextBytes)
		// Free text is the edit; the bare label says no more than that the
		// plan should change, and fixes nothing a pattern could keep.
		if l := strings.ToLower(edit); l != "approve" && l != "cancel" && l != "edit" && edit != "" {
			b.planEdits++
			b.correct(&baagentv1.TraceCorrection{AgentError: asked.plan, HumanFix: edit})
		}
	case ok && asked.kind == decisionDoom:
		// A doom loop's correction is its doom_loop_intervened.
	default:
		b.userAnswered(choice, step)
	}
}

func (b *Builder) doomIntervened(d *baagentv1.DoomLoopIntervenedPayload, step int32) {
	if d.GetTimedOut() {
		return
	}
	what := b.doom[d.GetDecisionId()]
	if what == "" {
		what = textcut.Mark("called "+d.GetToolName()+" with the same arguments repeatedly", MaxTextBytes)
	}
	b.correct(&baagentv1.TraceCorrection{PlanStep: max(step, 0), AgentError: what, HumanFix: textcut.Mark(strings.TrimSpace(d.GetChoice()), MaxTextBytes)})
}

// userAnswered makes a correction of kind (c) of an answer that follows a
// failed call in the same plan step.
func (b *Builder) userAnswered(answer string, step int32) {
	if b.failed == nil || b.failed.step != step || answer == "" {
		return
	}
	if i := b.correct(&baagentv1.TraceCorrection{PlanStep: max(step, 0), AgentError: b.failed.text, HumanFix: answer}); i >= 0 {
		b.open = &openCorrection{index: i, step: step}
	}
	b.failed = nil
}

// correct adds c; its index, -1 when the trace has no room.
func (b *Builder) correct(c *baagentv1.TraceCorrection) int {
	if len(b.t.Corrections) >= MaxItems {
		return -1
	}
	b.t.Corrections = append(b.t.Corrections, c)
	return len(b.t.Corrections) - 1
}

func (b *Builder) workPlan(wp *baagentv1.WorkPlan) {
	b.plan = b.plan[:0]
	for _, s := range wp.GetSteps() {
		if len(b.plan) == MaxPlanSteps {
			break
		}
		b.plan = append(b.plan, &baagentv1.PlanStep{
			StepNumber:     s.GetStepNumber(),
			Description:    textcut.Mark(strings.TrimSpace(s.GetDescription()), MaxTextBytes),
			ExpectedOutput: textcut.Mark(strings.TrimSpace(s.GetExpectedOutput()), MaxTextBytes),
			Status:         s.GetStatus(),
		})
	}
}

// renderPlan is the last plan as text: its steps, numbered.
func (b *Builder) renderPlan() string {
	var s strings.Builder
	for i, st := range b.plan {
		if i > 0 {
			s.WriteString("\n")
		}
		s.WriteString(itoa(int64(i + 1)))
		s.WriteString(". ")
		s.WriteString(st.GetDescription())
		if s.Len() > MaxTextBytes {
			break
		}
	}
	return textcut.Mark(s.String(), MaxTextBytes)
}

func isOwnTool(name string) bool { return slices.Contains(ownTools, name) }

func (b *Builder) act(a *baagentv1.ActPayload, step int32) {
	if a.GetParentToolCallId() != "" || isOwnTool(a.GetToolName()) {
		return
	}
	id := a.GetToolCallId()
	if _, seen := b.calls[id]; seen || len(b.t.ToolCalls) >= MaxToolCalls || len(b.calls) >= maxTracked*4 {
		return
	}
	b.calls[id] = len(b.t.ToolCalls)
	b.t.ToolCalls = append(b.t.ToolCalls, &baagentv1.TraceToolCall{Tool: textcut.Mark(a.GetToolName(), MaxNameBytes), PlanStep: max(step, 0)})
}

func (b *Builder) observe(o *baagentv1.ObservePayload, step int32) {
	if o.GetParentToolCallId() != "" || isOwnTool(o.GetToolName()) {
		return
	}
	name := textcut.Mark(o.GetToolName(), MaxNameBytes)
	i, ok := b.calls[o.GetToolCallId()]
	if !ok {
		// A result without its act (not stored): the call happened.
		if len(b.t.ToolCalls) >= MaxToolCalls || len(b.calls) >= maxTracked*4 {
			return
		}
		i = len(b.t.ToolCalls)
		b.calls[o.GetToolCallId()] = i
		b.t.ToolCalls = append(b.t.ToolCalls, &baagentv1.TraceToolCall{Tool: name, PlanStep: max(step, 0)})
	}
	tc := b.t.ToolCalls[i]
	tc.Success = o.GetSuccess()
	if !o.GetSuccess() {
		b.failed = &failedCall{step: tc.GetPlanStep(), text: textcut.Mark(strings.TrimSpace(name+": "+o.GetObservation()), MaxTextBytes)}
		return
	}
	if tc.GetPlanStep() > 0 && (len(b.stepTools) < maxTracked || b.stepTools[tc.GetPlanStep()] != nil) {
		b.stepTools[tc.GetPlanStep()] = addTool(b.stepTools[tc.GetPlanStep()], tc.GetTool())
	}
	if b.open != nil && b.open.step == tc.GetPlanStep() {
		c := b.t.Corrections[b.open.index]
		c.Tools = addTool(c.Tools, tc.GetTool())
	}
}

func addTool(tools []string, name string) []string {
	if name == "" || len(tools) >= MaxStepTools || slices.Contains(tools, name) {
		return tools
	}
	return append(tools, name)
}

func (b *Builder) patternMatched(m *baagentv1.PatternMatchedPayload) {
	if b.patternID != "" {
		return // one match per run
	}
	b.patternID = textcut.Mark(m.GetPatternId(), MaxNameBytes)
	switch m.GetMode() {
	case ModeReference:
		b.patternMode = ModeReference
	case ModeReuse:
		b.patternDecision = m.GetDecisionId()
		if a, ok := b.decisions[b.patternDecision]; ok && a.kind != decisionPattern {
			// Asked before it was known to be the pattern's: not a task decision.
			a.kind = decisionPattern
			b.decisions[b.patternDecision] = a
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
