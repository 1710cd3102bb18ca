package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/skills"
	"github.com/baagent/baagent/services/skills/skillmd"
)

const lenientSkill = "../../services/skills/testdata/lenient/pdf-forms"

func TestSkillsValidate(t *testing.T) {
	t.Parallel()

	code, stdout, stderr := ctl(t, "skills", "validate", "../../examples/skills/sales-analysis", lenientSkill)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"../../examples/skills/sales-analysis: valid\n",
		lenientSkill + ": 2 violations\n",
		"  description: must be at most 1024 characters, got 1068 (the service loads the skill with a warning)\n",
		`  front matter: unknown key "x-author-notes"`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if code, stdout, _ = ctl(t, "skills", "validate", "../../examples/skills/sales-analysis"); code != 0 {
		t.Fatalf("valid folder: exit %d\n%s", code, stdout)
	}

	code, stdout, _ = ctl(t, "skills", "validate", "--json", lenientSkill, filepath.Join(t.TempDir(), "missing"))
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 1 || len(lines) != 2 {
		t.Fatalf("--json: exit %d\n%s", code, stdout)
	}
	var r skillmd.Report
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil || r.Name != "pdf-forms" || len(r.Violations) != 2 || !r.Violations[0].Lenient {
		t.Fatalf("--json report %+v, %v", r, err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.Violations[0].String() != "folder: not found" {
		t.Fatalf("--json missing %+v, %v", r, err)
	}
	if code, _, stderr = ctl(t, "skills", "validate"); code != 2 || !strings.Contains(stderr, "want at least one skill folder") {
		t.Fatalf("no folder: exit %d %s", code, stderr)
	}
}

func TestSkillsListShowsWarnings(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	data, err := os.ReadFile(filepath.Join(lenientSkill, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "pdf-forms"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pdf-forms", "SKILL.md"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := skills.New(skills.Options{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	conn := vt.Serve(t, s.Register)
	code, stdout, stderr := ctl(t, "--skills-addr="+conn.Target(), "skills", "list")
	if code != 0 || !strings.Contains(stdout, "loaded with warnings:\n  pdf-forms: description: must be at most 1024 characters, got 1068\n") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}
