package main

import (
	"fmt"
	"io"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Work plans in the CLI: the live view prints a run's plan as a checklist
// when it is made or revised and ticks its steps off as they end; `runs
// get` prints the plan as it stands.

// planModes and planApprovals map the --plan and --plan-approval values.
var (
	planModes = map[string]baagentv1.PlanMode{
		"auto": baagentv1.PlanMode_PLAN_MODE_AUTO, "always": baagentv1.PlanMode_PLAN_MODE_ALWAYS, "never": baagentv1.PlanMode_PLAN_MODE_NEVER,
	}
	planApprovals = map[string]baagentv1.PlanApproval{
		"": baagentv1.PlanApproval_PLAN_APPROVAL_UNSPECIFIED, "ask": baagentv1.PlanApproval_PLAN_APPROVAL_ASK, "off": baagentv1.PlanApproval_PLAN_APPROVAL_OFF,
	}
)

// parsePlanFlags reads --plan and --plan-approval.
func parsePlanFlags(mode, approval string) (baagentv1.PlanMode, baagentv1.PlanApproval, error) {
	m, ok := planModes[strings.ToLower(mode)]
	if !ok {
		return 0, 0, fmt.Errorf("%w: --plan: one of auto, always, never, got %q", errUsage, mode)
	}
	a, ok := planApprovals[strings.ToLower(approval)]
	if !ok {
		return 0, 0, fmt.Errorf("%w: --plan-approval: ask or off, got %q", errUsage, approval)
	}
	return m, a, nil
}

// complexityName is the lowercase name of a complexity ("" when unset).
func complexityName(c baagentv1.QueryComplexity) string {
	if c == baagentv1.QueryComplexity_QUERY_COMPLEXITY_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(c.String(), "QUERY_COMPLEXITY_"))
}

// complexityLine describes the complexity and its signals.
func complexityLine(c baagentv1.QueryComplexity, signals []string) string {
	name := complexityName(c)
	if name == "" {
		return ""
	}
	if len(signals) > 0 {
		name += " (" + strings.Join(signals, ", ") + ")"
	}
	return name
}

// stepMark is a plan step's checklist box.
func stepMark(s baagentv1.PlanStepStatus) string {
	switch s {
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED:
		return "✓"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED:
		return "✗"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED:
		return "–"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS:
		return "▶"
	}
	return "□"
}

// writeChecklist prints the plan's steps, one a line.
func writeChecklist(w io.Writer, p *baagentv1.WorkPlan, indent string) {
	for _, st := range p.GetSteps() {
		line := fmt.Sprintf("%s%s %d. %s", indent, stepMark(st.GetStatus()), st.GetStepNumber(), st.GetDescription())
		if e := st.GetExpectedOutput(); e != "" {
			line += " → " + e
		}
		if s := st.GetSummary(); s != "" && st.GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING {
			line += "\n" + indent + "    " + shorten(s, observationPreview)
		}
		fmt.Fprintln(w, line)
	}
}

// planView is the live view's plan state: the revision it printed last.
type planView struct {
	printed int32
}

// showPlan prints a work_plan event: the checklist when the plan is new or
// revised (the same revision again, with statuses moved on, is not
// reprinted: the step lines tick it off).
func (v *liveView) showPlan(p *baagentv1.WorkPlan) {
	if p.GetRevision() == v.plan.printed {
		return
	}
	v.plan.printed = p.GetRevision()
	if p.GetRevision() <= 1 {
		v.printf("\nplan: %d steps\n", p.GetTotalSteps())
	} else {
		v.printf("\nplan revised (revision %d: %s): %d steps\n", p.GetRevision(), p.GetReason(), p.GetTotalSteps())
	}
	writeChecklist(v.w, p, "  ")
}

func (v *liveView) showPlanStepStart(s *baagentv1.PlanStepStartPayload) {
	v.printf("\n▶ plan step %d/%d: %s\n", s.GetStepNumber(), s.GetTotalSteps(), s.GetDescription())
}

func (v *liveView) showPlanStepEnd(s *baagentv1.PlanStepEndPayload) {
	iters := fmt.Sprintf("%d iterations", s.GetIterations())
	if s.GetIterations() == 1 {
		iters = "1 iteration"
	}
	what := "done"
	switch s.GetStatus() {
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED:
		what = "failed"
	case baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED:
		what = "skipped"
	}
	v.printf("%s plan step %d/%d %s (%s, %.1f s)\n", stepMark(s.GetStatus()), s.GetStepNumber(), s.GetTotalSteps(), what, iters, s.GetDurationMs()/1000)
	if s.GetSummary() != "" {
		v.printf("  %s\n", shorten(s.GetSummary(), observationPreview))
	}
}

func (v *liveView) showWarning(w *baagentv1.WarningPayload) {
	v.printf("! warning: %s (%s)\n", w.GetMessage(), w.GetCode())
}
