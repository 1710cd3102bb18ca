// Package app is the composition root of the baagent binary: it builds the
// services a -target selects, with their gRPC servers, metrics, NATS and peer
// connections, and runs them until shut down. It holds no business logic.
// It sits under cmd/baagent, not internal/, because it imports every
// service, and internal/ is plumbing that never does.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/baagent/baagent/internal/buildinfo"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/grpcinproc"
	"github.com/baagent/baagent/internal/grpcserver"
	"github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/tracing"
)

// registrar is what every service offers the gRPC server.
type registrar interface {
	Register(grpc.ServiceRegistrar)
}

// App is a built, not yet running, set of services.
type App struct {
	cfg *Config
	log *slog.Logger
	reg *prometheus.Registry

	metrics *metrics.Server
	servers map[string]*grpcserver.Server // by service name
	order   []string

	embedded *natsx.EmbeddedServer
	nc       *nats.Conn

	// background are loops the services need besides their gRPC server
	// (reloaders, consumers); each runs until the context passed to Run ends.
	background []func(context.Context) error

	// dial is where each peer service answers; networkPeers caches one client
	// connection per peer, shared by the services of this process.
	dial         map[string]string
	networkPeers map[string]*grpc.ClientConn
	// inproc, in -target=all, carries the calls between this process's
	// services without loopback gRPC (nil in a split deployment).
	inproc *grpcinproc.Channel
	// scriptedURL is the scripted model's base URL once started.
	scriptedURL string
	// httpAddr is the gateway's bound HTTP address, if it runs here.
	httpAddr net.Addr

	// tp traces the process's work (a no-op provider with tracing off);
	// it is passed to every service, never installed globally.
	tp trace.TracerProvider

	// cleanup undoes New in reverse order; Run calls it on exit.
	cleanup []func()
}

// Option adjusts how New builds the process (tests and benchmarks).
type Option func(*options)

type options struct {
	trace func(*tracing.Config)
}

// WithTracing adjusts the tracing configuration derived from the settings,
// e.g. to export to an in-memory exporter in tests.
func WithTracing(f func(*tracing.Config)) Option {
	return func(o *options) { o.trace = f }
}

// New builds the services cfg selects. It binds every port first, so that a
// port in use fails before anything starts, then starts or connects to NATS,
// then constructs and registers the services. On error everything already
// started is stopped again.
func New(ctx context.Context, cfg *Config, log *slog.Logger, opts ...Option) (_ *App, err error) {
	a := &App{cfg: cfg, log: log, reg: metrics.NewRegistry(), servers: map[string]*grpcserver.Server{}}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := a.startTracing(ctx, o); err != nil {
		return nil, err
	}

	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("setting data-dir: %w", err)
	}

	a.metrics, err = metrics.NewServer(metrics.Options{Addr: cfg.MetricsAddr, Registry: a.reg, Logger: log, ShutdownTimeout: cfg.ShutdownTimeout})
	if err != nil {
		return nil, err
	}
	if err := a.metrics.Listen(); err != nil {
		return nil, fmt.Errorf("setting metrics-addr: %w", err)
	}
	a.cleanup = append(a.cleanup, func() { _ = a.metrics.Close() })

	serverMetrics, err := grpcserver.NewServerMetrics(a.reg)
	if err != nil {
		return nil, err
	}
	for _, svc := range cfg.RunServices() {
		s := grpcserver.New(grpcserver.Options{
			Name:            svc,
			Addr:            cfg.Listen[svc],
			Logger:          log,
			Metrics:         serverMetrics,
			MaxRecvMsgBytes: cfg.MaxMsgBytes,
			MaxSendMsgBytes: cfg.MaxMsgBytes,
			ShutdownTimeout: cfg.ShutdownTimeout,
			TracerProvider:  a.tp,
		})
		if err := s.Listen(); err != nil {
			return nil, fmt.Errorf("setting %s-listen: %w", svc, err)
		}
		a.cleanup = append(a.cleanup, func() { _ = s.Close() })
		a.servers[svc] = s
		a.order = append(a.order, svc)
	}
	// In one process, peers dial the listeners actually bound (which may be
	// random ports in tests), never the defaults.
	dial := make(map[string]string, len(cfg.Dial))
	for svc, addr := range cfg.Dial {
		dial[svc] = addr
	}
	if cfg.Target == config.TargetAll {
		for svc, s := range a.servers {
			dial[svc] = s.Addr().String()
		}
	}

	a.dial = dial
	a.networkPeers = make(map[string]*grpc.ClientConn)
	if cfg.Target == config.TargetAll {
		a.inproc = grpcinproc.New(grpcinproc.Options{MaxMsgBytes: cfg.MaxMsgBytes, Logger: log, TracerProvider: a.tp})
		a.cleanup = append(a.cleanup, a.inproc.Close)
	}

	if err := a.startNATS(ctx); err != nil {
		return nil, err
	}

	for _, svc := range a.order {
		srv, err := a.buildService(ctx, svc, dial)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", svc, err)
		}
		srv.Register(a.registrar(svc))
	}
	log.Info("baagent built", "target", cfg.Target, "version", buildinfo.Read().String(), "services", a.order)
	return a, nil
}

// Addr is the bound gRPC address of svc, or nil if this process does not
// run it.
func (a *App) Addr(svc string) net.Addr {
	if s, ok := a.servers[svc]; ok {
		return s.Addr()
	}
	return nil
}

// GatewayHTTPAddr is the gateway's bound HTTP address (API, SSE,
// WebSocket, dashboard), or nil if this process does not run the gateway.
func (a *App) GatewayHTTPAddr() net.Addr { return a.httpAddr }

// MetricsAddr is the bound /metrics address.
func (a *App) MetricsAddr() net.Addr { return a.metrics.Addr() }

// NATS is the process's NATS connection, or nil if no service needs one.
func (a *App) NATS() *nats.Conn { return a.nc }

// Registry is the process's Prometheus registry.
func (a *App) Registry() *prometheus.Registry { return a.reg }

// close releases everything New acquired, last acquired first.
func (a *App) close() {
	for i := len(a.cleanup) - 1; i >= 0; i-- {
		a.cleanup[i]()
	}
	a.cleanup = nil
}
