package grpcclient

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// DefaultReconnectWait bounds how long a call to a peer that has no
// connection waits for one before it fails with Unavailable: long enough to
// ride out a restarted process, short enough that a caller of a peer that
// stays down learns it in seconds instead of hanging.
const DefaultReconnectWait = 5 * time.Second

// reconnectBackoff replaces gRPC's default reconnect backoff (growing to
// 120 s): after a peer has been down for a minute its callers would
// otherwise keep failing for up to two more minutes once it is back.
var reconnectBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second}

// reconnectInterceptor retries, once, a unary call that failed with
// Unavailable while the connection was not READY: such a call failed fast
// without being sent (the peer is down or restarting), so sending it again
// is safe for every method. It first waits up to wait for the connection
// to become READY; if it does not, the original error is returned. A call
// that fails on a READY connection (the peer died while handling it) is
// not retried here: it may have run, and only the caller knows whether it
// may run twice.
func reconnectInterceptor(wait time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		before := cc.GetState()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil || before == connectivity.Ready || status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return err
		}
		if !waitReady(ctx, cc, wait) {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// waitReady reports whether cc becomes READY within wait (and ctx).
func waitReady(ctx context.Context, cc *grpc.ClientConn, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	cc.Connect()
	for {
		s := cc.GetState()
		if s == connectivity.Ready {
			return true
		}
		if !cc.WaitForStateChange(ctx, s) {
			return false
		}
	}
}
