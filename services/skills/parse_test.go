package skills

import (
	"strings"
	"testing"
)

// fm wraps front matter lines into a SKILL.md with a short body.
func fm(lines ...string) string {
	return "---\n" + strings.Join(lines, "\n") + "\n---\n# Body\n"
}

// TestValidationRules checks each rule of the Agent Skills standard (and the
// service's own bounds) with the message an author sees.
func TestValidationRules(t *testing.T) {
	t.Parallel()

	const ok = "description: Does things."
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name, folder, file string
		want               string // substring of the error
	}{
		{"no front matter", "x", "# just markdown\n", "SKILL.md: must start with a '---' line that opens the YAML front matter"},
		{"empty file", "x", "", "SKILL.md: must start with a '---' line"},
		{"unclosed front matter", "x", "---\nname: x\n" + ok + "\n", "front matter: no closing '---' line"},
		{"opening line only", "x", "---", "front matter: no closing '---' line"},
		{"invalid YAML", "x", fm("name: [x", ok), "front matter: invalid YAML"},
		{"not a mapping", "x", fm("- a", "- b"), "front matter: must be a YAML mapping of keys to values"},
		{"invalid UTF-8", "x", fm("name: x\xff", ok), "SKILL.md: not valid UTF-8"},
		{"file too large", "x", fm("name: x", ok) + strings.Repeat("b", MaxSkillFileBytes), "SKILL.md: larger than 262144 bytes"},

		{"name missing", "x", fm(ok), "name: required"},
		{"name empty", "x", fm(`name: ""`, ok), "name: must not be empty"},
		{"name null", "x", fm("name:", ok), "name: must not be empty"},
		{"name a list", "x", fm("name: [a]", ok), "name: must be a string, not a list"},
		{"name too long", long(65), fm("name: "+long(65), ok), "name: must be at most 64 characters, got 65"},
		{"name leading hyphen", "-ab", fm("name: -ab", ok), "name: must not start with a hyphen"},
		{"name trailing hyphen", "ab-", fm("name: ab-", ok), "name: must not end with a hyphen"},
		{"name double hyphen", "a--b", fm("name: a--b", ok), "name: must not contain two hyphens in a row"},
		{"name uppercase", "other", fm("name: Data", ok), "name: may contain only lowercase letters, digits and hyphens; found 'D' at position 1"},
		{"name underscore", "a_b", fm("name: a_b", ok), "name: may contain only lowercase letters, digits and hyphens; found '_' at position 2"},
		{"name not the folder", "other", fm("name: mine", ok), `name: "mine" must equal the skill's folder name "other"`},

		{"description missing", "x", fm("name: x"), "description: required"},
		{"description empty", "x", fm("name: x", `description: "  "`), "description: must not be empty"},
		{"description with angle brackets", "x", fm("name: x", "description: use <b>bold</b>"), "description: must not contain '<' or '>'"},
		{"description with control character", "x", fm("name: x", `description: "bell\a"`), "description: must not contain control characters"},
		{"description a mapping", "x", fm("name: x", "description: {a: b}"), "description: must be a string, not a mapping"},

		{"license too long", "x", fm("name: x", ok, "license: "+long(1025)), "license: must be at most 1024 characters, got 1025"},
		{"compatibility a mapping", "x", fm("name: x", ok, "compatibility: {a: b}"), "compatibility: must be a string or a list of strings, not a mapping"},

		{"allowed-tools with a Claude Code pattern", "x", fm("name: x", ok, "allowed-tools: Bash(git:*) file_read"), "allowed-tools[0]: must be a tool name or glob: 1-64 characters of [A-Za-z0-9_-*?]"},
		{"allowed-tools list entry not a string", "x", fm("name: x", ok, "allowed-tools: [file_read, [a]]"), "allowed-tools[1]: must be a string"},
		{"allowed-tools a mapping", "x", fm("name: x", ok, "allowed-tools: {a: b}"), "allowed-tools: must be a string or a list of strings, not a mapping"},

		{"metadata not a mapping", "x", fm("name: x", ok, "metadata: [a]"), "metadata: must be a mapping of strings to strings, not a list"},
		{"metadata value a list", "x", fm("name: x", ok, "metadata: {team: [a]}"), `metadata["team"]: must be a string, not a list`},
		{"metadata key too long", "x", fm("name: x", ok, "metadata: {"+long(129)+": v}"), "key must be at most 128 bytes"},
		{"metadata value too long", "x", fm("name: x", ok, "metadata: {k: "+long(1025)+"}"), `metadata["k"]: must be at most 1024 bytes`},

		{"version with a space", "x", fm("name: x", ok, "version: 1 0"), "version: must be 1-64 bytes of valid UTF-8 without whitespace or control characters"},
		{"version a list", "x", fm("name: x", ok, "version: [1]"), "version: must be a string, not a list"},
		{"trigger empty", "x", fm("name: x", ok, `triggers: [sales, ""]`), "triggers[1]: must not be empty"},
		{"trigger too long", "x", fm("name: x", ok, "triggers: ["+long(257)+"]"), "triggers[0]: must be at most 256 characters"},
		{"too many triggers", "x", fm("name: x", ok, "triggers: ["+strings.Repeat("t,", 64)+"t]"), "triggers: must have at most 64 entries, got 65"},
		{"disable-model-invocation not a bool", "x", fm("name: x", ok, "disable-model-invocation: yes"), "disable-model-invocation: must be true or false"},
		{"model with a space", "x", fm("name: x", ok, "model: gpt 4o"), "model: must be 1-256 printable ASCII characters without spaces"},

		{"duplicate key", "x", fm("name: x", ok, "name: x"), `front matter: duplicate key "name" (line 3)`},
		{"non-string key", "x", fm("name: x", ok, "[a]: b"), "front matter: keys must be strings (line 3)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sk, err := parseSkillMD([]byte(c.file), c.folder)
			if err == nil {
				t.Fatalf("accepted: %+v", sk)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// TestValidationReportsEveryProblem: an author fixes all problems at once.
func TestValidationReportsEveryProblem(t *testing.T) {
	t.Parallel()

	_, err := parseSkillMD([]byte(fm("name: Bad", "license: [a]", "model: a b")), "other")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"description: required", "license: must be a string", "model: must be", "name: may contain only"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestFrontMatterYAMLLimits(t *testing.T) {
	t.Parallel()

	const head = "name: x\ndescription: d\n"
	cases := []struct {
		name, front, want string
	}{
		{"alias", head + "a: &a [1, 2]\nb: *a", "YAML aliases are not allowed (*a at line 4)"},
		{"alias that would expand", head + "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]", "YAML aliases are not allowed"},
		{"merge key", head + "base: &b {k: v}\nm:\n  <<: {k: v}", "YAML merge keys are not allowed"},
		{"deep nesting", head + "deep: " + strings.Repeat("[", 40) + strings.Repeat("]", 40), "nested deeper than 32 levels"},
		{"too many nodes", head + "many: [" + strings.Repeat("1,", 4096) + "1]", "more than 4096 YAML nodes"},
		{"front matter over the cap", head + "pad: " + strings.Repeat("p", MaxFrontMatterBytes), "front matter: longer than 16384 bytes"},
		{"many lines over the cap", head + strings.Repeat("# comment line\n", MaxFrontMatterBytes/15+1), "front matter: longer than 16384 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseSkillMD([]byte("---\n"+c.front+"\n---\nbody\n"), "x")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	// Just under the cap is fine.
	pad := MaxFrontMatterBytes - len(head) - len("pad: \n") - 1
	if _, err := parseSkillMD([]byte("---\n"+head+"pad: "+strings.Repeat("p", pad)+"\n---\nbody"), "x"); err != nil {
		t.Fatalf("front matter just under the cap: %v", err)
	}
}

func TestParseValidSkill(t *testing.T) {
	t.Parallel()

	src := "\uFEFF---\r\n" +
		"name: sales-report\r\n" +
		"description: |\r\n  Builds the monthly sales report.\r\n  Use for revenue questions.\r\n" +
		"license: Apache-2.0\r\n" +
		"compatibility: [gpt-4o, claude-sonnet-4-5]\r\n" +
		"allowed-tools: sql_query, file_read  mcp__crm__*\r\n" +
		"metadata: {team: analytics, tier: 2}\r\n" +
		"version: 1.10\r\n" +
		"triggers: revenue\r\n" +
		"disable-model-invocation: true\r\n" +
		"model: gpt-4o-mini\r\n" +
		"x-owner: {name: ana, shifts: [1, 2.5, true, null]}\r\n" +
		"x-when: 2025-01-01\r\n" +
		"---\r\n\r\n# Sales report\r\nDo it.\r\n\r\n"
	sk, err := parseSkillMD([]byte(src), "sales-report")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", sk.name, "sales-report"},
		{"description (block scalar trimmed)", sk.description, "Builds the monthly sales report.\nUse for revenue questions."},
		{"license", sk.license, "Apache-2.0"},
		{"compatibility (list joined)", sk.compatibility, "gpt-4o, claude-sonnet-4-5"},
		{"allowed-tools", strings.Join(sk.allowedTools, " "), "sql_query file_read mcp__crm__*"},
		{"restricts tools", sk.restrictsTools, true},
		{"metadata", sk.metadata["team"] + "/" + sk.metadata["tier"], "analytics/2"},
		{"version kept as written", sk.version, "1.10"},
		{"single trigger", strings.Join(sk.triggers, ","), "revenue"},
		{"disable-model-invocation", sk.disableModelInvocation, true},
		{"model", sk.model, "gpt-4o-mini"},
		{"unknown key kept as JSON", sk.extra["x-owner"], `{"name":"ana","shifts":[1,2.5,true,null]}`},
		{"timestamp kept as text", sk.extra["x-when"], `"2025-01-01"`},
		{"body trimmed", sk.body, "# Sales report\r\nDo it."},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func TestAllowedToolsForms(t *testing.T) {
	t.Parallel()

	cases := []struct {
		line     string
		restrict bool
		want     string
	}{
		{"", false, ""},
		{"allowed-tools: []", true, ""},
		{"allowed-tools:", true, ""}, // an empty value fails closed: no tools
		{"allowed-tools: file_read grep", true, "file_read,grep"},
		{"allowed-tools: [sql_query, sql_query, glob]", true, "sql_query,glob"},
		{"allowed-tools: \"file_*\"", true, "file_*"},
	}
	for _, c := range cases {
		lines := []string{"name: x", "description: d"}
		if c.line != "" {
			lines = append(lines, c.line)
		}
		sk, err := parseSkillMD([]byte(fm(lines...)), "x")
		if err != nil {
			t.Fatalf("%q: %v", c.line, err)
		}
		if sk.restrictsTools != c.restrict || strings.Join(sk.allowedTools, ",") != c.want {
			t.Errorf("%q: restricts=%v tools=%q, want %v %q", c.line, sk.restrictsTools, sk.allowedTools, c.restrict, c.want)
		}
		cm := contextModifier(sk)
		if (cm.GetAllowedTools() != nil) != c.restrict {
			t.Errorf("%q: ContextModifier.allowed_tools = %v, restricts %v", c.line, cm.GetAllowedTools(), c.restrict)
		}
	}
}

func TestEmptyBodyAndDelimiterAtEnd(t *testing.T) {
	t.Parallel()

	sk, err := parseSkillMD([]byte("---\nname: x\ndescription: d\n---"), "x")
	if err != nil || sk.body != "" {
		t.Fatalf("got %+v, %v", sk, err)
	}
	// A `---` inside the body is Markdown, not a second front matter.
	sk, err = parseSkillMD([]byte("---\nname: x\ndescription: d\n---  \nA\n---\nB"), "x")
	if err != nil || sk.body != "A\n---\nB" {
		t.Fatalf("got %q, %v", sk.body, err)
	}
}

func TestTenantConfig(t *testing.T) {
	t.Parallel()

	r, err := parseTenantConfig([]byte("disabled_skills: [a, b]\noverridden_skills: [c]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		hidden bool
		why    string
	}{
		{"a", true, "disabled by tenant.yaml"},
		{"c", true, "overridden by tenant.yaml"},
		{"d", false, ""},
	} {
		h, why := r.hides(c.name)
		if h != c.hidden || !strings.Contains(why, c.why) {
			t.Errorf("hides(%q) = %v %q", c.name, h, why)
		}
	}
	if r, err := parseTenantConfig(nil); err != nil || len(r.disabled) != 0 {
		t.Errorf("empty tenant.yaml: %v %v", r, err)
	}
	bad := []struct{ src, want string }{
		{"disable_skills: [a]", "field disable_skills not found"},
		{"disabled_skills: [Bad]", "disabled_skills[0]: must be 1-64 lowercase letters"},
		{"disabled_skills: [a]\noverridden_skills: [a]", `overridden_skills: "a" is also in disabled_skills`},
		{"disabled_skills: &x [a]\noverridden_skills: *x", "YAML aliases are not allowed"},
		{"disabled_skills: a", "invalid"},
		{"- a", "must be a YAML mapping"},
	}
	for _, b := range bad {
		if _, err := parseTenantConfig([]byte(b.src)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: error %v, want %q", b.src, err, b.want)
		}
	}
}
