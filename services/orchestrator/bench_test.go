package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// stepsPerRun is the length of each benchmark run: stepsPerRun-1 steps that
// call the no-op tool, then the answer.
const stepsPerRun = 10

// instantModel answers at once: a no-op tool call until the run has made
// stepsPerRun-1 of them, then a final answer.
func instantModel(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	calls := 0
	for _, m := range req.Messages {
		calls += len(m.GetToolCalls())
	}
	if calls >= stepsPerRun-1 {
		return answer("done"), nil
	}
	return callTools("", fmt.Sprintf("call_%d", calls), "noop", fmt.Sprintf(`{"i":%d}`, calls)), nil // distinct: no doom loop
}

// BenchmarkReActStep measures the platform's overhead per ReAct step: the
// model answers instantly and the tool does nothing, so a step's time is
// the orchestrator's own work — events published to JetStream (and
// acknowledged), the run record in KV, BuildWindow and two Appends on the
// context service, ListTools/Invoke on the toolrunner, token counts — all
// over loopback gRPC. "fake-peers" uses in-process fakes for context and
// toolrunner (the orchestrator alone); "real-context" the committed context
// service with its JetStream history. Reported: per-step p50 and p99 (from
// the step_end durations) and steps/s; "parallel" runs 8 runs at once.
func BenchmarkReActStep(b *testing.B) {
	for _, variant := range []struct {
		name     string
		real     bool
		parallel int
	}{
		{"fake-peers/sequential", false, 1},
		{"fake-peers/parallel-8", false, 8},
		{"real-context/sequential", true, 1},
		{"real-context/parallel-8", true, 8},
	} {
		b.Run(variant.name, func(b *testing.B) {
			ho := harnessOptions{mutate: func(o *Options) { o.MaxConcurrentRuns = 16 }}
			if variant.real {
				ho.real = func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
					cs, _ := realPeers(t, js, tokens)
					return cs, newFakeToolRunner() // the no-op tool
				}
			}
			h := newHarness(b, instantModel, ho)
			ctx := context.Background()
			var mu sync.Mutex
			var runs []*baagentv1.Run
			b.ResetTimer()
			began := time.Now()
			var wg sync.WaitGroup
			next := make(chan int)
			for range variant.parallel {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range next {
						run := h.start(ctx, &baagentv1.RunSpec{Input: "bench"})
						h.waitRunQuiet(ctx, run.GetRunId())
						mu.Lock()
						runs = append(runs, run)
						mu.Unlock()
					}
				}()
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()

			var steps []float64
			for _, run := range runs {
				for _, e := range h.events(ctx, run.GetRunId()) {
					if se := e.GetStepEnd(); se != nil {
						steps = append(steps, se.GetDurationMs())
					}
				}
			}
			slices.Sort(steps)
			if len(steps) != b.N*stepsPerRun {
				b.Fatalf("%d steps for %d runs", len(steps), b.N)
			}
			b.ReportMetric(percentile(steps, 0.50), "p50-ms/step")
			b.ReportMetric(percentile(steps, 0.99), "p99-ms/step")
			b.ReportMetric(float64(len(steps))/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(len(steps)), "ns/step")
			// A finished run holds no memory in the orchestrator (it is
			// forgotten when it ends); what remains is its KV record.
			h.srv.mu.Lock()
			n := len(h.srv.runs)
			h.srv.mu.Unlock()
			if n != 0 {
				b.Fatalf("%d finished runs still held in memory", n)
			}
			store, err := h.srv.runStore(ctx)
			if err != nil {
				b.Fatal(err)
			}
			rec, _, err := store.get(ctx, testTenant, runs[0].GetRunId())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(proto.Size(rec)), "record-bytes/run")
		})
	}
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
