package pretok

import (
	"testing"
	"unicode"
)

// TestCutClassAssumptions checks, over every code point, the facts about
// the class table the cut rules rely on: o200k's case classes hold only
// letters and marks, and no letter, mark or number is whitespace or in two
// of letter, number.
func TestCutClassAssumptions(t *testing.T) {
	t.Parallel()

	c, err := NewClasses()
	if err != nil {
		t.Fatal(err)
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		f := c.of(r)
		if f&(upper|lower) != 0 && f&(letter|mark) == 0 {
			t.Fatalf("%U is in an o200k case class but neither a letter nor a mark", r)
		}
		if f&letter != 0 && f&(number|space) != 0 || f&number != 0 && f&space != 0 {
			t.Fatalf("%U has overlapping classes %08b", r, f)
		}
		if f&(letter|number) != 0 && r < 0x80 && (r == ' ' || r == '\'') {
			t.Fatalf("%q is a letter or number", r)
		}
	}
}
