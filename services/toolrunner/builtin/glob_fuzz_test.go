package builtin

import (
	"path"
	"strings"
	"testing"
)

// refCompile and refMatch are the glob matcher as it was before the
// linear one: path.Match per segment and a recursion over every split of
// the path among the `**` segments. Exponential in the number of `**`,
// but obviously right: the reference for small inputs.
func refCompile(pattern string) ([]string, bool) {
	if pattern == "" || strings.ContainsRune(pattern, '\\') || path.IsAbs(pattern) {
		return nil, false
	}
	segs := strings.Split(path.Clean(pattern), "/")
	stars := 0
	for i, s := range segs {
		if s == ".." {
			return nil, false
		}
		if s == "**" {
			stars++
			continue
		}
		s = strings.ReplaceAll(s, "[!", "[^")
		if _, err := path.Match(s, ""); err != nil {
			return nil, false
		}
		segs[i] = s
	}
	return segs, stars <= maxGlobStars
}

func refMatch(segs, name []string) bool {
	for len(segs) > 0 {
		if segs[0] == "**" {
			rest := segs[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if refMatch(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(segs[0], name[0]); !ok {
			return false
		}
		segs, name = segs[1:], name[1:]
	}
	return len(name) == 0
}

// FuzzGlobMatch compares the glob matcher with the reference on small
// patterns and paths: the same patterns are valid and the same paths
// match. Every folder above a match may hold one (mayContain prunes the
// walk and must never prune a match).
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"**/*.csv", "a/b/c.csv"}, {"*.csv", "c.csv"}, {"sub/[!r]*/*", "sub/deep/notes.csv"},
		{"**", "x"}, {"a/**", "a"}, {"**/a", "a"}, {"**/**/a", "b/a"}, {"a/**/b/**/c", "a/b/x/c"},
		{"**/?/**/?/**/?/**/?/z", "a/a/a/a/a/z"}, {"*a*b", "aaab"}, {"*a*b", "aaba"}, {"?", "é"},
		{"*?", "é"}, {"*\xa9", "é"}, {"[é-ê]x", "éx"}, {"[^a-c]", "d"}, {"[!a-c]*[0-9]", "z12"},
		{"[*]?", "*x"}, {"a[", "a["}, {"[]", "]"}, {"x/../y", "y"}, {"./a/./b", "a/b"}, {"a//b", "a/b"},
		{"*", ""}, {"**/", "a"}, {"[a-]", "a"}, {"*[a]]", "xa]"}, {"*.*.*", "a.b.c.d"}, {"?*?", "ab"},
		{"**/*a*/**", "x/bab/y"}, {"d[1-3]/e*/f?/report_*[05].csv", "d2/e1/f0/report_0015.csv"},
		{"\x80*", "\x80\x80"}, {"[\x80]", "\x80"}, {"*/*", "a/"}, {"/abs", "abs"}, {"a\\b", "a\\b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 48 || len(name) > 48 {
			return // the reference's cost grows as a power of the depth
		}
		g, terr := compileGlob(pattern)
		ref, ok := refCompile(pattern)
		if (terr == nil) != ok {
			t.Fatalf("pattern %q: valid %v, reference %v (%v)", pattern, terr == nil, ok, terr)
		}
		if terr != nil {
			return
		}
		parts := strings.Split(name, "/")
		got, want := g.match(parts), refMatch(ref, parts)
		if got != want {
			t.Fatalf("pattern %q, path %q: match %v, reference %v", pattern, name, got, want)
		}
		for k := 1; got && k < len(parts); k++ {
			if !g.mayContain(parts[:k]) {
				t.Fatalf("pattern %q matches %q but folder %q is pruned", pattern, name, strings.Join(parts[:k], "/"))
			}
		}
	})
}
