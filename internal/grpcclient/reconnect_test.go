package grpcclient

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// listenAgain listens on addr, retrying for a while when a server of the
// test has just released it.
func listenAgain(t *testing.T, addr string) net.Listener {
	t.Helper()
	var lis net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the port is being released
	}
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// serveHealth serves gRPC health on addr until the returned stop is called.
func serveHealth(t *testing.T, addr string) (stop func()) {
	t.Helper()
	lis := listenAgain(t, addr)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	return gs.Stop
}

// Regression (fault suite, kill -9 of context or skills): a call made after
// the peer restarted reaches it, instead of failing with Unavailable while
// the connection sits in reconnect backoff; a peer that stays down fails
// the call with Unavailable within the reconnect wait, not later.
func TestCallsReachARestartedPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	stop := serveHealth(t, addr)
	// The wait outlasts the longest reconnect backoff (2 s + 20% jitter),
	// as the default does: a shorter one may end before the next attempt.
	const wait = 3 * time.Second
	conn, err := Dial(addr, Options{ReconnectWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := healthCheck(conn)
	if err := check(); err != nil {
		t.Fatal(err)
	}

	stop()
	began := time.Now()
	if err := check(); status.Code(err) != codes.Unavailable {
		t.Fatalf("peer down: %v, want Unavailable", err)
	}
	if d := time.Since(began); d > wait+2*time.Second {
		t.Fatalf("peer down: failed after %s, want about the %s reconnect wait", d, wait)
	}

	// Down long enough for the reconnect backoff to grow, then back.
	for range 3 {
		_ = check()
	}
	stop = serveHealth(t, addr)
	defer stop()
	if err := check(); err != nil {
		t.Fatalf("peer back: %v", err)
	}
}

func TestReconnectWaitCanBeDisabled(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	conn, err := Dial(addr, Options{ReconnectWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || time.Since(began) > 3*time.Second {
		t.Fatalf("%v after %s", err, time.Since(began))
	}
}

// healthCheck returns a function that asks conn's health service once,
// within 10 seconds.
func healthCheck(conn *grpc.ClientConn) func() error {
	hc := healthpb.NewHealthClient(conn)
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
}
