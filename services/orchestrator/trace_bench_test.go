package orchestrator

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
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

// stepCPUProfile, when set, writes a CPU profile of the timed part of
// each BenchmarkReActStepTracing variant (the runs, not the harness's
// setup nor reading the events back) to <value>.<variant>, and the
// allocations profile before and after it to <value>.<variant>.allocs0
// and .allocs1 (pprof -diff_base).
var stepCPUProfile = flag.String("tracing.cpuprofile", "", "write a CPU profile of BenchmarkReActStepTracing's timed loop to `file`.<variant>")

// BenchmarkReActStepTracing is BenchmarkReActStep's target-all/sequential
// wiring with tracing off and on, side by side. "otlp" samples every run
// and exports every span (run, steps, windows, tool calls, the in-process
// peer calls) through the batch processor and the real OTLP/gRPC exporter
// with gzip to a local collector: an OTLP receiver in a process of its
// own (this test binary re-executed), which decodes and counts the spans;
// its CPU is reported apart (collector-cpu-ms/step), not in cpu-ms/step.
// "discard" records the same spans through the batch processor into an
// exporter that drops them: the instrumentation's own cost.
//
// go test's -count repeats each variant back to back; to interleave them,
// run the test binary once per round:
//
//	go test -c -o /tmp/orch.test ./services/orchestrator
//	cd services/orchestrator && for i in $(seq 10); do /tmp/orch.test -test.run '^$' -test.bench 'ReActStepTracing' -test.benchtime 200x; done > /tmp/t.txt; cd -
//	bin/benchstat -col /tracing /tmp/t.txt
func BenchmarkReActStepTracing(b *testing.B) {
	for _, mode := range []string{"off", "discard", "otlp"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			var recv *receiverProcess
			ho := harnessOptions{inproc: true}
			ho.real = func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
				cs, _ := realPeers(t, js, tokens)
				return cs, newFakeToolRunner()
			}
			var shutdown tracing.Shutdown
			if mode != "off" {
				cfg := tracing.Config{Sampling: tracing.SamplingAlways, ServiceName: "bench", Getenv: func(string) string { return "" }}
				if mode == "otlp" {
					recv = startReceiverProcess(b)
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
			var recv0 receiverStats
			if recv != nil {
				recv0 = recv.stats(b)
			}
			if *stepCPUProfile != "" {
				f, err := os.Create(*stepCPUProfile + "." + mode)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				writeHeapProfile(b, *stepCPUProfile+"."+mode+".allocs0")
			}
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
			if *stepCPUProfile != "" {
				pprof.StopCPUProfile()
				writeHeapProfile(b, *stepCPUProfile+"."+mode+".allocs1")
			}
			var steps []float64
			for _, run := range runs {
				steps = append(steps, stepTimes(b, h.events(ctx, run.GetRunId()))...)
			}
			slices.Sort(steps)
			b.ReportMetric(percentile(steps, 0.50), "p50-ms/step")
			b.ReportMetric(percentile(steps, 0.99), "p99-ms/step")
			b.ReportMetric(float64(len(steps))/elapsed.Seconds(), "steps/s")
			// CPU time of this process (orchestrator, peers, embedded
			// NATS, the exporter) per step: unlike latency, it does not
			// move with the machine's load.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(steps)), "cpu-ms/step")
			if shutdown != nil {
				h.stop()
				if err := shutdown(ctx); err != nil {
					b.Fatalf("flush: %v", err)
				}
				if recv != nil {
					st := recv.stats(b)
					n := st.spans - recv0.spans
					if n == 0 {
						b.Fatal("no span reached the OTLP receiver")
					}
					b.ReportMetric(float64(n)/float64(len(steps)), "spans/step")
					// The collector's CPU from the first run to the
					// flush: on 2 shared cores it competes with the
					// steps for CPU even though it is not charged to
					// cpu-ms/step.
					b.ReportMetric(float64((st.cpu-recv0.cpu).Microseconds())/1000/float64(len(steps)), "collector-cpu-ms/step")
				}
			}
		})
	}
}

// writeHeapProfile writes the allocations so far to file: the difference
// of two (pprof -diff_base) is what was allocated between them.
func writeHeapProfile(t testing.TB, file string) {
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
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

// receiverProcessEnv makes TestOTLPReceiverProcess serve instead of skip.
const receiverProcessEnv = "BAAGENT_TEST_OTLP_RECEIVER_PROCESS"

// TestOTLPReceiverProcess is the local collector of
// BenchmarkReActStepTracing when this test binary is re-executed with
// receiverProcessEnv set: an OTLP/gRPC receiver (grpc's gzip decompressor
// registered by the import of otlptracegrpc) that prints its address,
// then answers each line read from stdin with "spans cpu-ns" (spans
// received, the process's CPU time) and stops when stdin closes.
func TestOTLPReceiverProcess(t *testing.T) {
	if os.Getenv(receiverProcessEnv) != "1" {
		t.Skip("the benchmark's collector process; runs only when BenchmarkReActStepTracing starts it")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: lis.Addr().String()}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	fmt.Println(r.addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println(r.spans.Load(), cpuTime().Nanoseconds())
	}
}

// receiverProcess is a running TestOTLPReceiverProcess.
type receiverProcess struct {
	addr  string
	stdin io.WriteCloser
	out   *bufio.Scanner
}

type receiverStats struct {
	spans int64
	cpu   time.Duration
}

// startReceiverProcess re-executes this test binary as an OTLP receiver
// and stops it at cleanup.
func startReceiverProcess(t testing.TB) *receiverProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOTLPReceiverProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), receiverProcessEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	p := &receiverProcess{stdin: stdin, out: bufio.NewScanner(stdout)}
	if !p.out.Scan() {
		t.Fatalf("OTLP receiver process: no address (%v)", p.out.Err())
	}
	p.addr = strings.TrimSpace(p.out.Text())
	if _, _, err := net.SplitHostPort(p.addr); err != nil {
		t.Fatalf("OTLP receiver process: %q is not an address", p.addr)
	}
	return p
}

// stats asks the receiver for what it has received and its CPU time.
func (p *receiverProcess) stats(t testing.TB) receiverStats {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "stats\n"); err != nil {
		t.Fatal(err)
	}
	var st receiverStats
	var cpu int64
	if !p.out.Scan() {
		t.Fatalf("OTLP receiver process: %v", p.out.Err())
	}
	if _, err := fmt.Sscan(p.out.Text(), &st.spans, &cpu); err != nil {
		t.Fatalf("OTLP receiver process: %q: %v", p.out.Text(), err)
	}
	st.cpu = time.Duration(cpu)
	return st
}
