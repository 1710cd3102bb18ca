package app

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/trace"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/tracing"
)

// TracingConfig is the tracing configuration of cfg: the -otlp-* and
// -trace-* settings, with service.name baagent-<target> (baagent for
// all) unless -trace-service-name or OTEL_SERVICE_NAME names it.
func TracingConfig(cfg *Config, getenv func(string) string) tracing.Config {
	name := cfg.TraceServiceName
	if name == "" && getenv("OTEL_SERVICE_NAME") == "" {
		name = "baagent"
		if cfg.Target != config.TargetAll {
			name += "-" + cfg.Target
		}
	}
	return tracing.Config{
		Endpoint:      cfg.OTLPEndpoint,
		Protocol:      cfg.OTLPProtocol,
		Headers:       cfg.OTLPHeaders,
		Insecure:      cfg.OTLPInsecure,
		Sampling:      cfg.TraceSampling,
		ExportTimeout: cfg.OTLPExportTimeout,
		BatchSize:     cfg.OTLPBatchSize,
		ServiceName:   name,
		Environment:   cfg.TraceEnvironment,
		Tags:          cfg.TraceTags,
		Getenv:        getenv,
	}
}

// startTracing builds the process's tracer provider; its shutdown, the
// last cleanup, flushes the spans still buffered once everything else has
// stopped.
func (a *App) startTracing(ctx context.Context, o options) error {
	tc := TracingConfig(a.cfg, os.Getenv)
	if o.trace != nil {
		o.trace(&tc)
	}
	tp, shutdown, err := tracing.Setup(ctx, tc)
	if err != nil {
		return fmt.Errorf("tracing (settings otlp-*, trace-*): %w", err)
	}
	a.tp = tp
	if !tracing.Enabled(tp) {
		return nil
	}
	a.cleanup = append(a.cleanup, func() {
		sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			a.log.Warn("trace export not flushed", "err", err.Error())
		}
	})
	a.log.Info("tracing on", "otlp_endpoint", tc.Endpoint, "protocol", tc.Protocol, "sampling", tc.Sampling, "service_name", tc.ServiceName)
	return nil
}

// TracerProvider is the process's tracer provider (no-op with tracing
// off).
func (a *App) TracerProvider() trace.TracerProvider { return a.tp }
