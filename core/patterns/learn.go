package patterns

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FromTrace extracts a new pattern from a successful trace: its signature,
// its critical steps (the plan's completed steps, or one step per tool when
// the run had no plan), its tool chain, and its success factors. It returns
// nil for a failed trace: patterns are learned only from success.
func FromTrace(t *Trace, id, tenant string, now time.Time) *Pattern {
	if t == nil || !t.Success {
		return nil
	}
	sig := NewSignature(t.UserGoal, t.EntityTypes)
	p := &Pattern{
		ID:          id,
		Tenant:      tenant,
		Signature:   sig,
		Name:        patternName(sig),
		Description: cut(t.UserGoal, 200),
		Entities:    mergeCapped(nil, normalize(t.Entities), MaxEntities),
		Steps:       criticalSteps(t),
		CreatedAt:   now,
		UpdatedAt:   now,
		// Learning a trace is its first use.
		UsageCount:    1,
		SuccessCount:  1,
		SuccessRate:   1,
		AvgDurationMs: max(t.DurationMs, 0),
		LastUsedAt:    now,
	}
	if chain := toolChain(t.ToolCalls); len(chain) > 0 {
		p.ToolChains = [][]string{chain}
	}
	p.SuccessFactors.ClarificationsNeeded = len(t.Clarifications)
	for _, d := range t.Decisions {
		if strings.EqualFold(d.Impact, "high") && d.Question != "" {
			p.SuccessFactors.CriticalDecisions = appendCapped(p.SuccessFactors.CriticalDecisions, d.Question, MaxDecisions)
		}
		recordDecision(p, d)
	}
	for _, c := range t.Corrections {
		applyCorrection(p, c)
	}
	return p
}

// Learn folds a finished trace into a tenant's patterns: the best pattern
// whose signature matches the trace's evolves with it (a failure counts
// against it); with none, a successful trace becomes a new candidate made
// by newPattern (which may return nil to learn nothing new). It returns
// the pattern changed or created, and whether it is new; nil when the
// trace changed nothing.
//
// A pattern learned while none of the goal's entities were known has no
// entity types; it takes any trace of its task type, and the first
// successful one that knows entity types gives it theirs (see Evolve).
func Learn(t *Trace, ps []*Pattern, now time.Time, newPattern func() *Pattern) (*Pattern, bool) {
	q := Query{Signature: NewSignature(t.UserGoal, t.EntityTypes), Entities: t.Entities}
	var best *Pattern
	var bestScore float64
	for _, p := range ps {
		if !learnsInto(q.Signature, p.Signature) {
			continue
		}
		if s := Score(q, p, now).Score; best == nil || s > bestScore || (s == bestScore && p.ID < best.ID) {
			best, bestScore = p, s
		}
	}
	if best != nil {
		Evolve(best, t, now)
		return best, false
	}
	if !t.Success {
		return nil, false
	}
	p := newPattern()
	if p == nil {
		return nil, false
	}
	*p = *FromTrace(t, p.ID, p.Tenant, now)
	return p, true
}

// learnsInto is the signature match of learning: SignatureMatch, or the
// same task type when the pattern knows no entity types yet.
func learnsInto(trace, p Signature) bool {
	if len(p.EntityTypes) == 0 && trace.TaskType != "" && trace.TaskType == p.TaskType {
		return true
	}
	return SignatureMatch(trace, p)
}

func criticalSteps(t *Trace) []Step {
	var steps []Step
	for i, ps := range t.PlanSteps {
		if !ps.Done || len(steps) == MaxSteps {
			continue
		}
		tools := slices.Clone(ps.Tools)
		if len(tools) == 0 {
			tools = stepTools(t.ToolCalls, i+1)
		}
		steps = append(steps, Step{Description: cut(ps.Description, 500), Tools: tools, ExpectedOutput: cut(ps.ExpectedOutput, 500)})
	}
	if len(t.PlanSteps) > 0 {
		return steps
	}
	for _, tool := range toolChain(t.ToolCalls) {
		if len(steps) == MaxSteps {
			break
		}
		steps = append(steps, Step{Description: "Use " + tool, Tools: []string{tool}})
	}
	return steps
}

// stepTools are the distinct tools the successful calls of a plan step
// used, in order.
func stepTools(calls []ToolCall, step int) []string {
	var out []string
	for _, c := range calls {
		if c.PlanStep == step && c.Success && c.Tool != "" && !slices.Contains(out, c.Tool) {
			out = append(out, c.Tool)
		}
	}
	return out
}

func patternName(s Signature) string {
	name := strings.ReplaceAll(s.TaskType, "_", " ")
	if len(s.EntityTypes) > 0 {
		name = fmt.Sprintf("%s of %s", name, strings.Join(s.EntityTypes, ", "))
	}
	return cut(name, 120)
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
