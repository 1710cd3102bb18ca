// Package grpcclient dials the suite's peers with the same options
// everywhere: plaintext inside the cluster (TLS terminates at the mesh or
// the gateway), message size limits matching the servers', and keepalives
// that notice a dead peer behind a silent load balancer, and round-robin
// over every replica a name resolves to (or that a static:/// target
// lists).
package grpcclient

import (
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/baagent/baagent/internal/tracing"
)

// Options tune a connection; the zero value is usable.
type Options struct {
	// MaxMsgBytes bounds messages sent and received (default 16 MiB).
	MaxMsgBytes int
	// ReconnectWait bounds how long a call made while the peer has no
	// connection waits for one (default DefaultReconnectWait; negative
	// fails such calls at once).
	ReconnectWait time.Duration
	// TracerProvider traces every call and propagates the caller's span
	// (W3C trace context in the metadata). Nil or a no-op provider
	// installs nothing.
	TracerProvider trace.TracerProvider
	// Extra dial options, appended last.
	Extra []grpc.DialOption
}

// TraceOptions are the dial options that trace a client's calls with tp:
// none when tp is nil or a no-op provider.
func TraceOptions(tp trace.TracerProvider) []grpc.DialOption {
	if !tracing.Enabled(tp) {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator()),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		// Health checks and reflection are not traced, as on the servers.
		otelgrpc.WithFilter(filters.None(filters.HealthCheck(), filters.ServicePrefix("grpc.reflection."))),
	))}
}

// DefaultMaxMsgBytes matches the servers' default limit.
const DefaultMaxMsgBytes = 16 << 20

// Dial returns a lazily connecting client for addr ("host:port", any gRPC
// target such as "dns:///tokens:7705", or "static:///host1:port1,host2:port2"
// listing replicas; see StaticScheme). It fails only on a malformed target;
// an unreachable peer shows up as Unavailable on the first call.
func Dial(addr string, opts Options) (*grpc.ClientConn, error) {
	if addr == "" {
		return nil, fmt.Errorf("empty address")
	}
	switch {
	case IsStaticTarget(addr):
		// Checked here: gRPC builds the resolver only on the first call.
		if _, err := ParseStaticTarget(addr); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
	case strings.HasPrefix(addr, StaticScheme+":"):
		// A host named "static" ("static:7702"), which gRPC would
		// otherwise hand to the static resolver: resolved as it would be
		// without it.
		addr = "dns:///" + addr
	}
	size := opts.MaxMsgBytes
	if size <= 0 {
		size = DefaultMaxMsgBytes
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(size), grpc.MaxCallSendMsgSize(size)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		// Spread calls over every address the name resolves to (the pods
		// behind a headless Service); servers recycle connections so new
		// replicas are picked up.
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		// static:///a,b lists the replicas itself; the resolver is given to
		// this connection only, not registered process-wide.
		grpc.WithResolvers(staticBuilder{}),
	}
	wait := opts.ReconnectWait
	if wait == 0 {
		wait = DefaultReconnectWait
	}
	dopts = append(dopts, grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 5 * time.Second}))
	if wait > 0 {
		dopts = append(dopts, grpc.WithChainUnaryInterceptor(reconnectInterceptor(wait)))
	}
	dopts = append(dopts, TraceOptions(opts.TracerProvider)...)
	dopts = append(dopts, opts.Extra...)
	conn, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}
