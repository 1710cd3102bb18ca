package toolrunner

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

func TestSeedFormatting(t *testing.T) {
	t.Parallel()

	const (
		brief    = baagentv1.OutputLevel_OUTPUT_LEVEL_BRIEF
		standard = baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD
		full     = baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	)
	long := strings.Repeat("é", 600)
	for _, tc := range []struct {
		name     string
		data     any
		level    baagentv1.OutputLevel
		want     string
		complete bool
	}{
		{"list brief", []any{1.0, 2.0}, brief, "Found 2 items", false},
		{"empty list brief", []any{}, brief, "Found 0 items", true},
		{"object brief", map[string]any{"a": 1.0, "b": 2.0}, brief, "Result has 2 fields", false},
		{"success object brief", map[string]any{"success": true, "message": "saved"}, brief, "Success: saved", false},
		{"failed object brief", map[string]any{"success": false}, brief, "Failed: Operation completed", false},
		{"text brief", long, brief, strings.Repeat("é", 100), false},
		{"short text brief", "ok", brief, "ok", true},
		{"list standard", []any{"a", "b"}, standard, "Found 2 items:\n  - a\n  - b", true},
		{"object standard", map[string]any{"k": "v"}, standard, "{\n  \"k\": \"v\"\n}", true},
		{"text standard", long, standard, strings.Repeat("é", 500), false},
		{"number standard", 3.5, standard, "3.5", true},
		{"typed slice", []int{1, 2, 3, 4, 5}, standard, "Found 5 items:\n  - 1\n  - 2\n  - 3\n  ... and 2 more", false},
		{"object full", map[string]any{"k": []any{1.0}}, full, "{\n  \"k\": [\n    1\n  ]\n}", true},
		{"document brief", tool.Document{Text: "a\nb", Brief: "2 lines"}, brief, "2 lines", false},
		{"document standard", tool.Document{Text: "a\nb", Brief: "2 lines"}, standard, "a\nb", true},
	} {
		r := render(tc.data, tc.level)
		if r.observation != tc.want || r.complete != tc.complete {
			t.Errorf("%s: %q (complete %v), want %q (%v)", tc.name, r.observation, r.complete, tc.want, tc.complete)
		}
	}
	if s := render([]any{map[string]any{"id": 1.0, "name": "x"}}, standard).summary; s != "List with 1 items. First item keys: [id, name]" {
		t.Errorf("list summary %q", s)
	}
	if s := render(map[string]any{"b": 1.0, "a": 2.0}, standard).summary; s != "Dictionary with 2 keys. Top keys: a, b" {
		t.Errorf("object summary %q", s)
	}
	if c := render("text", full).content; string(c) != "text" {
		t.Errorf("text artifact content %q", c)
	}
}
