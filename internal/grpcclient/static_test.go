package grpcclient

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/internal/testkit"
)

// countingHealth serves gRPC health on a loopback port and counts the
// calls it answers.
type countingHealth struct {
	addr  string
	calls atomic.Int64
	gs    *grpc.Server
}

func startCountingHealth(t *testing.T, addr string) *countingHealth {
	t.Helper()
	lis := listenAgain(t, addr)
	h := &countingHealth{addr: lis.Addr().String()}
	h.gs = grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		h.calls.Add(1)
		return next(ctx, req)
	}))
	healthpb.RegisterHealthServer(h.gs, health.NewServer())
	go func() { _ = h.gs.Serve(lis) }()
	t.Cleanup(h.gs.Stop)
	return h
}

// The static resolver spreads calls over every listed replica, and calls
// keep succeeding on the others while one is stopped, and reach it again
// once it is back.
func TestStaticTargetReachesEveryReplica(t *testing.T) {
	t.Parallel()

	a := startCountingHealth(t, "127.0.0.1:0")
	b := startCountingHealth(t, "127.0.0.1:0")
	conn, err := Dial("static:///"+a.addr+","+b.addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := healthCheck(conn)
	if err := check(); err != nil {
		t.Fatal(err)
	}
	// Round robin only uses a replica once its subchannel is READY; the
	// second connects in the background.
	testkit.Eventually(t, 10*time.Second, "calls on both replicas", func() bool {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		return a.calls.Load() > 0 && b.calls.Load() > 0
	})
	a0, b0 := a.calls.Load(), b.calls.Load()
	for range 20 {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	// Round robin alternates (10 and 10); a little slack in case a
	// subchannel flaps on a loaded machine.
	if da, db := a.calls.Load()-a0, b.calls.Load()-b0; da < 5 || db < 5 {
		t.Fatalf("20 calls with both replicas ready: %d on one, %d on the other, want about 10 each", da, db)
	}

	// One replica stops (its connections close, as when its process
	// dies). A call sent on its connection in the instant before the
	// client reads the close fails Unavailable — it may have been
	// processed, so gRPC does not resend it; the caller decides. Then the
	// replica is out of the rotation and every call succeeds on the other.
	a.gs.Stop()
	failed, ok := 0, 0
	testkit.Eventually(t, 10*time.Second, "the stopped replica out of the rotation (two calls in a row answered)", func() bool {
		if err := check(); err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call as one replica stopped: %v", err)
			}
			failed, ok = failed+1, 0
			return false
		}
		ok++
		return ok == 2
	})
	if failed > 2 {
		t.Errorf("%d calls failed as one replica stopped; want only those racing the close", failed)
	}
	b0 = b.calls.Load()
	for i := range 20 {
		if err := check(); err != nil {
			t.Fatalf("call %d with one replica stopped: %v", i, err)
		}
	}
	if db := b.calls.Load() - b0; db != 20 {
		t.Fatalf("with one replica stopped, the other answered %d of 20 calls", db)
	}

	// It comes back on its address: calls reach it again.
	back := startCountingHealth(t, a.addr)
	testkit.Eventually(t, 10*time.Second, "calls on the restarted replica", func() bool {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		return back.calls.Load() > 0
	})
}

func TestParseStaticTarget(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		target string
		want   []string
		err    string
	}{
		{target: "static:///127.0.0.1:7702", want: []string{"127.0.0.1:7702"}},
		{target: "static:///a:1,b:2", want: []string{"a:1", "b:2"}},
		{target: "static:///toolrunner-0.toolrunner:7702,[::1]:7702", want: []string{"toolrunner-0.toolrunner:7702", "[::1]:7702"}},
		{target: "static:///", err: "no address"},
		{target: "static://", err: "want static:///"},
		{target: "static:a:1", err: "want static:///"},
		{target: "static://auth/a:1", err: "want static:///"},
		{target: "static:///a:1,", err: `address 2 is ""`},
		{target: "static:///a:1,,b:2", err: `address 2 is ""`},
		{target: "static:///a", err: "want host:port"},
		{target: "static:///:7702", err: "want host:port"},
		{target: "static:///a:1, b:2", err: "want host:port"},
		{target: "static:///a:http", err: "1-65535"},
		{target: "static:///a:0", err: "1-65535"},
		{target: "static:///a:65536", err: "1-65535"},
		{target: "static:///a:1,a:1", err: "listed twice"},
		{target: "static:///::1:80", err: "want host:port"},
	} {
		got, err := ParseStaticTarget(tc.target)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseStaticTarget(%q) = %v, %v; want an error containing %q", tc.target, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseStaticTarget(%q) = %v, %v; want %v", tc.target, got, err, tc.want)
		}
	}
}

// A malformed static target fails Dial, not the first call.
func TestDialRefusesABadStaticTarget(t *testing.T) {
	t.Parallel()

	for _, target := range []string{"static:///", "static:///a:1,", "static:///a:1,a:1", "static://x/a:1"} {
		if conn, err := Dial(target, Options{}); err == nil {
			_ = conn.Close()
			t.Errorf("Dial(%q): no error", target)
		}
	}
}

// "static:7702" is host "static", port 7702, as it was before the static
// resolver existed: resolved by DNS, not refused as a static list.
func TestHostNamedStaticIsNotAStaticTarget(t *testing.T) {
	t.Parallel()

	conn, err := Dial("static:7702", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Target(); got != "dns:///static:7702" {
		t.Fatalf("target %q, want dns:///static:7702", got)
	}
}
