package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// BenchmarkExportRunHTTP: GET /v1/runs/{id}/export of a stored run of
// 10,001 events (start, then 2,000 steps of step_start, two text
// fragments, an act with its 1 KiB observe), per format, end to end: the
// ownership check, the read from JetStream, the conversion and the HTTP
// transfer.
func BenchmarkExportRunHTTP(b *testing.B) {
	const steps = 2000
	e := newEnvTB(b, Options{MaxInFlightPerKey: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := e.run("acme", "run-export-bench")
	if _, err := r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "a long analysis"}}}); err != nil {
		b.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"query": "SELECT region, SUM(revenue) FROM orders GROUP BY 1"})
	obs := strings.Repeat("| north | 2026-Q3 | 1234567.89 |\n", 32)
	for i := range steps {
		id := fmt.Sprintf("call_%d", i)
		for _, ev := range []*baagentv1.Event{
			{Step: int32(i + 1), Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: int32(i + 1)}}},
			{Step: int32(i + 1), Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "Querying the next "}}},
			{Step: int32(i + 1), Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "slice of the data."}}},
			{Step: int32(i + 1), Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: id, ToolName: "sql_query", ToolInput: args}}},
			{Step: int32(i + 1), Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: id, ToolName: "sql_query", Observation: obs, Success: true}}},
		} {
			if _, err := r.Publish(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, f := range []string{"claude", "openai", "events"} {
		b.Run(f, func(b *testing.B) {
			var size int64
			for b.Loop() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/runs/run-export-bench/export?format="+f, nil)
				req.Header.Set("Authorization", "Bearer "+keyAcme)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				size = n
			}
			b.SetBytes(size)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/export")
			b.ReportMetric(loadAverage(), "loadavg")
		})
	}
}
