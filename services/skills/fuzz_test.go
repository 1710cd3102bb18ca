package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseSkillMD: no input panics or hangs the parser, and whatever it
// accepts obeys the standard's rules.
func FuzzParseSkillMD(f *testing.F) {
	for _, p := range []string{
		"sales-analysis/SKILL.md", "executive-summary/SKILL.md", "data-quality-check/SKILL.md",
		"tenants/acme/executive-summary/SKILL.md", "tenants/acme/data-governance-check/SKILL.md",
	} {
		data, err := os.ReadFile(filepath.Join(examplesDir, p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, filepath.Base(filepath.Dir(p)))
	}
	f.Add([]byte(fm("name: x", "description: d", "a: &a [1]", "b: *a")), "x")
	f.Add([]byte(fm("name: x", "description: d", "m:", "  <<: {k: v}")), "x")
	f.Add([]byte("\uFEFF---\r\nname: x\r\ndescription: |\r\n  d\r\n---\r\nbody"), "x")
	f.Add([]byte(fm("name: x", "description: d", "allowed-tools: a, b c", "metadata: {k: v}", "triggers: [t]", "x-extra: [1, {a: b}]")), "x")
	f.Add([]byte("---\n"+strings.Repeat("[", 100)+"\n---\n"), "x")
	f.Add([]byte("---\n---\n"), "x")
	f.Add([]byte(fm("name: X", "description: "+strings.Repeat("long words ", 100), "unknown: 1")), "x")
	f.Fuzz(func(t *testing.T, data []byte, folder string) {
		sk, err := parseSkillMD(data, folder)
		if err != nil {
			if sk != nil {
				t.Fatal("a skill and an error")
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("error is not UTF-8: %q", err)
			}
			return
		}
		// A name differing from its folder in case only loads in lowercase.
		if !strings.EqualFold(sk.name, folder) || sk.name == "" || len(sk.name) > MaxNameChars || strings.ToLower(sk.name) != sk.name {
			t.Fatalf("accepted name %q for folder %q", sk.name, folder)
		}
		// An over-long description loads with a warning.
		if n := utf8.RuneCountInString(sk.description); n == 0 || n > MaxDescriptionChars && len(sk.warnings) == 0 || strings.ContainsAny(sk.description, "<>") {
			t.Fatalf("accepted description %q", sk.description)
		}
		if len(sk.metadata) > MaxMetadataEntries || len(sk.extra) > MaxExtraKeys {
			t.Fatal("accepted a field over its limit")
		}
		for _, s := range append(append([]string{sk.body, sk.license, sk.version, sk.model}, sk.allowedTools...), sk.triggers...) {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted invalid UTF-8 %q", s)
			}
		}
		for k, v := range sk.extra {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("extra %q: %q", k, v)
			}
		}
		// The catalog line of an accepted skill is well formed.
		desc := catalogDescription(sk)
		line := catalogLine(sk.name, "system", desc)
		if strings.Count(line, "<") != 2 || strings.Contains(line, "\n") || utf8.RuneCountInString(desc) > MaxDescriptionChars {
			t.Fatalf("catalog line %q", line)
		}
	})
}

// FuzzTenantConfig: no tenant.yaml panics the parser; what it accepts names
// only valid skill names.
func FuzzTenantConfig(f *testing.F) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "tenants/acme/tenant.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("disabled_skills: &a [x]\noverridden_skills: *a\n"))
	f.Add([]byte("disabled_skills: [a]\noverridden_skills: [a]\n"))
	f.Add([]byte("unknown: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseTenantConfig(data)
		if err != nil {
			return
		}
		for n := range r.disabled {
			if r.overridden[n] {
				t.Fatalf("%q both disabled and overridden", n)
			}
		}
		for _, m := range []map[string]bool{r.disabled, r.overridden} {
			for n := range m {
				if n == "" || len(n) > MaxNameChars || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
					t.Fatalf("accepted skill name %q", n)
				}
			}
		}
	})
}

// TestParserWorstCases bounds the work of the largest inputs the limits let
// through; run with -v to see the times (no timing assertion: the fuzz
// tests and BenchmarkParseWorstCase watch for slow inputs).
func TestParserWorstCases(t *testing.T) {
	t.Parallel()

	for name, data := range worstCases() {
		if _, err := parseSkillMD(data, "x"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func worstCases() map[string][]byte {
	head := "---\nname: x\ndescription: d\n"
	fill := func(unit string) []byte {
		n := (MaxFrontMatterBytes - len(head)) / len(unit)
		return []byte(head + strings.Repeat(unit, n) + "\n---\nbody")
	}
	return map[string][]byte{
		"many keys":           fill("k123456: v\n"),
		"flow nesting":        []byte(head + "deep: " + strings.Repeat("[", 30000) + "\n---\n"),
		"long flow sequence":  []byte(head + "seq: [" + strings.Repeat("1,", (MaxFrontMatterBytes-len(head))/2-10) + "1]\n---\n"),
		"many anchors":        fill("- &a1 x\n"),
		"block nesting":       []byte(head + strings.Repeat(" ", 0) + nestedBlock(200) + "---\n"),
		"long quoted escapes": []byte(head + "q: \"" + strings.Repeat(`\u00e9`, (MaxFrontMatterBytes-len(head))/6-4) + "\n---\n"),
	}
}

func nestedBlock(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	return b.String()
}

func BenchmarkParseWorstCase(b *testing.B) {
	for name, data := range worstCases() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_, _ = parseSkillMD(data, "x")
			}
		})
	}
}
