package oracle

import (
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/pretok"
)

func TestWidenToUnicode16(t *testing.T) {
	t.Parallel()

	l, n := pretok.UnicodeAdditions("L"), pretok.UnicodeAdditions("N")
	for in, want := range map[string]string{
		`\p{L}+`:              `[\p{L}` + l + `]+`,
		`[^\r\n\p{L}\p{N}]?`:  `[^\r\n\p{L}` + l + `\p{N}` + n + `]?`,
		`\s+(?!\S)|\p{Zs}`:    `\s+(?!\S)|\p{Zs}`, // no additions: unchanged
		`\\p{L}`:              `\\p{L}`,           // an escaped backslash, not a property
		`[\]\p{N}]`:           `[\]\p{N}` + n + `]`,
		`'s|'t|'re| ?\p{N}+`:  `'s|'t|'re| ?[\p{N}` + n + `]+`,
		`(?i:'s|'t)|\p{N}{3}`: `(?i:'s|'t)|[\p{N}` + n + `]{3}`,
	} {
		if got := WidenToUnicode16(in); got != want {
			t.Errorf("WidenToUnicode16(%q) = %q, want %q", in, got, want)
		}
	}
}
