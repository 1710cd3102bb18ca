package main

import (
	"fmt"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// recalledShown bounds the entities a memory_recalled line names.
const recalledShown = 5

// recalledLine is a memory_recalled event as one line: the query and the
// entities recalled, best first, with their types and fused scores.
func recalledLine(p *baagentv1.MemoryRecalledPayload) string {
	es := p.GetEntities()
	var b strings.Builder
	fmt.Fprintf(&b, "◆ memory: %d recalled for %q", len(es), shorten(p.GetQuery(), 80))
	if p.GetOrigin() != "" && p.GetOrigin() != "tool" {
		fmt.Fprintf(&b, " (%s)", p.GetOrigin())
	}
	if len(es) == 0 {
		return b.String()
	}
	b.WriteString(": ")
	for i, e := range es {
		if i == recalledShown {
			fmt.Fprintf(&b, ", +%d more", len(es)-recalledShown)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s %.3f)", shorten(e.GetName(), 60), shorten(e.GetType(), 30), e.GetScore())
	}
	return b.String()
}
