// Package grpcserver bootstraps the gRPC server every baagent service runs
// behind, so they all get the same health, reflection, panic recovery,
// logging, metrics, message limits, keepalive policy and shutdown behaviour.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/baagent/baagent/internal/listener"
	"github.com/baagent/baagent/internal/tracing"
)

// Defaults applied by New when the corresponding Options field is zero.
const (
	DefaultMaxMsgBytes     = 16 << 20 // 16 MiB, both directions
	DefaultShutdownTimeout = 5 * time.Second
)

// Keepalive policy. Clients may ping every 10s at most (also with no active
// stream, so idle event subscriptions through proxies stay up); the server
// pings an idle connection after 1 minute and drops it if the ping is not
// answered in 20s, which cleans up clients that vanished without closing.
const (
	keepaliveMinClientPing = 5 * time.Second
	keepaliveServerPing    = time.Minute
	keepalivePingTimeout   = 20 * time.Second
	// Connections are recycled every few minutes so that clients re-resolve
	// the peer's (headless) Service and spread over new replicas; a long
	// stream gets a generous grace and then resumes from its cursor.
	maxConnectionAge      = 5 * time.Minute
	maxConnectionAgeGrace = 30 * time.Minute
)

// Options configures a Server.
type Options struct {
	// Name identifies the service in logs and errors, e.g. "orchestrator".
	Name string
	// Addr is the TCP address to listen on, e.g. ":7701" or "127.0.0.1:0".
	Addr string
	// Logger receives RPC and lifecycle logs; nil discards them.
	Logger *slog.Logger
	// Metrics records RPC metrics; nil disables them. Share one value across
	// all servers that use the same registry.
	Metrics *ServerMetrics
	// MaxRecvMsgBytes and MaxSendMsgBytes bound one message; 0 means
	// DefaultMaxMsgBytes. Larger requests fail with ResourceExhausted.
	MaxRecvMsgBytes, MaxSendMsgBytes int
	// ShutdownTimeout bounds the graceful drain in Serve before in-flight
	// RPCs are cut off; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// StartNotServing keeps health at NOT_SERVING when Serve starts, for a
	// service that must finish warming up first; it then calls SetServing.
	StartNotServing bool
	// ServerOptions are appended to the built-in options (e.g. credentials).
	ServerOptions []grpc.ServerOption
	// TracerProvider traces every RPC (otelgrpc's stats handler, W3C
	// propagation; health checks and reflection are not traced). Nil or a
	// no-op provider installs no handler at all.
	TracerProvider trace.TracerProvider
}

// Server is a *grpc.Server with health and reflection registered and the
// standard interceptors installed. Register services on GRPC() before Serve.
type Server struct {
	opts   Options
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server
	unary  []grpc.UnaryServerInterceptor
	lis    *listener.Lazy
}

// New builds a Server; it does not bind until Listen or Serve. Interceptors
// run outermost first: metrics, logging, panic recovery, so a panic is
// counted and logged as codes.Internal.
func New(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "grpc"
	}
	if opts.MaxRecvMsgBytes <= 0 {
		opts.MaxRecvMsgBytes = DefaultMaxMsgBytes
	}
	if opts.MaxSendMsgBytes <= 0 {
		opts.MaxSendMsgBytes = DefaultMaxMsgBytes
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("service", opts.Name)

	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	if opts.Metrics != nil {
		unary = append(unary, opts.Metrics.unaryInterceptor())
		stream = append(stream, opts.Metrics.streamInterceptor())
	}
	unary = append(unary, logUnary(log), recoverUnary(log))
	stream = append(stream, logStream(log), recoverStream(log))

	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(opts.MaxRecvMsgBytes),
		grpc.MaxSendMsgSize(opts.MaxSendMsgBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             keepaliveMinClientPing,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  keepaliveServerPing,
			Timeout:               keepalivePingTimeout,
			MaxConnectionAge:      maxConnectionAge,
			MaxConnectionAgeGrace: maxConnectionAgeGrace,
		}),
	}
	if tracing.Enabled(opts.TracerProvider) {
		sopts = append(sopts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(opts.TracerProvider),
			otelgrpc.WithPropagators(tracing.Propagator()),
			otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelgrpc.WithFilter(untraced()),
		)))
	}
	sopts = append(sopts, opts.ServerOptions...)

	gs := grpc.NewServer(sopts...)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	return &Server{opts: opts, log: log, grpc: gs, health: hs, unary: unary,
		lis: listener.New(opts.Addr, "service "+opts.Name)}
}

// UnaryInterceptor is the server's unary interceptor chain as one
// interceptor, for in-process calls (internal/grpcinproc) that must be
// counted, logged and recovered like network ones.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	chain := s.unary
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return chainFrom(chain, 0, info, handler)(ctx, req)
	}
}

// chainFrom is the handler that runs chain[i:] around handler.
func chainFrom(chain []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(chain) {
		return handler
	}
	return func(ctx context.Context, req any) (any, error) {
		return chain[i](ctx, req, info, chainFrom(chain, i+1, info, handler))
	}
}

// GRPC returns the underlying server to register services on.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Health returns the health service, for fine-grained status changes.
func (s *Server) Health() *health.Server { return s.health }

// SetServing sets the overall ("") status and that of every service
// registered so far to SERVING or NOT_SERVING, e.g. while a dependency such
// as NATS is unreachable. It has no effect once Serve has begun shutting down.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for name := range s.grpc.GetServiceInfo() {
		s.health.SetServingStatus(name, st)
	}
	s.health.SetServingStatus("", st)
}

// SetServiceServing sets one service's status; service is the full name,
// e.g. "baagent.v1.OrchestratorService".
func (s *Server) SetServiceServing(service string, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(service, st)
}

// Listen binds Options.Addr, so that a process can bind all its ports and
// fail fast before starting anything. The error names the service and the
// address. Calling it again after a successful bind is a no-op.
func (s *Server) Listen() error { return s.lis.Listen() }

// Close releases the listener of a server that will not serve, e.g. when
// the process fails to start after binding its ports. Once Serve has begun
// it owns the listener; a Close after Serve returned is harmless.
func (s *Server) Close() error { return s.lis.Close() }

// Addr is the bound address (useful with port 0), or nil before Listen.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Serve binds if needed, marks everything SERVING (unless
// Options.StartNotServing) and serves until ctx is done. Then it sets health
// to NOT_SERVING, so load balancers and probes stop sending work, and drains
// in-flight RPCs with GracefulStop; RPCs still running after
// Options.ShutdownTimeout are cut off with Stop. It returns nil after a
// shutdown requested through ctx, and an error if serving failed. A Server
// serves at most once.
func (s *Server) Serve(ctx context.Context) error {
	lis, err := s.lis.Bound()
	if err != nil {
		return err
	}
	if !s.opts.StartNotServing {
		s.SetServing(true)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(lis) }()
	s.log.Info("serving gRPC", "addr", lis.Addr().String())

	select {
	case err := <-errc:
		s.health.Shutdown()
		s.grpc.Stop()
		if err == nil {
			err = errors.New("server stopped unexpectedly")
		}
		return fmt.Errorf("service %s: serve on %s: %w", s.opts.Name, lis.Addr(), err)
	case <-ctx.Done():
	}

	s.log.Info("shutting down gRPC server", "timeout", s.opts.ShutdownTimeout.String())
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(s.opts.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.log.Warn("graceful shutdown timed out; cancelling remaining RPCs",
			"timeout", s.opts.ShutdownTimeout.String())
		s.grpc.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("service %s: serve on %s: %w", s.opts.Name, lis.Addr(), err)
	}
	s.log.Info("gRPC server stopped")
	return nil
}

// untraced leaves out health checks and reflection: probes every few
// seconds would drown the traces of real work.
func untraced() otelgrpc.Filter {
	return filters.None(filters.HealthCheck(), filters.ServicePrefix("grpc.reflection."))
}
