// Package metrics serves a process's Prometheus registry on /metrics. Each
// process has one registry, created by NewRegistry and passed explicitly to
// whatever registers collectors on it, so there is no hidden global state.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baagent/baagent/internal/listener"
)

// Path is where the metrics are served.
const Path = "/metrics"

// DefaultShutdownTimeout bounds how long Serve waits for in-flight scrapes
// once its context is done.
const DefaultShutdownTimeout = 5 * time.Second

// NewRegistry returns a registry with the Go runtime and process collectors
// already registered, which every baagent process exports.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Options configures a Server.
type Options struct {
	// Addr is the TCP address to listen on, e.g. ":9090".
	Addr string
	// Registry is gathered on each scrape. Required.
	Registry *prometheus.Registry
	// Logger receives serve and scrape errors; nil discards them.
	Logger *slog.Logger
	// ShutdownTimeout bounds graceful shutdown; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Server is an HTTP server exposing one registry on Path. Listen and Serve
// are separate so a process can bind every port first and fail fast when one
// is taken, before starting anything.
type Server struct {
	opts    Options
	log     *slog.Logger
	handler http.Handler
	lis     *listener.Lazy
}

// NewServer builds a Server; it does not bind until Listen or Serve.
func NewServer(opts Options) (*Server, error) {
	if opts.Registry == nil {
		return nil, errors.New("metrics: Options.Registry is required")
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "metrics")
	h := promhttp.InstrumentMetricHandler(opts.Registry, promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{
		ErrorLog:          errorLogger{log},
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          opts.Registry,
		EnableOpenMetrics: true,
	}))
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, h)
	return &Server{opts: opts, log: log, handler: mux, lis: listener.New(opts.Addr, "metrics")}, nil
}

// Handler returns the HTTP handler serving Path, for mounting elsewhere or
// testing without a socket.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds the address. The error names the address, e.g.
// "metrics: listen on :9090: listen tcp :9090: bind: address already in use".
// Calling it again after a successful bind is a no-op.
func (s *Server) Listen() error { return s.lis.Listen() }

// Close releases the listener of a server that will not serve, e.g. when
// the process fails to start after binding its ports. Once Serve has begun
// it owns the listener; a Close after Serve returned is harmless.
func (s *Server) Close() error { return s.lis.Close() }

// Addr is the bound address (useful with port 0), or nil before Listen.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Serve serves until ctx is done, then shuts down gracefully within
// Options.ShutdownTimeout and returns nil. It binds first if Listen has not
// been called. A Server serves at most once.
func (s *Server) Serve(ctx context.Context) error {
	lis, err := s.lis.Bound()
	if err != nil {
		return err
	}

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	s.log.Info("serving metrics", "addr", lis.Addr().String(), "path", Path)

	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("metrics server did not shut down gracefully; closing", "err", err)
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: serve on %s: %w", lis.Addr(), err)
	}
	return nil
}

// errorLogger adapts slog to promhttp.Logger.
type errorLogger struct{ log *slog.Logger }

func (l errorLogger) Println(v ...any) { l.log.Error("metrics scrape error", "err", fmt.Sprint(v...)) }
