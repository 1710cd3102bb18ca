package pretok

// IsLetter exposes the class table to the external tests.
func (t *Classes) IsLetter(r rune) bool { return t.of(r)&letter != 0 }
