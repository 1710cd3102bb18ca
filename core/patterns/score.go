package patterns

import (
	"sort"
	"strings"
	"time"
)

// Query is a new request as retrieval sees it.
type Query struct {
	Signature Signature
	Entities  []string
}

// Mode is what a run does with a matched pattern.
type Mode int

// Reuse modes.
const (
	// ModeNone: the score is below ReferenceFrom; the run plans from scratch.
	ModeNone Mode = iota
	// ModeReference: the run plans with the pattern as a reference and says
	// so.
	ModeReference
	// ModeReuse: the user is asked whether to reuse the pattern.
	ModeReuse
)

func (m Mode) String() string {
	switch m {
	case ModeReuse:
		return "reuse"
	case ModeReference:
		return "reference"
	}
	return "none"
}

// ModeFor is the reuse mode of a score: above ReuseAbove reuse, from
// ReferenceFrom reference, else none.
func ModeFor(score float64) Mode {
	switch {
	case score > ReuseAbove:
		return ModeReuse
	case score >= ReferenceFrom:
		return ModeReference
	}
	return ModeNone
}

// Breakdown is a score with its parts.
type Breakdown struct {
	Score          float64
	SignatureMatch bool
	EntityOverlap  float64 // Jaccard, 0..1
	Recent         bool
	HighSuccess    bool
}

// Score scores a pattern against a query at now:
// SignatureWeight if the signatures match, plus EntityOverlapWeight times
// the entity overlap, plus RecencyWeight if the pattern was updated within
// RecencyWindow, plus SuccessWeight if its (decayed) success rate is above
// SuccessBonusAbove.
func Score(q Query, p *Pattern, now time.Time) Breakdown {
	return prepare(q).score(p, now)
}

// prepared is a query normalised once for scoring many patterns.
type prepared struct {
	sig      Signature
	entities map[string]struct{}
}

func prepare(q Query) prepared {
	pq := prepared{sig: Signature{TaskType: q.Signature.TaskType, EntityTypes: normalize(q.Signature.EntityTypes)}}
	es := normalize(q.Entities)
	pq.entities = make(map[string]struct{}, len(es))
	for _, e := range es {
		pq.entities[e] = struct{}{}
	}
	return pq
}

func (q prepared) score(p *Pattern, now time.Time) Breakdown {
	b := Breakdown{
		SignatureMatch: q.sig.TaskType != "" && q.sig.TaskType == p.Signature.TaskType && typesMatch(q.sig.EntityTypes, p.Signature.EntityTypes),
		EntityOverlap:  q.overlap(p.Entities),
		Recent:         !p.UpdatedAt.IsZero() && now.Sub(p.UpdatedAt) <= RecencyWindow,
		HighSuccess:    EffectiveSuccessRate(p, now) > SuccessBonusAbove,
	}
	if b.SignatureMatch {
		b.Score += SignatureWeight
	}
	b.Score += EntityOverlapWeight * b.EntityOverlap
	if b.Recent {
		b.Score += RecencyWeight
	}
	if b.HighSuccess {
		b.Score += SuccessWeight
	}
	return b
}

// overlap is the Jaccard index of the query's entities and a pattern's,
// whose entities are kept lower-cased and unique (normalizeEntity).
func (q prepared) overlap(pe []string) float64 {
	if len(q.entities) == 0 && len(pe) == 0 {
		return 0
	}
	inter := 0
	for _, e := range pe {
		if _, ok := q.entities[e]; ok {
			inter++
		}
	}
	return float64(inter) / float64(len(q.entities)+len(pe)-inter)
}

// typesMatch is the entity-type half of SignatureMatch on normalised
// lists: both empty, or a Jaccard index of at least one half.
func typesMatch(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	if sortedUnique(b) {
		return jaccard(a, b) >= 0.5
	}
	return jaccard(a, normalize(b)) >= 0.5
}

func sortedUnique(xs []string) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i-1] >= xs[i] {
			return false
		}
	}
	for _, x := range xs {
		if x != strings.ToLower(strings.TrimSpace(x)) {
			return false
		}
	}
	return true
}

// SignatureMatch reports whether two signatures name the same kind of
// task: the same task type, and entity types that overlap by at least half
// (Jaccard ≥ 0.5; two empty sets match).
func SignatureMatch(a, b Signature) bool {
	if a.TaskType == "" || a.TaskType != b.TaskType {
		return false
	}
	return typesMatch(normalize(a.EntityTypes), b.EntityTypes)
}

// Candidate is a pattern retrieval offers, with its score and mode.
type Candidate struct {
	Pattern   *Pattern
	Breakdown Breakdown
	Mode      Mode
}

// Rank scores the patterns that may be offered (Evaluate is StateActive)
// and returns at most MaxCandidates whose mode is not ModeNone, best first
// (ties: the higher success rate, then the more recently updated, then the
// id).
func Rank(q Query, ps []*Pattern, now time.Time) []Candidate {
	var out []Candidate
	pq := prepare(q)
	for _, p := range ps {
		if Evaluate(p, now) != StateActive {
			continue
		}
		b := pq.score(p, now)
		if m := ModeFor(b.Score); m != ModeNone {
			out = append(out, Candidate{Pattern: p, Breakdown: b, Mode: m})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Breakdown.Score != b.Breakdown.Score {
			return a.Breakdown.Score > b.Breakdown.Score
		}
		ra, rb := EffectiveSuccessRate(a.Pattern, now), EffectiveSuccessRate(b.Pattern, now)
		if ra != rb {
			return ra > rb
		}
		if !a.Pattern.UpdatedAt.Equal(b.Pattern.UpdatedAt) {
			return a.Pattern.UpdatedAt.After(b.Pattern.UpdatedAt)
		}
		return a.Pattern.ID < b.Pattern.ID
	})
	if len(out) > MaxCandidates {
		out = out[:MaxCandidates]
	}
	return out
}

// normalize lower-cases, trims and de-duplicates, sorted.
func normalize(xs []string) []string {
	seen := make(map[string]struct{}, len(xs))
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		x = strings.ToLower(strings.TrimSpace(x))
		if x == "" {
			continue
		}
		if _, ok := seen[x]; ok {
			continue
		}
		seen[x] = struct{}{}
		out = append(out, x)
	}
	sort.Strings(out)
	return out
}

// jaccard is |a ∩ b| / |a ∪ b| of two sorted, unique lists; 0 when both
// are empty.
func jaccard(a, b []string) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 0
	}
	inter, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}
