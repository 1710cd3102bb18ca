package toolrunner

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcserver"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// BenchmarkInvokeNoop measures the pipeline's overhead: one Invoke of a
// no-op tool over gRPC on loopback, through the production server stack
// (grpcserver interceptors, metrics registered), with schema validation,
// policy resolution, workspace open and observation formatting (target:
// p50 ≤ 150 µs). p50-ns and p99-ns are reported beside the mean.
func BenchmarkInvokeNoop(b *testing.B) {
	reg := prometheus.NewRegistry()
	s, env := newTestServer(b, func(o *Options) { o.Registerer = reg })
	env.source.set(&funcTool{spec: echoSpec("noop"), fn: ok("done")})

	sm, err := grpcserver.NewServerMetrics(reg)
	if err != nil {
		b.Fatal(err)
	}
	gs := grpcserver.New(grpcserver.Options{Name: "toolrunner", Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), Metrics: sm})
	s.Register(gs.GRPC())
	if err := gs.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ctx) }()
	defer func() {
		cancel()
		<-served
	}()
	conn, err := grpc.NewClient(gs.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := baagentv1.NewToolRunnerServiceClient(conn)
	r := &baagentv1.InvokeRequest{Request: req("noop", map[string]any{"x": "y"})}
	for range 100 { // connect and warm up (first call creates the workspace)
		if _, err := client.Invoke(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		resp, err := client.Invoke(ctx, r)
		times = append(times, time.Since(start))
		if err != nil || !resp.GetResult().GetSuccess() {
			b.Fatalf("%v %v", resp, err)
		}
	}
	testkit.ReportPercentiles(b, times)
}

// BenchmarkPipelineNoop is the same call without gRPC: the pipeline alone.
func BenchmarkPipelineNoop(b *testing.B) {
	s, env := newTestServer(b, nil)
	env.source.set(&funcTool{spec: echoSpec("noop"), fn: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.Result{Data: "done"}, nil
	}})
	r := req("noop", map[string]any{"x": "y"})
	ctx := context.Background()
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := s.invoke(ctx, r)
		times = append(times, time.Since(start))
		if err != nil || !res.GetSuccess() {
			b.Fatalf("%v %v", res, err)
		}
	}
	testkit.ReportPercentiles(b, times)
}

// BenchmarkKeyedCall measures what the durable idempotency record costs a
// call with side effects (target: ≤ 1 ms p50 added on loopback) and shows
// that read-only calls are not slowed by carrying a key, side by side in
// one run: the pipeline alone (no gRPC), a no-op tool, records in a
// JetStream KV bucket on an embedded NATS server with a file store.
func BenchmarkKeyedCall(b *testing.B) {
	records := benchKV(b)
	s, env := newTestServer(b, func(o *Options) { o.Records = records })
	write := echoSpec("write")
	write.ReadOnly = false
	env.source.set(&funcTool{spec: echoSpec("read"), fn: ok("done")}, &funcTool{spec: write, fn: ok("done")})
	ctx := context.Background()
	for _, bc := range []struct {
		name, tool string
		keyed      bool
	}{
		{"write/no-key", "write", false},
		{"write/key-kv", "write", true},
		{"read/no-key", "read", false},
		{"read/key", "read", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := req(bc.tool, map[string]any{"x": "y"})
			var times []time.Duration
			prefix := fmt.Sprintf("%s-%d-", b.Name(), time.Now().UnixNano()) // -count runs share the store
			n := 0
			if bc.keyed {
				r.IdempotencyKey = prefix + "0"
			}
			for b.Loop() {
				if bc.keyed && bc.tool == "write" { // a new call each time
					n++
					r.IdempotencyKey = prefix + strconv.Itoa(n)
				}
				start := time.Now()
				res, err := s.invoke(ctx, r)
				times = append(times, time.Since(start))
				if err != nil || !res.GetSuccess() || res.GetReplayed() {
					b.Fatalf("%v %v", res, err)
				}
			}
			testkit.ReportPercentiles(b, times)
		})
	}
}

// benchKV is the records bucket on an embedded NATS with JetStream.
func benchKV(b *testing.B) *idempotency.KV {
	js, _ := natstest.Connect(b, natstest.StartNATS(b).ClientURL(), "toolrunner-bench")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := idempotency.OpenKV(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	return kv
}
