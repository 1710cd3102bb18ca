package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"github.com/baagent/baagent/internal/metrics"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// handlingBuckets are the histogram buckets for grpc_server_handling_seconds.
// They reach minutes because agent runs and event streams are long-lived,
// unlike typical RPCs.
func handlingBuckets() []float64 {
	return []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
}

// ServerMetrics holds the gRPC server metric vectors for one registry. Create
// it once per registry and pass it to every Server in the process: several
// services in the all-in-one process share one /metrics and are told apart by
// the grpc_service label.
type ServerMetrics struct {
	handled  *prometheus.CounterVec
	handling *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

// NewServerMetrics creates the vectors and registers them on reg:
//
//	grpc_server_handled_total{grpc_service,grpc_method,grpc_code}  counter
//	grpc_server_handling_seconds{grpc_service,grpc_method}         histogram
//	grpc_server_in_flight_rpcs{grpc_service,grpc_method}           gauge
//
// If identical vectors are already registered on reg (NewServerMetrics was
// called twice for the same registry) the existing ones are reused instead of
// failing, so both results record into the same series.
func NewServerMetrics(reg prometheus.Registerer) (*ServerMetrics, error) {
	if reg == nil {
		return nil, errors.New("grpcserver: NewServerMetrics needs a registry")
	}
	handled, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "grpc_server_handled_total",
		Help: "RPCs completed on the server, by gRPC status code.",
	}, []string{"grpc_service", "grpc_method", "grpc_code"}))
	if err != nil {
		return nil, err
	}
	handling, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "grpc_server_handling_seconds",
		Help:    "Time from an RPC's start to its completion on the server (whole stream for streaming RPCs).",
		Buckets: handlingBuckets(),
	}, []string{"grpc_service", "grpc_method"}))
	if err != nil {
		return nil, err
	}
	inFlight, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "grpc_server_in_flight_rpcs",
		Help: "RPCs currently being handled (open streams included).",
	}, []string{"grpc_service", "grpc_method"}))
	if err != nil {
		return nil, err
	}
	return &ServerMetrics{handled: handled, handling: handling, inFlight: inFlight}, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := metrics.RegisterShared(reg, c)
	if err != nil {
		return c, fmt.Errorf("grpcserver: %w", err)
	}
	return c, nil
}

// begin records the start of an RPC and returns the function that records
// its end with the returned error.
func (m *ServerMetrics) begin(ctx context.Context, fullMethod string) func(error) {
	svc, method := splitMethod(fullMethod)
	g := m.inFlight.WithLabelValues(svc, method)
	g.Inc()
	start := time.Now()
	return func(err error) {
		g.Dec()
		metrics.Observe(ctx, m.handling.WithLabelValues(svc, method), time.Since(start).Seconds())
		m.handled.WithLabelValues(svc, method, status.Code(err).String()).Inc()
	}
}

func (m *ServerMetrics) unaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		end := m.begin(ctx, info.FullMethod)
		resp, err := handler(ctx, req)
		end(err)
		return resp, err
	}
}

func (m *ServerMetrics) streamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		end := m.begin(ss.Context(), info.FullMethod)
		err := handler(srv, ss)
		end(err)
		return err
	}
}

// splitMethod splits "/pkg.Service/Method" into ("pkg.Service", "Method").
func splitMethod(fullMethod string) (service, method string) {
	s := strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "unknown", s
}
