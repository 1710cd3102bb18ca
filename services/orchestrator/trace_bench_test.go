package orchestrator

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/tracing"
)

// BenchmarkReActStepTracing is BenchmarkReActStep's target-all/sequential
// wiring with tracing off and on, side by side. "otlp" samples every run
// and exports every span (run, steps, windows, tool calls, the in-process
// peer calls) through the batch processor and the real OTLP/gRPC exporter
// with gzip to an OTLP receiver in this process, which counts them (its
// CPU is charged to the run, as a collector's would not be); "discard"
// records the same spans through the batch processor into an exporter that
// drops them: the instrumentation's own cost.
//
//	go test -run '^$' -bench 'ReActStepTracing' -benchtime 200x -count 10 ./services/orchestrator > t.txt && bin/benchstat -col /tracing t.txt
func BenchmarkReActStepTracing(b *testing.B) {
	for _, mode := range []string{"off", "discard", "otlp"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			var recv *otlpReceiver
			ho := harnessOptions{inproc: true}
			ho.real = func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
				cs, _ := realPeers(t, js, tokens)
				return cs, newFakeToolRunner()
			}
			var shutdown tracing.Shutdown
			if mode != "off" {
				cfg := tracing.Config{Sampling: tracing.SamplingAlways, ServiceName: "bench", Getenv: func(string) string { return "" }}
				if mode == "otlp" {
					recv = startOTLPReceiver(b)
					cfg.Endpoint, cfg.Protocol, cfg.Insecure = recv.addr, tracing.ProtocolGRPC, true
				} else {
					cfg.Exporter = discardExporter{}
				}
				tp, sd, err := tracing.Setup(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				shutdown = sd
				ho.tp = tp
			}
			ho.mutate = func(o *Options) {
				o.MaxConcurrentRuns = 16
				o.TracerProvider = ho.tp
			}
			h := newHarness(b, instantModel, ho)
			ends := h.watchEnds()
			ctx := context.Background()
			var runs []*baagentv1.Run
			b.ResetTimer()
			began := time.Now()
			cpu0 := cpuTime()
			for range b.N {
				run := h.start(ctx, &baagentv1.RunSpec{Input: "bench"})
				h.waitForgotten(ctx, ends, run.GetRunId())
				runs = append(runs, run)
			}
			elapsed := time.Since(began)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			var steps []float64
			for _, run := range runs {
				steps = append(steps, stepTimes(b, h.events(ctx, run.GetRunId()))...)
			}
			slices.Sort(steps)
			b.ReportMetric(percentile(steps, 0.50), "p50-ms/step")
			b.ReportMetric(percentile(steps, 0.99), "p99-ms/step")
			b.ReportMetric(float64(len(steps))/elapsed.Seconds(), "steps/s")
			// CPU time of the whole process (orchestrator, peers, embedded
			// NATS, exporter, receiver) per step: unlike latency, it does
			// not move with the machine's load.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(steps)), "cpu-ms/step")
			if shutdown != nil {
				h.stop()
				if err := shutdown(ctx); err != nil {
					b.Fatalf("flush: %v", err)
				}
				if recv != nil {
					n := recv.spans.Load()
					if n == 0 {
						b.Fatal("no span reached the OTLP receiver")
					}
					b.ReportMetric(float64(n)/float64(len(steps)), "spans/step")
				}
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardExporter drops every span.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// otlpReceiver is an OTLP/gRPC trace receiver that counts what it gets.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	addr  string
	spans atomic.Int64
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans.Add(int64(len(ss.GetSpans())))
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: lis.Addr().String()}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return r
}
