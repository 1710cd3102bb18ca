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

	"github.com/baagent/baagent/core/runevent"
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
// the orchestrator's own work — events published to JetStream, the
// checkpoints and the run record in KV, BuildWindow and Append on the
// context service, Invoke on the toolrunner, token counts — all over
// loopback gRPC. "fake-peers" uses in-process fakes for context and
// toolrunner (the orchestrator alone); "real-context" the committed context
// service with its JetStream history; "target-all" the same services
// called through the in-process channel, as -target=all wires them;
// "parallel-8" runs 8 runs at once.
//
// A step's time is from its step_start event to the next step_start (or
// the terminal event), so it includes everything the step waits for,
// checkpoints too. Each run counts once it has fully finished: its final
// record stored and the replica's execution returned (the run forgotten).
// Reported: per-step p50 and p99, steps/s over the wall time and the size
// of the one thing a finished run leaves in KV, its record; the benchmark
// fails if a finished run is still held in the replica's memory or left a
// checkpoint behind.
func BenchmarkReActStep(b *testing.B) {
	for _, variant := range []struct {
		name     string
		real     bool
		inproc   bool
		parallel int
	}{
		{"fake-peers/sequential", false, false, 1},
		{"fake-peers/parallel-8", false, false, 8},
		{"real-context/sequential", true, false, 1},
		{"real-context/parallel-8", true, false, 8},
		{"target-all/sequential", true, true, 1},
		{"target-all/parallel-8", true, true, 8},
	} {
		b.Run(variant.name, func(b *testing.B) {
			ho := harnessOptions{inproc: variant.inproc, mutate: func(o *Options) { o.MaxConcurrentRuns = 16 }}
			if variant.real {
				ho.real = func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
					cs, _ := realPeers(t, js, tokens)
					return cs, newFakeToolRunner() // the no-op tool
				}
			}
			h := newHarness(b, instantModel, ho)
			ends := h.watchEnds()
			ctx := context.Background()
			var mu sync.Mutex
			var runs []*baagentv1.Run
			b.ResetTimer()
			began := time.Now()
			var wg sync.WaitGroup
			next := make(chan int)
			for range variant.parallel {
				wg.Go(func() {
					for range next {
						run := h.start(ctx, &baagentv1.RunSpec{Input: "bench"})
						h.waitForgotten(ctx, ends, run.GetRunId())
						mu.Lock()
						runs = append(runs, run)
						mu.Unlock()
					}
				})
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()

			h.srv.mu.Lock()
			held := len(h.srv.runs)
			h.srv.mu.Unlock()
			if held != 0 {
				b.Fatalf("%d finished runs still held in memory", held)
			}
			var steps []float64
			for _, run := range runs {
				steps = append(steps, stepTimes(b, h.events(ctx, run.GetRunId()))...)
			}
			slices.Sort(steps)
			if len(steps) != b.N*stepsPerRun {
				b.Fatalf("%d steps for %d runs", len(steps), b.N)
			}
			b.ReportMetric(percentile(steps, 0.50), "p50-ms/step")
			b.ReportMetric(percentile(steps, 0.99), "p99-ms/step")
			b.ReportMetric(float64(len(steps))/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(len(steps)), "ns/step")
			store, err := h.srv.runStore(ctx)
			if err != nil {
				b.Fatal(err)
			}
			rec, _, err := store.Get(ctx, testTenant, runs[0].GetRunId())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(proto.Size(rec)), "record-bytes/run")
			cps, err := h.srv.checkpoints(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for _, run := range runs {
				if cp, _, err := cps.Load(ctx, testTenant, run.GetRunId()); err != nil || cp != nil {
					b.Fatalf("finished run %s: checkpoint %+v left behind (%v)", run.GetRunId(), cp, err)
				}
			}
		})
	}
}

// stepTimes returns each step's time in ms: from its step_start event to
// the next step_start or the terminal event.
func stepTimes(b *testing.B, evs []*baagentv1.Event) []float64 {
	var out []float64
	var from time.Time
	for _, e := range evs {
		if e.GetStepStart() == nil && !runevent.IsTerminal(e) {
			continue
		}
		at := e.GetTs().AsTime()
		if !from.IsZero() {
			out = append(out, float64(at.Sub(from).Microseconds())/1000)
		}
		from = at
	}
	if len(evs) == 0 || evs[len(evs)-1].GetComplete() == nil {
		b.Fatalf("run did not complete: %v", types(evs))
	}
	return out
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
