package hub

import (
	"strconv"
	"testing"
)

func TestParseCursor(t *testing.T) {
	t.Parallel()

	for _, c := range []struct {
		in    string
		kind  cursorKind
		after uint64
	}{
		{"", cursorLive, 0},
		{"earliest", cursorEarliest, 0},
		{"0", cursorAfter, 0},
		{"42", cursorAfter, 42},
		{"18446744073709551615", cursorAfter, 1<<64 - 1},
		{"18446744073709551616", cursorInvalid, 0},
		{"123456789012345678901", cursorInvalid, 0},
		{"-1", cursorInvalid, 0},
		{"+1", cursorInvalid, 0},
		{"1e3", cursorInvalid, 0},
		{"Earliest", cursorInvalid, 0},
		{" 1", cursorInvalid, 0},
	} {
		got := parseCursor(c.in)
		if got.kind != c.kind || got.after != c.after {
			t.Errorf("parseCursor(%q) = %+v, want kind %d after %d", c.in, got, c.kind, c.after)
		}
		if ValidCursor(c.in) != (c.kind != cursorInvalid) {
			t.Errorf("ValidCursor(%q) disagrees", c.in)
		}
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "earliest", "0", "17", "99999999999999999999", "x", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := parseCursor(s)
		switch c.kind {
		case cursorAfter:
			if n, err := strconv.ParseUint(s, 10, 64); err != nil || n != c.after {
				t.Fatalf("%q parsed as %d", s, c.after)
			}
			if parseCursor(FormatCursor(c.after)).after != c.after {
				t.Fatalf("round trip of %d", c.after)
			}
		case cursorLive:
			if s != "" {
				t.Fatalf("%q is live", s)
			}
		case cursorEarliest:
			if s != Earliest {
				t.Fatalf("%q is earliest", s)
			}
		case cursorInvalid:
			if _, err := strconv.ParseUint(s, 10, 64); err == nil && len(s) <= maxCursorDigits && s != "" {
				if s[0] != '+' {
					t.Fatalf("%q is a number but was refused", s)
				}
			}
		}
	})
}
