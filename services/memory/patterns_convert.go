package memory

import (
	"slices"
	"strings"
	"time"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/textcut"
	"github.com/baagent/baagent/services/memory/scrub"
	"github.com/baagent/baagent/services/memory/store"
)

// patternPrefix is the id prefix of interaction patterns.
const patternPrefix = "pt_"

// Bounds of a recorded trace. A trace is built by the orchestrator from a
// real run, so what exceeds them is cut rather than refused: the run still
// teaches what it can.
const (
	MaxGoalBytes           = 16 << 10 // MatchPatternsRequest.goal, InteractionTrace.user_goal
	MaxTraceToolCalls      = 200
	MaxTraceClarifications = 50
	MaxTraceDecisions      = 50
	MaxTraceCorrections    = 50
	MaxTracePlanSteps      = 20
	MaxTraceOptions        = 20   // options of one decision
	MaxTraceStepTools      = 20   // tools of one plan step or correction
	MaxTraceTextBytes      = 2048 // a question, answer, description, error or fix
	MaxTraceResultBytes    = 4096 // final_result
	MaxTraceLabelBytes     = 256  // an option, a choice
	MaxToolNameBytes       = 128  // a tool name
	maxTracePlanStepRef    = 1000 // plan_step references beyond this are unknown (0)
)

// Bounds of a user's edit (patterns.proto PatternEdit).
const (
	MaxPatternNameBytes        = 120
	MaxPatternDescriptionBytes = 2 << 10
	MaxPatternStepTextBytes    = 500 // a step's description or expected output
	MaxPatternCorrectionBytes  = 1 << 10
	MaxReasonBytes             = 1 << 10 // MarkPatternUselessRequest.reason
	MaxPatternGrants           = 1000    // ListPatternGrants
)

// patternStateProto maps the rules' state to the proto enum.
func patternStateProto(s patterns.State) baagentv1.PatternState {
	switch s {
	case patterns.StateCandidate:
		return baagentv1.PatternState_PATTERN_STATE_CANDIDATE
	case patterns.StateActive:
		return baagentv1.PatternState_PATTERN_STATE_ACTIVE
	case patterns.StateDraft:
		return baagentv1.PatternState_PATTERN_STATE_DRAFT
	case patterns.StateUntrusted:
		return baagentv1.PatternState_PATTERN_STATE_UNTRUSTED
	case patterns.StateArchived:
		return baagentv1.PatternState_PATTERN_STATE_ARCHIVED
	}
	return baagentv1.PatternState_PATTERN_STATE_UNSPECIFIED
}

// patternProto is a stored pattern as the caller tenant sees it at now:
// its state and effective success rate derived then, shared when another
// tenant owns it.
func patternProto(r *store.PatternRecord, tenant string, now time.Time) *baagentv1.InteractionPattern {
	p := &r.Pattern
	out := &baagentv1.InteractionPattern{
		Id:                   p.ID,
		Tenant:               p.Tenant,
		Name:                 p.Name,
		Description:          p.Description,
		TaskType:             p.Signature.TaskType,
		EntityTypes:          slices.Clone(p.Signature.EntityTypes),
		Entities:             slices.Clone(p.Entities),
		UsageCount:           clamp32(p.UsageCount),
		SuccessCount:         clamp32(p.SuccessCount),
		FailureCount:         clamp32(p.FailureCount),
		ConsecutiveFailures:  clamp32(p.ConsecutiveFailures),
		SuccessRate:          p.SuccessRate,
		EffectiveSuccessRate: patterns.EffectiveSuccessRate(p, now),
		AvgDurationMs:        p.AvgDurationMs,
		State:                patternStateProto(patterns.Evaluate(p, now)),
		CreatedAt:            timestamp(p.CreatedAt),
		UpdatedAt:            timestamp(p.UpdatedAt),
		LastQueriedAt:        timestamp(p.LastQueriedAt),
		LastUsedAt:           timestamp(p.LastUsedAt),
		Version:              r.Version,
		Shared:               p.Tenant != tenant,
		SuccessFactors: &baagentv1.PatternSuccessFactors{
			ClarificationsNeeded: clamp32(p.SuccessFactors.ClarificationsNeeded),
			CriticalDecisions:    slices.Clone(p.SuccessFactors.CriticalDecisions),
			CommonCorrections:    slices.Clone(p.SuccessFactors.CommonCorrections),
		},
	}
	for _, st := range p.Steps {
		out.Steps = append(out.Steps, &baagentv1.PatternStep{
			Description:    st.Description,
			Tools:          slices.Clone(st.Tools),
			ExpectedOutput: st.ExpectedOutput,
			Corrections:    slices.Clone(st.Corrections),
		})
	}
	for _, c := range p.ToolChains {
		out.ToolChains = append(out.ToolChains, &baagentv1.ToolChain{Tools: slices.Clone(c)})
	}
	for _, d := range p.Decisions {
		pd := &baagentv1.PatternDecision{Question: d.Question, Recommended: d.Recommended}
		if len(d.Choices) > 0 {
			pd.Choices = make(map[string]int32, len(d.Choices))
			for k, v := range d.Choices {
				pd.Choices[k] = clamp32(v)
			}
		}
		out.Decisions = append(out.Decisions, pd)
	}
	return out
}

func breakdownProto(b patterns.Breakdown) *baagentv1.PatternScore {
	return &baagentv1.PatternScore{
		Score:          b.Score,
		SignatureMatch: b.SignatureMatch,
		EntityOverlap:  b.EntityOverlap,
		Recent:         b.Recent,
		HighSuccess:    b.HighSuccess,
	}
}

func grantProto(g store.PatternGrant) *baagentv1.PatternGrant {
	return &baagentv1.PatternGrant{
		OwnerTenant:   g.Owner,
		PatternId:     g.PatternID,
		GranteeTenant: g.Grantee,
		CreatedAt:     timestamp(g.CreatedAt),
	}
}

// traceFromProto converts a trace within the bounds above: lists cut to
// their caps, text cut on a rune boundary with NUL characters removed,
// counts and step references clamped, the impact one of high, medium, low
// or empty. It does not scrub (scrubTrace does).
func traceFromProto(in *baagentv1.InteractionTrace) patterns.Trace {
	t := patterns.Trace{
		ConversationID:     in.GetConversationId(),
		RunID:              in.GetRunId(),
		UserGoal:           cleanText(in.GetUserGoal(), MaxGoalBytes),
		FinalResult:        cleanText(in.GetFinalResult(), MaxTraceResultBytes),
		Success:            in.GetSuccess(),
		DurationMs:         max(in.GetDurationMs(), 0),
		HumanInterventions: int(max(in.GetHumanInterventions(), 0)),
	}
	for _, c := range capped(in.GetClarifications(), MaxTraceClarifications) {
		t.Clarifications = append(t.Clarifications, patterns.ClarificationQA{
			Question: cleanText(c.GetQuestion(), MaxTraceTextBytes),
			Answer:   cleanText(c.GetAnswer(), MaxTraceTextBytes),
		})
	}
	for _, d := range capped(in.GetDecisions(), MaxTraceDecisions) {
		pd := patterns.Decision{
			Question:    cleanText(d.GetQuestion(), MaxTraceTextBytes),
			Recommended: cleanText(d.GetRecommended(), MaxTraceLabelBytes),
			UserChoice:  cleanText(d.GetUserChoice(), MaxTraceLabelBytes),
			Impact:      impact(d.GetImpact()),
		}
		for _, o := range capped(d.GetOptions(), MaxTraceOptions) {
			pd.Options = append(pd.Options, cleanText(o, MaxTraceLabelBytes))
		}
		t.Decisions = append(t.Decisions, pd)
	}
	for _, s := range capped(in.GetPlanSteps(), MaxTracePlanSteps) {
		t.PlanSteps = append(t.PlanSteps, patterns.PlanStep{
			Description:    cleanText(s.GetDescription(), MaxTraceTextBytes),
			Tools:          toolNames(s.GetTools()),
			ExpectedOutput: cleanText(s.GetExpectedOutput(), MaxTraceTextBytes),
			Done:           s.GetDone(),
		})
	}
	for _, c := range capped(in.GetToolCalls(), MaxTraceToolCalls) {
		t.ToolCalls = append(t.ToolCalls, patterns.ToolCall{
			Tool:     toolName(c.GetTool()),
			Success:  c.GetSuccess(),
			PlanStep: stepRef(c.GetPlanStep()),
		})
	}
	for _, c := range capped(in.GetCorrections(), MaxTraceCorrections) {
		t.Corrections = append(t.Corrections, patterns.Correction{
			PlanStep:   stepRef(c.GetPlanStep()),
			AgentError: cleanText(c.GetAgentError(), MaxTraceTextBytes),
			HumanFix:   cleanText(c.GetHumanFix(), MaxTraceTextBytes),
			Tools:      toolNames(c.GetTools()),
		})
	}
	return t
}

// scrubTrace replaces personal data and secrets in every free-text field
// of t, as AddEpisode does for episodes, and returns how many it replaced.
func scrubTrace(t *patterns.Trace) int {
	n := 0
	s := func(p *string) {
		if *p == "" {
			return
		}
		var k int
		*p, k = scrub.Scrub(*p)
		n += k
	}
	s(&t.UserGoal)
	s(&t.FinalResult)
	for i := range t.Clarifications {
		s(&t.Clarifications[i].Question)
		s(&t.Clarifications[i].Answer)
	}
	for i := range t.Decisions {
		d := &t.Decisions[i]
		s(&d.Question)
		s(&d.Recommended)
		s(&d.UserChoice)
		for j := range d.Options {
			s(&d.Options[j])
		}
	}
	for i := range t.PlanSteps {
		s(&t.PlanSteps[i].Description)
		s(&t.PlanSteps[i].ExpectedOutput)
	}
	for i := range t.Corrections {
		s(&t.Corrections[i].AgentError)
		s(&t.Corrections[i].HumanFix)
	}
	return n
}

// capped is xs cut to at most n items.
func capped[T any](xs []T, n int) []T {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

// cleanText removes NUL characters (PostgreSQL stores none) and cuts s to
// at most n bytes on a rune boundary.
func cleanText(s string, n int) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return textcut.Plain(s, n)
}

func toolName(s string) string { return strings.TrimSpace(cleanText(s, MaxToolNameBytes)) }

func toolNames(xs []string) []string {
	var out []string
	for _, x := range capped(xs, MaxTraceStepTools) {
		if x = toolName(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func stepRef(n int32) int {
	if n < 0 || n > maxTracePlanStepRef {
		return 0
	}
	return int(n)
}

func impact(s string) string {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "high", "medium", "low":
		return s
	}
	return ""
}

// applyEdit applies a validated, scrubbed edit to p at now.
func applyEdit(p *patterns.Pattern, e *baagentv1.PatternEdit, now time.Time) {
	if e.Name != nil {
		p.Name = strings.TrimSpace(e.GetName())
	}
	if e.Description != nil {
		p.Description = e.GetDescription()
	}
	if e.GetReplaceSteps() {
		steps := make([]patterns.Step, 0, len(e.GetSteps()))
		for _, st := range e.GetSteps() {
			steps = append(steps, patterns.Step{
				Description:    st.GetDescription(),
				Tools:          slices.Clone(st.GetTools()),
				ExpectedOutput: st.GetExpectedOutput(),
				Corrections:    slices.Clone(st.GetCorrections()),
			})
		}
		p.Steps = steps
	}
	if tc := e.GetToolChain(); tc != nil {
		chain := slices.Clone(tc.GetTools())
		out := [][]string{chain}
		for _, c := range p.ToolChains {
			if !slices.Equal(c, chain) && len(out) < patterns.MaxToolChains {
				out = append(out, c)
			}
		}
		p.ToolChains = out
	}
	p.UpdatedAt = now
}

// scrubEdit replaces personal data and secrets in the edit's free text:
// a pattern may be shared with other tenants.
func scrubEdit(e *baagentv1.PatternEdit) {
	if e.Name != nil {
		v, _ := scrub.Scrub(e.GetName())
		e.Name = &v
	}
	if e.Description != nil {
		v, _ := scrub.Scrub(e.GetDescription())
		e.Description = &v
	}
	for _, st := range e.GetSteps() {
		st.Description, _ = scrub.Scrub(st.GetDescription())
		st.ExpectedOutput, _ = scrub.Scrub(st.GetExpectedOutput())
		for i, c := range st.GetCorrections() {
			st.Corrections[i], _ = scrub.Scrub(c)
		}
	}
}
