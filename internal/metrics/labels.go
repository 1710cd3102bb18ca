package metrics

// OtherLabel is the label value that stands for every value outside a
// [LabelSet].
const OtherLabel = "other"

// LabelSet bounds the values of one label whose input is not under the
// operator's control (a model a client names, say): values in the set are
// reported as they are, any other as [OtherLabel]. Each distinct label value
// is a time series held in memory forever and served on every scrape, so a
// label fed from requests must map onto a set fixed at start-up.
//
// A LabelSet is immutable once built and safe for concurrent use. The zero
// value knows no values and reports everything as OtherLabel.
type LabelSet struct {
	known map[string]struct{}
}

// NewLabelSet returns the set of values; empty strings are ignored (an
// empty label value would read as a missing label).
func NewLabelSet(values ...string) LabelSet {
	known := make(map[string]struct{}, len(values))
	for _, v := range values {
		if v != "" {
			known[v] = struct{}{}
		}
	}
	return LabelSet{known: known}
}

// Value returns v when the set holds it, OtherLabel otherwise.
func (s LabelSet) Value(v string) string {
	if _, ok := s.known[v]; ok {
		return v
	}
	return OtherLabel
}

// Len is the number of values in the set (OtherLabel not counted).
func (s LabelSet) Len() int { return len(s.known) }
