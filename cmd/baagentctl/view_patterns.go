package main

import (
	"fmt"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// patternMatchedLine is a pattern_matched event as one line: the pattern,
// its score and what the run does with it (reuse: it asks next; reference:
// it plans with it as an example).
func patternMatchedLine(p *baagentv1.PatternMatchedPayload) string {
	var b strings.Builder
	fmt.Fprintf(&b, "◆ pattern %q matched (%.2f", shorten(p.GetName(), 80), p.GetScore())
	if m := p.GetMode(); m != "" {
		b.WriteString(", " + shorten(m, 20))
	}
	if p.GetShared() {
		b.WriteString(", shared")
	}
	b.WriteString(")")
	return b.String()
}
