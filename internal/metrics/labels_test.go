package metrics

import "testing"

func TestLabelSet(t *testing.T) {
	t.Parallel()

	s := NewLabelSet("gpt-4o", "", "claude-3-5-sonnet", "gpt-4o")
	if s.Len() != 2 {
		t.Errorf("Len = %d, want 2 (duplicates and empty values dropped)", s.Len())
	}
	for in, want := range map[string]string{
		"gpt-4o":            "gpt-4o",
		"claude-3-5-sonnet": "claude-3-5-sonnet",
		"GPT-4O":            OtherLabel, // exact names only
		"gpt-4o-evil":       OtherLabel,
		"":                  OtherLabel,
	} {
		if got := s.Value(in); got != want {
			t.Errorf("Value(%q) = %q, want %q", in, got, want)
		}
	}
	var zero LabelSet
	if got := zero.Value("gpt-4o"); got != OtherLabel {
		t.Errorf("zero LabelSet: Value = %q, want %q", got, OtherLabel)
	}
}
