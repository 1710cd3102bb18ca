package patterns

import (
	"math"
	"time"
)

// Evaluate applies the quality gates to a pattern at now. The state is
// derived from the pattern's counters and times alone, so it is the same
// on every replica and recovers by itself when the evidence changes (a
// success ends an untrusted streak, a use ends an archive).
//
// Order: archived (not used for ArchiveAfter) wins over untrusted (more than
// UntrustedAfterFailures failures in a row), which wins over draft (success
// rate below DraftBelowRate); a pattern passing none of those is active when
// it has MinSuccesses successes, a success rate of at least MinSuccessRate
// and was queried within QueryWindow, and a candidate otherwise.
func Evaluate(p *Pattern, now time.Time) State {
	lastUse := p.LastUsedAt
	if p.UpdatedAt.After(lastUse) {
		lastUse = p.UpdatedAt
	}
	if lastUse.IsZero() {
		lastUse = p.CreatedAt
	}
	switch {
	case !lastUse.IsZero() && now.Sub(lastUse) > ArchiveAfter:
		return StateArchived
	case p.ConsecutiveFailures > UntrustedAfterFailures:
		return StateUntrusted
	case p.UsageCount > 0 && EffectiveSuccessRate(p, now) < DraftBelowRate:
		return StateDraft
	case p.SuccessCount >= MinSuccesses &&
		EffectiveSuccessRate(p, now) >= MinSuccessRate &&
		!p.LastQueriedAt.IsZero() && now.Sub(p.LastQueriedAt) <= QueryWindow:
		return StateActive
	}
	return StateCandidate
}

// EffectiveSuccessRate is the success rate with the freshness penalty of
// a pattern left untouched: DecayFactor for every full DecayAfter since its
// last outcome or edit.
func EffectiveSuccessRate(p *Pattern, now time.Time) float64 {
	if p.UpdatedAt.IsZero() || !now.After(p.UpdatedAt) {
		return p.SuccessRate
	}
	periods := float64(now.Sub(p.UpdatedAt) / DecayAfter)
	return p.SuccessRate * math.Pow(DecayFactor, periods)
}
