package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/patterntrace"
)

// BenchmarkTraceFromStream is what recording a trace adds to the end of a
// run: reading the run's stored events back from JetStream (embedded NATS)
// and folding them into its trace. A 10-step run stores about 150 events;
// a long one 1,500.
func BenchmarkTraceFromStream(b *testing.B) {
	_, js := startJetStream(b)
	ctx := context.Background()
	for _, steps := range []int{10, 100} {
		runID := fmt.Sprintf("run_bench%d", steps)
		subj, err := natsx.EventSubject(testTenant, runID)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		publish := func(ev *baagentv1.Event) {
			n++
			ev.Seq = uint64(n)
			data, err := proto.Marshal(ev)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.Publish(ctx, subj, data); err != nil {
				b.Fatal(err)
			}
		}
		publish(&baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "Top 5 products by revenue in March 2026"}}})
		obs := strings.Repeat("row,", 300)
		for i := range steps {
			id := fmt.Sprint(i)
			publish(&baagentv1.Event{Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: int32(i + 1)}}})
			for range 8 {
				publish(&baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "some text"}}})
			}
			publish(&baagentv1.Event{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "c" + id, ToolName: "sql_query"}}})
			publish(&baagentv1.Event{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "c" + id, ToolName: "sql_query", Success: true, Observation: obs}}})
			publish(&baagentv1.Event{Payload: &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{}}})
			publish(&baagentv1.Event{Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{StepNumber: int32(i + 1)}}})
		}
		r := &run{s: &Server{opts: Options{JetStream: js}}, rec: &baagentv1.Run{Tenant: testTenant, RunId: runID}, log: slog.New(slog.DiscardHandler)}
		b.Run(fmt.Sprintf("%devents", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tb := patterntrace.New(patterntrace.Run{RunID: runID, Goal: "Top 5 products by revenue in March 2026"})
				if err := r.readEvents(ctx, tb.Add); err != nil {
					b.Fatal(err)
				}
				if got := len(tb.Trace().GetToolCalls()); got != steps {
					b.Fatalf("%d tool calls, want %d", got, steps)
				}
			}
		})
	}
}
