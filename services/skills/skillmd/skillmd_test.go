package skillmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func fm(lines ...string) string { return "---\n" + strings.Join(lines, "\n") + "\n---\n# Body\n" }

func TestParseLenientAndRefusing(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("word ", 214)[:1068]
	cases := []struct {
		name, folder, file string
		want               []string // every violation, "field: message [lenient]"
		skillName          string
	}{
		{"valid", "x", fm("name: x", "description: d"), nil, "x"},
		{"long description", "x", fm("name: x", "description: "+long), []string{"description: must be at most 1024 characters, got 1068 [lenient]"}, "x"},
		{"long compatibility", "x", fm("name: x", "description: d", "compatibility: "+strings.Repeat("c", 501)), []string{"compatibility: must be at most 500 characters, got 501 [lenient]"}, "x"},
		{"unknown key", "x", fm("name: x", "description: d", "tags: [a]"), []string{`front matter: unknown key "tags" is not part of the Agent Skills standard; it is ignored [lenient]`}, "x"},
		{"extension keys are known", "x", fm("name: x", "description: d", "version: 1", "triggers: [t]", "model: m", "disable-model-invocation: true"), nil, "x"},
		{"name in upper case", "pdf-forms", fm("name: PDF-Forms", "description: d"), []string{`name: "PDF-Forms" must be lowercase; the skill is named "pdf-forms" [lenient]`}, "pdf-forms"},
		{"folder in upper case", "PDF-Forms", fm("name: pdf-forms", "description: d"), []string{`name: "pdf-forms" must equal the skill's folder name "PDF-Forms" (it differs in case only) [lenient]`}, "pdf-forms"},
		{"other folder", "other", fm("name: pdf-forms", "description: d"), []string{`name: "pdf-forms" must equal the skill's folder name "other"`}, "pdf-forms"},
		{"upper case, other folder", "other", fm("name: PDF", "description: d"), []string{`name: may contain only lowercase letters, digits and hyphens; found 'P' at position 1`}, "PDF"},
		{"no name", "x", fm("description: d"), []string{"name: required"}, ""},
		{"every problem", "x", fm("name: -x", "description: [a]", "metadata: {a: [1]}", "k: v"), []string{
			"description: must be a string, not a list",
			`metadata["a"]: must be a string, not a list`,
			`front matter: unknown key "k" is not part of the Agent Skills standard; it is ignored [lenient]`,
			"name: must not start with a hyphen",
		}, "-x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sk, vs := Parse([]byte(c.file), c.folder)
			var got []string
			for _, v := range vs {
				s := v.String()
				if v.Lenient {
					s += " [lenient]"
				}
				got = append(got, s)
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("violations\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if sk == nil || sk.Name != c.skillName {
				t.Fatalf("skill %+v, want name %q", sk, c.skillName)
			}
		})
	}
}

func TestParseUnreadable(t *testing.T) {
	t.Parallel()

	for file, want := range map[string]string{
		"# no front matter":    "SKILL.md: must start with a '---' line that opens the YAML front matter",
		"---\nname: [x\n---\n": "front matter: invalid YAML",
		"---\nname: x\n":       "front matter: no closing '---' line",
	} {
		sk, vs := Parse([]byte(file), "x")
		if sk != nil || len(vs) != 1 || !strings.HasPrefix(vs[0].String(), want) || vs[0].Lenient || !Refuses(vs) {
			t.Errorf("%q: %v %v", file, sk, vs)
		}
	}
}

func TestValidateDir(t *testing.T) {
	t.Parallel()

	r := ValidateDir(filepath.Join("..", "testdata", "lenient", "pdf-forms"))
	if r.Name != "pdf-forms" || len(r.Violations) != 2 || r.Valid() ||
		r.Violations[0].String() != "description: must be at most 1024 characters, got 1068" ||
		!strings.Contains(r.Violations[1].String(), `unknown key "x-author-notes"`) {
		t.Fatalf("report %+v", r)
	}
	r = ValidateDir(filepath.Join("..", "..", "..", "examples", "skills", "sales-analysis"))
	if !r.Valid() || r.Name != "sales-analysis" {
		t.Fatalf("example: %+v", r)
	}
	dir := t.TempDir()
	if r := ValidateDir(filepath.Join(dir, "missing")); r.Valid() || r.Violations[0].String() != "folder: not found" {
		t.Fatalf("missing: %+v", r)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := ValidateDir(filepath.Join(dir, "empty")); r.Valid() || r.Violations[0].String() != "SKILL.md: not found" {
		t.Fatalf("empty: %+v", r)
	}
}

// FuzzParse: no input panics, every violation is UTF-8 and names a field,
// and a skill without refusing violations obeys the rules a loader relies
// on.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"../testdata/lenient/pdf-forms/SKILL.md", "../../../examples/skills/sales-analysis/SKILL.md"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, filepath.Base(filepath.Dir(p)))
	}
	f.Add([]byte(fm("name: X", "description: d", "a: &a [1]", "b: *a")), "x")
	f.Add([]byte(fm("name: x", "description: d", "allowed-tools: a, b c", "metadata: {k: v}", "triggers: [t]", "x-extra: [1, {a: b}]")), "X")
	f.Add([]byte("---\n---\n"), "x")
	f.Fuzz(func(t *testing.T, data []byte, folder string) {
		sk, vs := Parse(data, folder)
		for _, v := range vs {
			if v.Field == "" || v.Message == "" || !utf8.ValidString(v.String()) {
				t.Fatalf("violation %q", v)
			}
		}
		if sk == nil {
			if !Refuses(vs) {
				t.Fatal("no skill and no refusal")
			}
			return
		}
		if Refuses(vs) {
			return
		}
		if CheckName(sk.Name) != "" || !strings.EqualFold(sk.Name, folder) {
			t.Fatalf("accepted name %q for folder %q", sk.Name, folder)
		}
		if sk.Description == "" || strings.ContainsAny(sk.Description, "<>") {
			t.Fatalf("accepted description %q", sk.Description)
		}
		if len(sk.Metadata) > MaxMetadataEntries || len(sk.Extra) > MaxExtraKeys || len(sk.Triggers) > MaxTriggers {
			t.Fatal("accepted a field over its limit")
		}
		for _, s := range append(append([]string{sk.Body, sk.License, sk.Version, sk.Model, sk.Compatibility}, sk.AllowedTools...), sk.Triggers...) {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted invalid UTF-8 %q", s)
			}
		}
	})
}
