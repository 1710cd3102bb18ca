package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMark(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer text", 8, "a lon…"},
		{"héllo wörld", 6, "hé…"},
		{"日本語テキスト", 7, "日…"},
		{"abcdef", 3, ""},
		{"abc", 0, "abc"[:0] + ""},
		{"bad\xffbyte", 20, "bad\uFFFDbyte"},
	} {
		if got := Mark(tc.in, tc.n); got != tc.want {
			t.Errorf("Mark(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"a longer text", 8, "a longer"},
		{"héllo", 2, "h"},
		{"日本語", 4, "日"},
		{"abc", -1, ""},
		{"x\xffy", 10, "x\uFFFDy"},
	} {
		if got := Plain(tc.in, tc.n); got != tc.want {
			t.Errorf("Plain(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 6)
	f.Add("日本語テキスト", 7)
	f.Add("bad\xffbyte", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 1 << 12
		for name, got := range map[string]string{"Mark": Mark(s, n), "Plain": Plain(s, n)} {
			if !utf8.ValidString(got) {
				t.Fatalf("%s(%q, %d) = %q: not valid UTF-8", name, s, n, got)
			}
			if len(got) > max(n, 0) && got != strings.ToValidUTF8(s, "\uFFFD") {
				t.Fatalf("%s(%q, %d) = %q: longer than %d", name, s, n, got, n)
			}
		}
	})
}
