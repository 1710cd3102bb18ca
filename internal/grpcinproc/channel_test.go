package grpcinproc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// probe is a health service whose Check answers according to the service
// name it is asked about, and remembers what the handler saw.
type probe struct {
	healthpb.UnimplementedHealthServer
	mu       sync.Mutex
	incoming metadata.MD
	outgoing metadata.MD
	peer     net.Addr
	kept     *healthpb.HealthCheckRequest
	answer   *healthpb.HealthCheckResponse
}

func (p *probe) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.incoming, _ = metadata.FromIncomingContext(ctx)
	p.outgoing, _ = metadata.FromOutgoingContext(ctx)
	if pr, ok := peer.FromContext(ctx); ok {
		p.peer = pr.Addr
	}
	switch req.GetService() {
	case "not-found":
		return nil, status.Error(codes.NotFound, "no such thing")
	case "plain-error":
		return nil, errors.New("plain failure")
	case "panic":
		panic("boom")
	case "header":
		if err := grpc.SetHeader(ctx, metadata.Pairs("x-note", "hello")); err != nil {
			return nil, err
		}
	case "wait":
		<-ctx.Done()
		return nil, ctx.Err()
	case "big":
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	req.Service = "changed by the handler" // must not reach the caller
	p.kept = req
	p.answer = &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	return p.answer, nil
}

func newChannel(t *testing.T, opts Options) (*Channel, *probe, healthpb.HealthClient) {
	t.Helper()
	p := &probe{}
	ch := New(opts)
	healthpb.RegisterHealthServer(ch, p)
	return ch, p, healthpb.NewHealthClient(ch)
}

func TestInvokeCopiesBothWays(t *testing.T) {
	_, p, client := newChannel(t, Options{})
	req := &healthpb.HealthCheckRequest{Service: "svc"}
	resp, err := client.Check(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status %v, want SERVING", resp.GetStatus())
	}
	if req.GetService() != "svc" {
		t.Fatalf("the handler's change reached the caller's request: %q", req.GetService())
	}
	if p.kept == req {
		t.Fatal("the handler got the caller's request itself, not a copy")
	}
	resp.Status = healthpb.HealthCheckResponse_NOT_SERVING
	if p.answer.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("the caller's change reached the handler's response")
	}
}

func TestHandlerSeesMetadataAndPeer(t *testing.T) {
	_, p, client := newChannel(t, Options{})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "r1")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}); err != nil {
		t.Fatal(err)
	}
	if got := p.incoming.Get("x-request-id"); len(got) != 1 || got[0] != "r1" {
		t.Fatalf("incoming metadata %v, want x-request-id=r1", p.incoming)
	}
	if len(p.outgoing) != 0 {
		t.Fatalf("the caller's metadata leaked into the handler's outgoing metadata: %v", p.outgoing)
	}
	if p.peer == nil || p.peer.Network() != "inproc" {
		t.Fatalf("peer %v, want the in-process address", p.peer)
	}
}

func TestHeaderReachesCaller(t *testing.T) {
	_, _, client := newChannel(t, Options{})
	var header metadata.MD
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "header"}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if got := header.Get("x-note"); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("header %v, want x-note=hello", header)
	}
}

func TestErrorsAsOverTheNetwork(t *testing.T) {
	_, _, client := newChannel(t, Options{})
	for _, tc := range []struct {
		service string
		code    codes.Code
		msg     string
	}{
		{"not-found", codes.NotFound, "no such thing"},
		{"plain-error", codes.Unknown, "plain failure"},
		{"panic", codes.Internal, "internal error"},
	} {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: tc.service})
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: got %v, want %v containing %q", tc.service, err, tc.code, tc.msg)
		}
	}
}

func TestCallerContextEndsTheCall(t *testing.T) {
	_, _, client := newChannel(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "wait"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}); status.Code(err) != codes.Canceled {
		t.Fatalf("got %v, want Canceled", err)
	}
}

func TestUnknownMethodClosedAndSizeLimit(t *testing.T) {
	ch, _, client := newChannel(t, Options{MaxMsgBytes: 64})
	err := ch.Invoke(context.Background(), "/no.Such/Method", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: got %v, want Unimplemented", err)
	}
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 100)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversize request: got %v, want ResourceExhausted", err)
	}
	ch.Close()
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("closed channel: got %v, want Unavailable", err)
	}
}

func TestInterceptorWrapsEveryCall(t *testing.T) {
	var seen atomic.Value
	icpt := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		seen.Store(info.FullMethod)
		return handler(ctx, req)
	}
	_, _, client := newChannel(t, Options{Interceptor: icpt})
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := seen.Load().(string); got != healthpb.Health_Check_FullMethodName {
		t.Fatalf("interceptor saw %q, want %q", got, healthpb.Health_Check_FullMethodName)
	}

	// A service registered through Registrar gets its own interceptor.
	var own atomic.Int32
	ch := New(Options{Interceptor: icpt})
	healthpb.RegisterHealthServer(ch.Registrar(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		own.Add(1)
		return handler(ctx, req)
	}), &probe{})
	if _, err := healthpb.NewHealthClient(ch).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"}); err != nil {
		t.Fatal(err)
	}
	if own.Load() != 1 {
		t.Fatalf("the registrar's interceptor ran %d times, want 1", own.Load())
	}
}

func TestStreamsUseTheFallback(t *testing.T) {
	ch, _, client := newChannel(t, Options{})
	if _, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("stream without a fallback: got %v, want Unimplemented", err)
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, &streamingHealth{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch.SetStreamFallback(healthpb.Health_ServiceDesc.ServiceName, conn)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("streamed status %v, want SERVING", msg.GetStatus())
	}
}

type streamingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (streamingHealth) Watch(_ *healthpb.HealthCheckRequest, s grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

func TestSplitMethod(t *testing.T) {
	for _, tc := range []struct {
		in, svc, m string
		ok         bool
	}{
		{"/a.B/C", "a.B", "C", true},
		{"/a.B/", "", "", false},
		{"//C", "", "", false},
		{"a.B/C", "", "", false},
		{"", "", "", false},
	} {
		svc, m, ok := splitMethod(tc.in)
		if ok != tc.ok || (ok && (svc != tc.svc || m != tc.m)) {
			t.Errorf("splitMethod(%q) = %q, %q, %v; want %q, %q, %v", tc.in, svc, m, ok, tc.svc, tc.m, tc.ok)
		}
	}
}
