package main

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/skills"
)

// startSkills serves the sample skills on loopback and returns the flag that
// points baagentctl at it.
func startSkills(t *testing.T) string {
	t.Helper()
	s, err := skills.New(skills.Options{Root: "../../examples/skills", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	conn := vt.Serve(t, s.Register)
	return "--skills-addr=" + conn.Target()
}

func TestSkillsList(t *testing.T) {
	t.Parallel()

	addr := startSkills(t)
	code, stdout, stderr := ctl(t, addr, "skills", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"NAME", "sales-analysis", "system", "sql_query,file_read,artifact_read", "executive-summary", "data-quality-check"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, stdout)
		}
	}

	// Flags after the subcommand, --json, and a tenant with a project.
	code, stdout, stderr = ctl(t, addr, "skills", "list", "--tenant", "acme", "--project=north-review", "--json", "--invalid")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var resp baagentv1.ListSkillsResponse
	if err := protojson.Unmarshal([]byte(stdout), &resp); err != nil {
		t.Fatalf("--json is not a ListSkillsResponse: %v\n%s", err, stdout)
	}
	got := map[string]baagentv1.SkillScope{}
	for _, s := range resp.GetSkills() {
		got[s.GetName()] = s.GetScope()
	}
	if got["executive-summary"] != baagentv1.SkillScope_SKILL_SCOPE_TENANT || got["north-region-focus"] != baagentv1.SkillScope_SKILL_SCOPE_PROJECT {
		t.Errorf("acme/north-review: %v", got)
	}
	if _, ok := got["data-quality-check"]; ok {
		t.Error("acme disabled data-quality-check but it is listed")
	}
	if !strings.Contains(stdout, `"allowed_tools"`) {
		t.Errorf("JSON does not use the proto field names:\n%s", stdout)
	}
}

func TestSkillsListReportsInvalidSkills(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	if err := os.MkdirAll(root+"/broken", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root+"/broken/SKILL.md", []byte("---\nname: broken\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := skills.New(skills.Options{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := "--skills-addr=" + vt.Serve(t, s.Register).Target()
	code, stdout, _ := ctl(t, addr, "skills", "list", "--invalid")
	if code != 0 || !strings.Contains(stdout, "1 not loaded") || !strings.Contains(stdout, "description: required") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}

func TestSkillsShow(t *testing.T) {
	t.Parallel()

	addr := startSkills(t)
	// Default level 2: metadata and instructions, no resource contents.
	code, stdout, stderr := ctl(t, addr, "skills", "show", "sales-analysis")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"name:", "sales-analysis", "allowed-tools:", "resources:", "references/schema.md", "# Sales analysis"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "| orders |") {
		t.Error("level 2 printed a resource's content")
	}

	code, stdout, _ = ctl(t, addr, "skills", "show", "sales-analysis", "--level", "1")
	if code != 0 || strings.Contains(stdout, "# Sales analysis") {
		t.Errorf("level 1: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = ctl(t, addr, "skills", "show", "--level=3", "sales-analysis")
	if code != 0 || !strings.Contains(stdout, "==> references/schema.md") || !strings.Contains(stdout, "| orders |") {
		t.Errorf("level 3: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = ctl(t, addr, "--json", "skills", "show", "executive-summary", "--tenant", "acme")
	var resp baagentv1.GetSkillResponse
	if code != 0 || protojson.Unmarshal([]byte(stdout), &resp) != nil || resp.GetMetadata().GetScope() != baagentv1.SkillScope_SKILL_SCOPE_TENANT ||
		!strings.Contains(resp.GetBody(), "Acme board brief") {
		t.Errorf("acme's executive-summary: exit %d\n%s", code, stdout)
	}

	// --resource prints the file itself.
	want, err := os.ReadFile("../../examples/skills/sales-analysis/references/schema.md")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = ctl(t, addr, "skills", "show", "sales-analysis", "--resource", "references/schema.md")
	if code != 0 || stdout != string(want) {
		t.Errorf("--resource: exit %d, %d bytes, want %d", code, len(stdout), len(want))
	}
}

func TestSkillsErrors(t *testing.T) {
	t.Parallel()

	addr := startSkills(t)
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"skills"}, 2, "Available Commands:"},
		{[]string{"skills", "frob"}, 2, `unknown command "frob"`},
		{[]string{"skills", "show"}, 2, "want exactly one skill NAME"},
		{[]string{"skills", "show", "a", "b"}, 2, "want exactly one skill NAME"},
		{[]string{"skills", "show", "sales-analysis", "--level", "4"}, 2, "--level must be 1, 2 or 3"},
		{[]string{"skills", "list", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"skills", "list", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"skills", "show", "nope"}, 1, `skills: NotFound: skill "nope" not found for tenant "default"`},
		{[]string{"skills", "show", "data-quality-check", "--tenant", "acme"}, 1, "FailedPrecondition: skill \"data-quality-check\" is not available to tenant \"acme\": disabled by tenant.yaml"},
		{[]string{"skills", "list", "--tenant", "a.b"}, 1, "InvalidArgument: invalid argument: tenant: must be"},
		{[]string{"skills", "show", "sales-analysis", "--resource", "../executive-summary/SKILL.md"}, 1, "InvalidArgument: invalid argument: path:"},
		{[]string{"skills", "show", "Sales"}, 1, "InvalidArgument: invalid argument: name:"},
	}
	for _, c := range cases {
		code, _, stderr := ctl(t, append([]string{addr}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.stderr)
		}
	}
	if code, _, _ := ctl(t, addr, "skills", "-h"); code != 0 {
		t.Errorf("skills -h: exit %d", code)
	}
}
