package patterns

import (
	"slices"
	"time"
)

// Outcome is how a use of a pattern ended, with the run's trace.
type Outcome struct {
	Trace *Trace
}

// Evolve records a use of p (its reuse, its reference, or a new trace of
// the same task learned into it) and applies the evolution rules, at now:
//
//   - usage, success and failure counts, the failure streak and the success
//     rate (successes / uses); an outcome arriving after DecayAfter without
//     one is discounted by DecayFactor once;
//   - each correction adjusts its step: the fix is noted on the step and,
//     when the fix used other tools, they replace the step's tools; the fix
//     joins the common corrections;
//   - each decision counts the user's choice, and the recommendation moves
//     to the choice once it was chosen at least as often as the current one;
//   - a successful run faster than the pattern's average puts its tool chain
//     first.
//
// Evolve changes p in place; it never shrinks what it caps below the
// newest entries.
func Evolve(p *Pattern, t *Trace, now time.Time) {
	stale := !p.UpdatedAt.IsZero() && now.Sub(p.UpdatedAt) > DecayAfter
	p.UsageCount++
	if t.Success {
		p.SuccessCount++
		p.ConsecutiveFailures = 0
	} else {
		p.FailureCount++
		p.ConsecutiveFailures++
	}
	p.SuccessRate = float64(p.SuccessCount) / float64(p.UsageCount)
	if stale {
		p.SuccessRate *= DecayFactor
	}

	for _, c := range t.Corrections {
		applyCorrection(p, c)
	}
	for _, d := range t.Decisions {
		recordDecision(p, d)
	}
	if t.Success {
		chain := toolChain(t.ToolCalls)
		faster := p.AvgDurationMs == 0 || (t.DurationMs > 0 && t.DurationMs < p.AvgDurationMs)
		if len(chain) > 0 && faster {
			p.ToolChains = addChainFirst(p.ToolChains, chain)
		}
		if t.DurationMs > 0 {
			// The running mean of successful runs' durations.
			n := int64(p.SuccessCount)
			p.AvgDurationMs += (t.DurationMs - p.AvgDurationMs) / n
		}
		p.Entities = mergeCapped(p.Entities, normalize(t.Entities), MaxEntities)
		refineSignature(p, t)
	}
	p.UpdatedAt = now
	p.LastUsedAt = now
}

// refineSignature gives a pattern learned without entity types those of a
// successful trace that has some, renaming it when it bore the name made
// from its signature.
func refineSignature(p *Pattern, t *Trace) {
	types := normalize(t.EntityTypes)
	if len(p.Signature.EntityTypes) > 0 || len(types) == 0 {
		return
	}
	auto := p.Name == patternName(p.Signature)
	p.Signature.EntityTypes = types
	if auto {
		p.Name = patternName(p.Signature)
	}
}

func applyCorrection(p *Pattern, c Correction) {
	if c.HumanFix == "" {
		return
	}
	p.SuccessFactors.CommonCorrections = appendCapped(p.SuccessFactors.CommonCorrections, c.HumanFix, MaxCommonCorrections)
	i := c.PlanStep - 1
	if i < 0 || i >= len(p.Steps) {
		return
	}
	st := &p.Steps[i]
	st.Corrections = appendCapped(st.Corrections, c.HumanFix, MaxCorrectionsPerStep)
	if len(c.Tools) > 0 {
		st.Tools = slices.Clone(c.Tools)
	}
}

func recordDecision(p *Pattern, d Decision) {
	if d.Question == "" || d.UserChoice == "" {
		return
	}
	i := slices.IndexFunc(p.Decisions, func(x DecisionPreference) bool { return x.Question == d.Question })
	if i < 0 {
		if len(p.Decisions) >= MaxDecisions {
			return
		}
		rec := d.Recommended
		if rec == "" {
			rec = d.UserChoice
		}
		p.Decisions = append(p.Decisions, DecisionPreference{Question: d.Question, Recommended: rec, Choices: map[string]int{}})
		i = len(p.Decisions) - 1
	}
	pref := &p.Decisions[i]
	if pref.Choices == nil {
		pref.Choices = map[string]int{}
	}
	if _, known := pref.Choices[d.UserChoice]; !known && len(pref.Choices) >= 32 {
		return // a bounded set of options per question
	}
	pref.Choices[d.UserChoice]++
	if pref.Choices[d.UserChoice] >= pref.Choices[pref.Recommended] {
		pref.Recommended = d.UserChoice
	}
}

// toolChain is the run's successful tool calls in order, repeats in a row
// collapsed, at most MaxToolChainLength.
func toolChain(calls []ToolCall) []string {
	var out []string
	for _, c := range calls {
		if !c.Success || c.Tool == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1] == c.Tool {
			continue
		}
		if len(out) == MaxToolChainLength {
			break
		}
		out = append(out, c.Tool)
	}
	return out
}

func addChainFirst(chains [][]string, chain []string) [][]string {
	out := [][]string{chain}
	for _, c := range chains {
		if !slices.Equal(c, chain) && len(out) < MaxToolChains {
			out = append(out, c)
		}
	}
	return out
}

func appendCapped(xs []string, x string, limit int) []string {
	if i := slices.Index(xs, x); i >= 0 {
		xs = slices.Delete(xs, i, i+1)
	}
	xs = append(xs, x)
	if len(xs) > limit {
		xs = xs[len(xs)-limit:]
	}
	return xs
}

// mergeCapped adds the new entries after the old, without repeats, keeping
// the newest limit.
func mergeCapped(old, add []string, limit int) []string {
	out := slices.Clone(old)
	for _, x := range add {
		out = appendCapped(out, x, limit)
	}
	return out
}
