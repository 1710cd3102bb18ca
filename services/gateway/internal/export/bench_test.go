package export

import (
	"fmt"
	"io"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// largeRun is a run of steps model calls, each streamed in fragments, with
// two tool calls whose results are 1 KiB, then the answer: 22 events a
// step.
func largeRun(steps int) []*baagentv1.Event {
	e := newRun("run-large").start("Compare every region's revenue by quarter and explain the outliers.")
	obs := strings.Repeat("| north | 2026-Q3 | 1234567.89 |\n", 32)
	for i := range steps {
		e.stepStart()
		for range 5 {
			e.thinkDelta("weighing the next query; ")
		}
		for range 5 {
			e.textDelta("Querying the next slice. ")
		}
		e.thought(strings.Repeat("weighing the next query; ", 5)).thought(strings.Repeat("Querying the next slice. ", 5))
		a, b := fmt.Sprintf("call_%d_a", i), fmt.Sprintf("call_%d_b", i)
		e.act(a, "sql_query", map[string]any{"query": "SELECT region, quarter, SUM(revenue) FROM orders GROUP BY 1, 2", "max_rows": 50}).
			act(b, "file_read", map[string]any{"path": "notes/outliers.md"}).
			observe(a, "sql_query", obs, true).observe(b, "file_read", "no such file", false).stepEnd()
		e.add(&baagentv1.Event{Type: "cost_update", Payload: &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{Model: "scripted"}}})
	}
	e.stepStart().textDelta("North led.").complete("North led every quarter.")
	return e.list
}

func BenchmarkExport(b *testing.B) {
	evs := largeRun(500)
	rendered := make([][]byte, len(evs))
	for i, ev := range evs {
		js, err := hub.JSONOptions.Marshal(ev)
		if err != nil {
			b.Fatal(err)
		}
		rendered[i] = js
	}
	for _, f := range []baagentv1.ExportFormat{baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS} {
		b.Run(fmt.Sprintf("%s/events=%d", Name(f), len(evs)), func(b *testing.B) {
			var out countWriter
			b.ReportAllocs()
			for b.Loop() {
				out.n = 0
				w, err := NewWriter(&out, f)
				if err != nil {
					b.Fatal(err)
				}
				for i, ev := range evs {
					if err := w.Add(ev, rendered[i]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(out.n))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
		})
	}
}

// countWriter counts what it is given.
type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
