package patterns

import "time"

// The constants of the rules. They are the product's defaults, documented
// in docs/concepts/patterns.md; tests pin each of them.
const (
	// Retrieval score parts.
	SignatureWeight     = 0.50 // the task signature matches
	EntityOverlapWeight = 0.20 // times the entity overlap (Jaccard, 0..1)
	RecencyWeight       = 0.15 // updated within RecencyWindow
	SuccessWeight       = 0.15 // success rate above SuccessBonusAbove
	RecencyWindow       = 7 * 24 * time.Hour
	SuccessBonusAbove   = 0.8

	// Reuse modes by score: above ReuseAbove the user is asked whether to
	// reuse; from ReferenceFrom to ReuseAbove the pattern is a reference;
	// below ReferenceFrom the run plans from scratch.
	ReuseAbove    = 0.8
	ReferenceFrom = 0.5
	// MaxCandidates is how many patterns retrieval returns.
	MaxCandidates = 3

	// Admission gates.
	MinSuccesses   = 3
	MinSuccessRate = 0.6
	QueryWindow    = 7 * 24 * time.Hour

	// Demotion gates.
	UntrustedAfterFailures = 5 // more than this many failures in a row
	DraftBelowRate         = 0.4
	ArchiveAfter           = 180 * 24 * time.Hour

	// Decay of patterns left untouched.
	DecayAfter  = 90 * 24 * time.Hour
	DecayFactor = 0.8

	// Size caps, so that a pattern stays small whatever its history.
	MaxEntities           = 50
	MaxToolChains         = 5
	MaxToolChainLength    = 20
	MaxSteps              = 20
	MaxCorrectionsPerStep = 5
	MaxCommonCorrections  = 10
	MaxDecisions          = 20
)
