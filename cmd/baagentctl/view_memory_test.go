package main

import (
	"fmt"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestLiveViewShowsMemoryRecalled(t *testing.T) {
	var out strings.Builder
	v := &liveView{w: &out}
	ev := &baagentv1.Event{Payload: &baagentv1.Event_MemoryRecalled{MemoryRecalled: &baagentv1.MemoryRecalledPayload{
		Query: "Software category", Origin: "tool", ToolCallId: "call_1",
		Entities: []*baagentv1.MemoryRecalledEntity{
			{EntityId: "en_1", Name: "Software", Type: "Category", Score: 0.0325},
			{EntityId: "en_2", Name: "Q3 revenue", Type: "Metric", Score: 0.016},
		},
	}}}
	if err := v.show(ev); err != nil {
		t.Fatal(err)
	}
	want := `◆ memory: 2 recalled for "Software category": Software (Category 0.033), Q3 revenue (Metric 0.016)` + "\n"
	if out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
}

func TestRecalledLineBounds(t *testing.T) {
	p := &baagentv1.MemoryRecalledPayload{Query: "x", Origin: "auto"}
	if got := recalledLine(p); got != `◆ memory: 0 recalled for "x" (auto)` {
		t.Fatalf("empty: %q", got)
	}
	for i := range 8 {
		p.Entities = append(p.Entities, &baagentv1.MemoryRecalledEntity{Name: fmt.Sprintf("E%d\nx", i), Type: "T", Score: 0.1})
	}
	got := recalledLine(p)
	if !strings.HasSuffix(got, ", +3 more") || strings.Contains(got, "\n") || strings.Contains(got, "E5") {
		t.Fatalf("eight entities: %q", got)
	}
}
