package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBytesUTF8Boundary(t *testing.T) {
	t.Parallel()

	s := "aé日😀" // 1 + 2 + 3 + 4 bytes
	for max := 0; max <= len(s)+1; max++ {
		got, cut := Bytes(s, max)
		if len(got) > max {
			t.Fatalf("max %d: got %d bytes", max, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("max %d: invalid UTF-8 %q", max, got)
		}
		if len(got)+cut != len(s) {
			t.Fatalf("max %d: kept %d + cut %d != %d", max, len(got), cut, len(s))
		}
		if !strings.HasPrefix(s, got) {
			t.Fatalf("max %d: %q is not a prefix", max, got)
		}
	}
	if got, _ := Bytes(s, 5); got != "aé" {
		t.Errorf("Bytes(s, 5) = %q, want %q (the 3-byte rune does not fit)", got, "aé")
	}
	if got, _ := Bytes(s, 6); got != "aé日" {
		t.Errorf("Bytes(s, 6) = %q, want %q", got, "aé日")
	}
}

func TestLineCutsByCharacters(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("日", MaxLineLength+5)
	got := Line(long)
	if utf8.RuneCountInString(got) != MaxLineLength+len(lineEllipsis) || !strings.HasSuffix(got, "...") {
		t.Fatalf("line cut to %d runes, suffix %q", utf8.RuneCountInString(got), got[len(got)-3:])
	}
	if exact := strings.Repeat("x", MaxLineLength); Line(exact) != exact {
		t.Error("a line of exactly MaxLineLength characters was cut")
	}
}

func TestLinesHints(t *testing.T) {
	t.Parallel()

	lines := make([]string, 100)
	for i := range lines {
		lines[i] = "row"
	}
	p := Lines(lines, 0, 10, 0)
	if p.Shown != 10 || p.Next != 10 || !strings.HasSuffix(p.Text, "(File has more lines. Use 'offset' parameter to read beyond line 10)") {
		t.Fatalf("page = %+v", p)
	}
	if !strings.HasPrefix(p.Text, "     1\trow\n") {
		t.Errorf("numbering: %q", p.Text[:20])
	}
	p = Lines(lines, 90, 50, 0)
	if p.Shown != 10 || p.Next != -1 || !strings.HasSuffix(p.Text, "(End of file - total 100 lines)") {
		t.Fatalf("last page = %+v", p)
	}
	if !strings.Contains(p.Text, "    91\trow") {
		t.Errorf("offset numbering wrong: %q", p.Text[:20])
	}
	p = Lines(lines, 0, 0, 100) // 100 bytes hold 9 lines of 11 bytes
	if !p.CutByBytes || p.Shown != 9 || p.Next != 9 ||
		!strings.HasSuffix(p.Text, "(Output truncated at 100 bytes. Use 'offset' parameter to read beyond line 9)") {
		t.Fatalf("byte-cut page = %+v", p)
	}
	p = Lines(lines, 500, 10, 0)
	if p.Shown != 0 || p.Next != -1 || !strings.Contains(p.Text, "total 100 lines") {
		t.Fatalf("past the end = %+v", p)
	}
}

func TestSplitLines(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]int{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "a\n\n": 2} {
		if got := len(SplitLines(in)); got != want {
			t.Errorf("SplitLines(%q) has %d lines, want %d", in, got, want)
		}
	}
}

// FuzzLines checks the paging parameters: any offset, limit and budget
// yields valid UTF-8 within budget plus the hint, and a consistent page.
func FuzzLines(f *testing.F) {
	f.Add("a\nb\nc", 0, 0, 0)
	f.Add("日本語\n😀😀", 1, 1, 5)
	f.Add(strings.Repeat("x\n", 3000), 1500, 2001, 1<<20)
	f.Add("line", -5, -1, -1)
	f.Fuzz(func(t *testing.T, text string, offset, limit, budget int) {
		if !utf8.ValidString(text) {
			return
		}
		lines := SplitLines(text)
		p := Lines(lines, offset, limit, budget)
		if !utf8.ValidString(p.Text) {
			t.Fatalf("invalid UTF-8 output")
		}
		if p.Shown < 0 || p.Shown > DefaultReadLimit || p.Shown > len(lines) {
			t.Fatalf("shown %d of %d", p.Shown, len(lines))
		}
		if p.Next != -1 && (p.Next <= 0 || p.Next > len(lines)) {
			t.Fatalf("next %d of %d", p.Next, len(lines))
		}
		b := budget
		if b <= 0 {
			b = MaxOutputBytes
		}
		body := p.Text[:strings.LastIndex(p.Text, "\n(")]
		if len(body) > b {
			t.Fatalf("body %d bytes over budget %d", len(body), b)
		}
	})
}

// FuzzBytes checks UTF-8 safety of the byte cut on arbitrary input.
func FuzzBytes(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("😀", 2)
	f.Fuzz(func(t *testing.T, s string, max int) {
		got, cut := Bytes(s, max)
		if !strings.HasPrefix(s, got) || len(got)+cut != len(s) {
			t.Fatalf("not a prefix or bad count")
		}
		if max >= 0 && len(got) > max {
			t.Fatalf("over max")
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("split a rune")
		}
	})
}
