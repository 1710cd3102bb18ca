package grpcserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	testService = "baagent.test.v1.TestService"
	echoMethod  = "/" + testService + "/Echo"
	panicStream = "/" + testService + "/PanicStream"
)

// testHandlers backs a hand-written service so the tests need no generated
// code: Echo returns its input, "panic" panics, "block" waits for release,
// "big" answers with a 64 KiB string.
type testHandlers struct {
	entered chan struct{}
	release chan struct{}
}

func newTestHandlers() *testHandlers {
	return &testHandlers{entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (h *testHandlers) echo(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	switch in.GetValue() {
	case "panic":
		panic("boom")
	case "block":
		h.entered <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	case "big":
		return wrapperspb.String(strings.Repeat("x", 64<<10)), nil
	case "invalid":
		return nil, status.Error(codes.InvalidArgument, "value: must not be invalid")
	}
	return in, nil
}

func registerTestService(gs *grpc.Server, h *testHandlers) {
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: testService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Echo",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				info := &grpc.UnaryServerInfo{FullMethod: echoMethod}
				return ic(ctx, in, info, func(ctx context.Context, req any) (any, error) {
					return h.echo(ctx, req.(*wrapperspb.StringValue))
				})
			},
		}},
		Streams: []grpc.StreamDesc{{
			StreamName:    "PanicStream",
			ServerStreams: true,
			Handler: func(any, grpc.ServerStream) error {
				panic("stream boom")
			},
		}},
	}, h)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) records(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

type fixture struct {
	srv     *Server
	h       *testHandlers
	reg     *prometheus.Registry
	logs    *syncBuffer
	conn    *grpc.ClientConn
	cancel  context.CancelFunc
	serveCh chan error
}

func start(t *testing.T, mod func(*Options)) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewServerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	opts := Options{
		Name:    "test",
		Addr:    "127.0.0.1:0",
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: m,
	}
	if mod != nil {
		mod(&opts)
	}
	s := New(opts)
	h := newTestHandlers()
	registerTestService(s.GRPC(), h)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{srv: s, h: h, reg: reg, logs: logs, cancel: cancel, serveCh: make(chan error, 1)}
	go func() { f.serveCh <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		f.waitServe(t)
	})
	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.conn = conn
	return f
}

// waitServe waits for Serve to return (once) and fails on a non-nil error.
func (f *fixture) waitServe(t *testing.T) {
	t.Helper()
	select {
	case err, ok := <-f.serveCh:
		if ok && err != nil {
			t.Errorf("Serve: %v", err)
		}
		if ok {
			close(f.serveCh)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func (f *fixture) echo(ctx context.Context, v string) (string, error) {
	out := new(wrapperspb.StringValue)
	err := f.conn.Invoke(ctx, echoMethod, wrapperspb.String(v), out)
	return out.GetValue(), err
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHealthServing(t *testing.T) {
	f := start(t, nil)
	hc := healthpb.NewHealthClient(f.conn)
	for _, svc := range []string{"", testService, "grpc.health.v1.Health"} {
		resp, err := hc.Check(testCtx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("Check(%q): %v", svc, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, want SERVING", svc, resp.GetStatus())
		}
	}

	f.srv.SetServiceServing(testService, false)
	resp, err := hc.Check(testCtx(t), &healthpb.HealthCheckRequest{Service: testService})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after SetServiceServing(false): %v, %v", resp.GetStatus(), err)
	}
	f.srv.SetServing(false)
	resp, err = hc.Check(testCtx(t), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after SetServing(false): %v, %v", resp.GetStatus(), err)
	}
	f.srv.SetServing(true)
	resp, err = hc.Check(testCtx(t), &healthpb.HealthCheckRequest{Service: testService})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("after SetServing(true): %v, %v", resp.GetStatus(), err)
	}
}

func TestStartNotServing(t *testing.T) {
	f := start(t, func(o *Options) { o.StartNotServing = true })
	hc := healthpb.NewHealthClient(f.conn)
	resp, err := hc.Check(testCtx(t), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check = %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
}

func TestReflectionListsHealth(t *testing.T) {
	f := start(t, nil)
	stream, err := reflectionpb.NewServerReflectionClient(f.conn).ServerReflectionInfo(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	joined := strings.Join(names, ",")
	for _, want := range []string{"grpc.health.v1.Health", testService} {
		if !strings.Contains(joined, want) {
			t.Errorf("reflection services %v lack %s", names, want)
		}
	}
	_ = stream.CloseSend()
}

func TestPanicBecomesInternal(t *testing.T) {
	f := start(t, nil)
	ctx := testCtx(t)
	_, err := f.echo(ctx, "panic")
	if status.Code(err) != codes.Internal {
		t.Fatalf("panic: got %v, want Internal", err)
	}
	if strings.Contains(err.Error(), "boom") {
		t.Errorf("panic value leaked to client: %v", err)
	}
	// The server keeps working.
	if got, err := f.echo(ctx, "hi"); err != nil || got != "hi" {
		t.Fatalf("echo after panic = %q, %v", got, err)
	}

	// Streaming handlers are covered too.
	cs, err := f.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, panicStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
		t.Fatal(err)
	}
	_ = cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Internal {
		t.Fatalf("stream panic: got %v, want Internal", err)
	}

	var panics, internalLogs int
	for _, r := range f.logs.records(t) {
		if r["msg"] == "panic in gRPC handler" {
			panics++
			if st, _ := r["stack"].(string); !strings.Contains(st, "goroutine") {
				t.Errorf("panic log lacks stack: %v", r)
			}
		}
		if r["msg"] == "rpc finished" && r["grpc.code"] == "Internal" && r["level"] == "ERROR" {
			internalLogs++
		}
	}
	if panics != 2 || internalLogs != 2 {
		t.Fatalf("want 2 panic logs and 2 error-level rpc logs, got %d and %d", panics, internalLogs)
	}
}

func TestLoggingLevels(t *testing.T) {
	f := start(t, nil)
	ctx := testCtx(t)
	if _, err := f.echo(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.echo(ctx, "invalid"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument, got %v", err)
	}
	levels := map[string]string{}
	for _, r := range f.logs.records(t) {
		if r["msg"] == "rpc finished" && r["grpc.method"] == "Echo" {
			levels[r["grpc.code"].(string)] = r["level"].(string)
			if _, ok := r["duration_ms"].(float64); !ok {
				t.Errorf("rpc log lacks duration_ms: %v", r)
			}
			if r["grpc.service"] != testService {
				t.Errorf("rpc log has wrong service: %v", r)
			}
		}
	}
	if levels["OK"] != "DEBUG" || levels["InvalidArgument"] != "WARN" {
		t.Fatalf("levels by code = %v; want OK at DEBUG and InvalidArgument at WARN", levels)
	}
}

func TestMetricsCount(t *testing.T) {
	f := start(t, nil)
	ctx := testCtx(t)
	for range 3 {
		if _, err := f.echo(ctx, "hi"); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = f.echo(ctx, "panic")

	handled := func(code string) float64 {
		return gathered(t, f.reg, "grpc_server_handled_total",
			map[string]string{"grpc_service": testService, "grpc_method": "Echo", "grpc_code": code})
	}
	if got := handled("OK"); got != 3 {
		t.Errorf("handled OK = %v, want 3", got)
	}
	if got := handled("Internal"); got != 1 {
		t.Errorf("handled Internal = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(f.reg, "grpc_server_handling_seconds"); n != 1 {
		t.Errorf("handling_seconds series = %d, want 1", n)
	}
	if got := gathered(t, f.reg, "grpc_server_handling_seconds",
		map[string]string{"grpc_service": testService, "grpc_method": "Echo"}); got != 4 {
		t.Errorf("handling_seconds count = %v, want 4", got)
	}
	if got := gathered(t, f.reg, "grpc_server_in_flight_rpcs",
		map[string]string{"grpc_service": testService, "grpc_method": "Echo"}); got != 0 {
		t.Errorf("in flight = %v, want 0", got)
	}
}

// gathered reads one series from the registry: a counter's or gauge's value,
// or a histogram's sample count.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func TestSharedMetricsAcrossServers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := NewServerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A second call on the same registry reuses the vectors.
	m2, err := NewServerMetrics(reg)
	if err != nil {
		t.Fatalf("second NewServerMetrics: %v", err)
	}
	if m1.handled != m2.handled {
		t.Fatal("second NewServerMetrics did not reuse the registered vectors")
	}
	a := New(Options{Name: "a", Addr: "127.0.0.1:0", Metrics: m1})
	b := New(Options{Name: "b", Addr: "127.0.0.1:0", Metrics: m1})
	_, _ = a, b
	if _, err := NewServerMetrics(nil); err == nil {
		t.Fatal("want error for nil registry")
	}
}

func TestMessageSizeLimit(t *testing.T) {
	f := start(t, func(o *Options) { o.MaxRecvMsgBytes = 1024; o.MaxSendMsgBytes = 1024 })
	ctx := testCtx(t)
	if _, err := f.echo(ctx, strings.Repeat("y", 4096)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: got %v, want ResourceExhausted", err)
	}
	if _, err := f.echo(ctx, "big"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized response: got %v, want ResourceExhausted", err)
	}
	if got, err := f.echo(ctx, "small"); err != nil || got != "small" {
		t.Fatalf("small echo = %q, %v", got, err)
	}
}

func TestDefaultMessageLimit(t *testing.T) {
	f := start(t, nil)
	ctx := testCtx(t)
	// 8 MiB passes under the 16 MiB default (grpc's own default is 4 MiB).
	v := strings.Repeat("z", 8<<20)
	out := new(wrapperspb.StringValue)
	if err := f.conn.Invoke(ctx, echoMethod, wrapperspb.String(v), out,
		grpc.MaxCallRecvMsgSize(32<<20)); err != nil {
		t.Fatalf("8 MiB echo: %v", err)
	}
	if _, err := f.echo(ctx, strings.Repeat("z", 17<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("17 MiB request: got %v, want ResourceExhausted", err)
	}
}

func TestGracefulDrain(t *testing.T) {
	f := start(t, nil)
	ctx := testCtx(t)

	// Watch health so we know when shutdown has begun.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch, err := healthpb.NewHealthClient(f.conn).Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("initial watch = %v, %v", r.GetStatus(), err)
	}

	type result struct {
		v   string
		err error
	}
	rpc := make(chan result, 1)
	go func() {
		v, err := f.echo(ctx, "block")
		rpc <- result{v, err}
	}()
	select {
	case <-f.h.entered:
	case <-ctx.Done():
		t.Fatal("handler never entered")
	}

	f.cancel()
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch after cancel = %v, %v; want NOT_SERVING", r.GetStatus(), err)
	}
	stopWatch() // the watch stream would otherwise hold up the drain too

	select {
	case err := <-f.serveCh:
		t.Fatalf("Serve returned (%v) while an RPC was still in flight", err)
	default:
	}
	close(f.h.release)

	select {
	case r := <-rpc:
		if r.err != nil || r.v != "block" {
			t.Fatalf("in-flight RPC = %q, %v; want it to complete", r.v, r.err)
		}
	case <-ctx.Done():
		t.Fatal("in-flight RPC did not complete")
	}
	f.waitServe(t)
}

func TestShutdownTimeoutForcesStop(t *testing.T) {
	f := start(t, func(o *Options) { o.ShutdownTimeout = 50 * time.Millisecond })
	ctx := testCtx(t)
	rpc := make(chan error, 1)
	go func() {
		_, err := f.echo(ctx, "block")
		rpc <- err
	}()
	select {
	case <-f.h.entered:
	case <-ctx.Done():
		t.Fatal("handler never entered")
	}
	f.cancel()
	f.waitServe(t) // returns although the handler never released
	select {
	case err := <-rpc:
		if err == nil {
			t.Fatal("RPC cut off by Stop should fail")
		}
	case <-ctx.Done():
		t.Fatal("RPC was not cut off")
	}
	var warned bool
	for _, r := range f.logs.records(t) {
		warned = warned || (r["level"] == "WARN" && strings.Contains(r["msg"].(string), "timed out"))
	}
	if !warned {
		t.Error("forced stop was not logged")
	}
}

func TestListenPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()

	s := New(Options{Name: "orchestrator", Addr: addr})
	err = s.Listen()
	if err == nil {
		t.Fatal("want error on occupied port")
	}
	if !strings.Contains(err.Error(), "service orchestrator: listen on "+addr) {
		t.Errorf("error should name service and address: %v", err)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error should wrap EADDRINUSE: %v", err)
	}
	// Serve reports the same without serving.
	if err := s.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Serve on occupied port: %v", err)
	}
}

func TestSplitMethod(t *testing.T) {
	for in, want := range map[string][2]string{
		"/baagent.v1.Tokens/Count": {"baagent.v1.Tokens", "Count"},
		"/a.B/C":                   {"a.B", "C"},
		"weird":                    {"unknown", "weird"},
	} {
		s, m := splitMethod(in)
		if s != want[0] || m != want[1] {
			t.Errorf("splitMethod(%q) = %q, %q; want %q", in, s, m, want)
		}
	}
}

// The exported chain is what in-process calls go through: they are counted
// and a panic becomes Internal, as on the network.
func TestUnaryInterceptorChain(t *testing.T) {
	f := start(t, nil)
	icpt := f.srv.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: echoMethod}
	resp, err := icpt(testCtx(t), "in", info, func(_ context.Context, req any) (any, error) { return req.(string) + "-out", nil })
	if err != nil || resp != "in-out" {
		t.Fatalf("chain: %v, %v; want in-out", resp, err)
	}
	_, err = icpt(testCtx(t), "in", info, func(context.Context, any) (any, error) { panic("boom") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("panic through the chain: %v, want Internal", err)
	}
	for code, want := range map[string]float64{"OK": 1, "Internal": 1} {
		got := gathered(t, f.reg, "grpc_server_handled_total",
			map[string]string{"grpc_service": testService, "grpc_method": "Echo", "grpc_code": code})
		if got != want {
			t.Errorf("handled %s = %v, want %v", code, got, want)
		}
	}
}
