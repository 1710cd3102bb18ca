// Package app is the composition root of the baagent binary: it builds the
// services a -target selects, with their gRPC servers, metrics, NATS and peer
// connections, and runs them until shut down. It holds no business logic.
// It sits under cmd/baagent, not internal/, because it imports every
// service, and internal/ is plumbing that never does.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/buildinfo"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/grpcclient"
	"github.com/baagent/baagent/internal/grpcinproc"
	"github.com/baagent/baagent/internal/grpcserver"
	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/tracing"
	contextsvc "github.com/baagent/baagent/services/context"
	"github.com/baagent/baagent/services/gateway"
	"github.com/baagent/baagent/services/orchestrator"
	"github.com/baagent/baagent/services/skills"
	"github.com/baagent/baagent/services/tokens"
	"github.com/baagent/baagent/services/tokens/encoding"
	"github.com/baagent/baagent/services/toolrunner"
	"github.com/baagent/baagent/services/toolrunner/builtin"
	"github.com/baagent/baagent/services/toolrunner/external"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// natsStartupTimeout bounds the first connection to an external NATS and
// provisioning, so a process whose NATS never appears exits with a clear
// error (and is restarted by its supervisor) instead of hanging.
const natsStartupTimeout = 30 * time.Second

// registrar is what every service offers the gRPC server.
type registrar interface {
	Register(grpc.ServiceRegistrar)
}

// App is a built, not yet running, set of services.
type App struct {
	cfg *config.Config
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

// TracingConfig is the tracing configuration of cfg: the -otlp-* and
// -trace-* settings, with service.name baagent-<target> (baagent for
// all) unless -trace-service-name or OTEL_SERVICE_NAME names it.
func TracingConfig(cfg *config.Config, getenv func(string) string) tracing.Config {
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

// New builds the services cfg selects. It binds every port first, so that a
// port in use fails before anything starts, then starts or connects to NATS,
// then constructs and registers the services. On error everything already
// started is stopped again.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (_ *App, err error) {
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

// startNATS starts the embedded server in -target=all and connects and
// provisions JetStream when a service this process runs needs it.
func (a *App) startNATS(ctx context.Context) error {
	needed := false
	for _, svc := range a.order {
		needed = needed || config.NeedsNATS(svc)
	}
	if !needed {
		return nil
	}
	url := a.cfg.NATSURL
	setting := "nats-url"
	if a.cfg.Target == config.TargetAll {
		host, portStr, err := net.SplitHostPort(a.cfg.EmbeddedNATSAddr)
		if err != nil {
			return fmt.Errorf("setting embedded-nats-addr: %w", err)
		}
		port, _ := strconv.Atoi(portStr)
		if port == 0 {
			port = -1 // nats-server's "any free port"
		}
		a.embedded, err = natsx.StartEmbedded(natsx.EmbeddedOptions{
			Host:     host,
			Port:     port,
			StoreDir: filepath.Join(a.cfg.DataDir, "jetstream"),
			Logger:   a.log,
		})
		if err != nil {
			return fmt.Errorf("setting embedded-nats-addr: %w", err)
		}
		a.cleanup = append(a.cleanup, a.embedded.Shutdown)
		url = a.embedded.ClientURL()
		setting = "embedded-nats-addr"
	}

	ctx, cancel := context.WithTimeout(ctx, natsStartupTimeout)
	defer cancel()
	nc, err := natsx.Connect(ctx, url, "baagent-"+a.cfg.Target, a.log)
	if err != nil {
		return fmt.Errorf("setting %s: %w", setting, err)
	}
	a.nc = nc
	a.cleanup = append(a.cleanup, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{Replicas: a.cfg.NATSReplicas}); err != nil {
		return fmt.Errorf("JetStream (is it enabled on %s?): %w", url, err)
	}
	return nil
}

// buildService constructs one service with its dependencies.
func (a *App) buildService(ctx context.Context, svc string, dial map[string]string) (registrar, error) {
	log := a.log
	switch svc {
	case config.TargetTokens:
		return tokens.New(tokens.Options{
			Logger:       log,
			Registerer:   a.reg,
			EncodersFile: a.cfg.TokenEncodersFile,
		})
	case config.TargetContext:
		tokensConn, err := a.peer(config.TargetTokens)
		if err != nil {
			return nil, err
		}
		js, err := a.jetStream()
		if err != nil {
			return nil, err
		}
		opts := contextsvc.Options{
			Logger:     log,
			Registerer: a.reg,
			JetStream:  js,
			Tokens:     baagentv1.NewTokensServiceClient(tokensConn),
		}
		// Summaries need a real model: the scripted one replays scenarios
		// and would return nonsense, so without an endpoint SUMMARIZE falls
		// back to EXTRACT (and the window says so).
		if a.cfg.ModelBaseURL != "" {
			sumOpts := contextsvc.OpenAISummarizerOptions{BaseURL: a.cfg.ModelBaseURL, APIKey: a.cfg.ModelAPIKey}
			if tracing.Enabled(a.tp) {
				// The summaries' model calls are HTTP client spans (in
				// the background, so mostly roots of their own traces).
				sumOpts.HTTPClient = &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport,
					otelhttp.WithTracerProvider(a.tp), otelhttp.WithPropagators(tracing.Propagator()),
					otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))}
			}
			sum, err := contextsvc.NewOpenAISummarizer(sumOpts)
			if err != nil {
				return nil, fmt.Errorf("setting model-base-url: %w", err)
			}
			opts.Summarizer, opts.SummarizerModel = sum, a.cfg.Model
		}
		s := contextsvc.New(opts)
		a.background = append(a.background, s.Run)
		return s, nil
	case config.TargetSkills:
		tokensConn, err := a.peer(config.TargetTokens)
		if err != nil {
			return nil, err
		}
		s, err := skills.New(skills.Options{
			Logger:     log,
			Registerer: a.reg,
			Root:       a.cfg.SkillsDir,
			Counter:    skills.NewTokensServiceCounter(baagentv1.NewTokensServiceClient(tokensConn), 0),
		})
		if err != nil {
			return nil, fmt.Errorf("setting skills-dir: %w", err)
		}
		a.background = append(a.background, s.Run)
		return s, nil
	case config.TargetToolRunner:
		js, err := a.jetStream()
		if err != nil {
			return nil, err
		}
		records, err := idempotency.OpenKV(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("toolrunner (setting nats-url): %w", err)
		}
		sources, err := a.externalTools()
		if err != nil {
			return nil, err
		}
		tb := a.cfg.ToolBudgets
		s, err := toolrunner.New(toolrunner.Options{
			Records:          records,
			Logger:           log,
			Registerer:       a.reg,
			WorkspaceDir:     a.cfg.WorkspaceDir,
			WorkspaceSeedDir: a.cfg.WorkspaceSeedDir,
			WorkspaceMaxIdle: a.cfg.WorkspaceMaxIdle,
			ArtifactDir:      a.cfg.ArtifactDir,
			ConfigFile:       a.cfg.ToolsFile,
			Sources:          sources,
			// The services read 0 as their default and a negative
			// quota or heap limit as none; the settings read 0 as none.
			WorkspaceQuotaBytes: int64(unlimitedIfZero(int(tb.WorkspaceQuotaBytes))),
			ArtifactQuotaBytes:  int64(unlimitedIfZero(int(tb.ArtifactQuotaBytes))),
			Builtin: builtin.Options{
				QueryMaxBytes:        tb.SQLMaxValueBytes,
				QueryHeapLimit:       int64(unlimitedIfZero(int(tb.SQLHeapLimitBytes))),
				MaxConcurrentQueries: tb.SQLMaxConcurrent,
				MaxQueriesPerTenant:  tb.SQLMaxPerTenant,
				SearchTimeout:        tb.SearchTimeout,
				GrepMaxBytes:         tb.GrepMaxBytes,
				MaxConcurrentGreps:   tb.GrepMaxConcurrent,
				MaxGrepsPerTenant:    tb.GrepMaxPerTenant,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("toolrunner (settings workspace-dir, workspace-seed-dir, artifact-dir, tools-file): %w", err)
		}
		a.cleanup = append(a.cleanup, func() { _ = s.Close() })
		a.background = append(a.background, s.Run)
		return s, nil
	case config.TargetOrchestrator:
		return a.buildOrchestrator()
	case config.TargetGateway:
		return a.buildGateway()
	}
	return nil, fmt.Errorf("unknown service %q", svc)
}

// buildOrchestrator connects the ReAct loop to its peers, JetStream and
// the model endpoint (the scripted model when none is configured).
func (a *App) buildOrchestrator() (registrar, error) {
	conns, err := a.peersOf(config.TargetContext, config.TargetSkills, config.TargetToolRunner, config.TargetTokens)
	if err != nil {
		return nil, err
	}
	js, err := a.jetStream()
	if err != nil {
		return nil, err
	}
	ep, err := a.modelEndpoint()
	if err != nil {
		return nil, err
	}
	// Models the registry knows by name keep their own metric label value;
	// any other name a client picks counts as "other".
	known, err := tokens.KnownModels(a.cfg.TokenEncodersFile)
	if err != nil {
		return nil, fmt.Errorf("setting token-encoders-file: %w", err)
	}
	client, err := llm.New(llm.Config{
		BaseURL: ep.baseURL, APIKey: ep.apiKey, Model: ep.model,
		MetricModels:     known,
		FirstByteTimeout: a.cfg.ModelFirstByteTimeout,
		IdleTimeout:      a.cfg.ModelIdleTimeout,
		Retry:            llm.RetryPolicy{MaxAttempts: a.cfg.ModelMaxAttempts},
		Logger:           a.log, Registerer: a.reg,
		TracerProvider: a.tp,
	})
	if err != nil {
		return nil, fmt.Errorf("setting model-base-url: %w", err)
	}
	s := orchestrator.New(orchestrator.Options{
		Logger:               a.log,
		Registerer:           a.reg,
		JetStream:            js,
		Context:              baagentv1.NewContextServiceClient(conns[config.TargetContext]),
		Skills:               baagentv1.NewSkillsServiceClient(conns[config.TargetSkills]),
		ToolRunner:           baagentv1.NewToolRunnerServiceClient(conns[config.TargetToolRunner]),
		Tokens:               baagentv1.NewTokensServiceClient(conns[config.TargetTokens]),
		Model:                orchestrator.LLM(client),
		ScriptedModel:        ep.scripted,
		DefaultModel:         ep.model,
		SubAgentsDir:         a.cfg.SubAgentsDir,
		SubAgentMaxDepth:     a.cfg.SubAgentMaxDepth,
		MaxConcurrentRuns:    a.cfg.MaxConcurrentRuns,
		MaxQueuedRuns:        a.cfg.MaxQueuedRuns,
		MaxRunsPerTenant:     a.cfg.MaxRunsPerTenant,
		SubAgentTimeout:      a.cfg.SubAgentTimeout,
		ClarificationTimeout: a.cfg.ClarificationTimeout,
		DecisionTimeout:      a.cfg.DecisionTimeout,
		TracerProvider:       a.tp,
		MaxMsgBytes:          a.cfg.MaxMsgBytes,
	})
	a.background = append(a.background, s.Run)
	return s, nil
}

// buildGateway binds the public HTTP listener and connects the gateway to
// JetStream (event streams) and its peers (the run and read-only APIs).
func (a *App) buildGateway() (registrar, error) {
	conns, err := a.peersOf(config.TargetOrchestrator, config.TargetSkills, config.TargetToolRunner, config.TargetTokens)
	if err != nil {
		return nil, err
	}
	js, err := a.jetStream()
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", a.cfg.GatewayHTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("setting gateway-http-listen: %w", err)
	}
	a.cleanup = append(a.cleanup, func() { _ = lis.Close() })
	a.httpAddr = lis.Addr()
	edge := a.cfg.GatewayEdge
	s := gateway.New(gateway.Options{
		Logger:       a.log,
		Registerer:   a.reg,
		JetStream:    js,
		Orchestrator: baagentv1.NewOrchestratorServiceClient(conns[config.TargetOrchestrator]),
		Skills:       baagentv1.NewSkillsServiceClient(conns[config.TargetSkills]),
		ToolRunner:   baagentv1.NewToolRunnerServiceClient(conns[config.TargetToolRunner]),
		Tokens:       baagentv1.NewTokensServiceClient(conns[config.TargetTokens]),
		APIKeys:      a.cfg.APIKeys,
		RateLimit:    a.cfg.GatewayRateLimit,
		RateBurst:    a.cfg.GatewayRateBurst,
		MaxMsgBytes:  a.cfg.MaxMsgBytes,
		// The gateway reads 0 as its default and a negative limit as
		// none; the settings read 0 as none.
		StreamTokenSecret: edge.TokenSecret,
		TokenTTL:          edge.TokenTTL,
		AllowedOrigins:    edge.AllowedOrigins,
		MaxStreamsPerKey:  unlimitedIfZero(edge.MaxStreamsPerKey),
		MaxInFlightPerKey: unlimitedIfZero(edge.MaxInFlightPerKey),
		AuthFailureLimit:  unlimitedIfZero(edge.AuthFailureLimit),
		AuthFailureWindow: edge.AuthFailureWindow,
		BodyReadTimeout:   time.Duration(unlimitedIfZero(int(edge.BodyReadTimeout))),
		HTTPListener:      lis,
		ShutdownTimeout:   a.cfg.ShutdownTimeout,
		TracerProvider:    a.tp,

		TraceLinkTemplate: a.cfg.TraceLinkTemplate,
	})
	a.background = append(a.background, s.Run)
	a.log.Info("gateway HTTP API and dashboard", "addr", lis.Addr().String(), "api_keys", len(a.cfg.APIKeys))
	return s, nil
}

// modelEndpoint is the OpenAI-compatible endpoint the orchestrator talks to.
type modelEndpoint struct {
	baseURL, apiKey, model string
	scripted               bool
}

// modelEndpoint returns the configured model endpoint, or starts the
// scripted model on a loopback port when -model-base-url is empty. The
// scripted model is a background loop, so it outlives the gRPC servers'
// drain and in-flight runs can finish their turn.
func (a *App) modelEndpoint() (modelEndpoint, error) {
	if a.cfg.ModelBaseURL != "" {
		return modelEndpoint{baseURL: a.cfg.ModelBaseURL, apiKey: a.cfg.ModelAPIKey, model: a.cfg.Model}, nil
	}
	if a.scriptedURL == "" {
		encs, err := encoding.NewSet()
		if err != nil {
			return modelEndpoint{}, err
		}
		counter, err := encs.Get("o200k_base")
		if err != nil {
			return modelEndpoint{}, err
		}
		srv, err := scripted.New(scripted.Options{Dir: a.cfg.ScenariosDir, Logger: a.log, Registerer: a.reg, Counter: counter})
		if err != nil {
			return modelEndpoint{}, fmt.Errorf("setting scenarios-dir: %w", err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return modelEndpoint{}, fmt.Errorf("scripted model: %w", err)
		}
		a.cleanup = append(a.cleanup, func() { _ = lis.Close() })
		a.background = append(a.background, func(ctx context.Context) error { return srv.Serve(ctx, lis) })
		a.scriptedURL = "http://" + lis.Addr().String() + "/v1"
		a.log.Info("no model endpoint configured: serving the scripted model", "url", a.scriptedURL, "scenarios_dir", a.cfg.ScenariosDir)
	}
	return modelEndpoint{baseURL: a.scriptedURL, model: scripted.ModelName, scripted: true}, nil
}

// jetStream is the JetStream handle on the process's NATS connection.
func (a *App) jetStream() (jetstream.JetStream, error) {
	if a.nc == nil {
		return nil, errors.New("no NATS connection (setting nats-url)")
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	return js, nil
}

// peer returns the shared client connection to a peer service: the
// in-process channel when this process runs it (-target=all), else a
// network connection dialled lazily, so a peer that is down shows up as
// Unavailable on the first call, not as a start-up failure.
func (a *App) peer(svc string) (grpc.ClientConnInterface, error) {
	if a.inproc != nil && a.servers[svc] != nil {
		return a.inproc, nil
	}
	return a.network(svc)
}

// peersOf returns the connections to several peers, by service.
func (a *App) peersOf(svcs ...string) (map[string]grpc.ClientConnInterface, error) {
	conns := make(map[string]grpc.ClientConnInterface, len(svcs))
	for _, svc := range svcs {
		conn, err := a.peer(svc)
		if err != nil {
			return nil, err
		}
		conns[svc] = conn
	}
	return conns, nil
}

// network returns the shared network connection to svc.
func (a *App) network(svc string) (*grpc.ClientConn, error) {
	if conn, ok := a.networkPeers[svc]; ok {
		return conn, nil
	}
	conn, err := grpcclient.Dial(a.dial[svc], grpcclient.Options{MaxMsgBytes: a.cfg.MaxMsgBytes, TracerProvider: a.tp})
	if err != nil {
		return nil, fmt.Errorf("setting %s-addr: %w", svc, err)
	}
	a.networkPeers[svc] = conn
	a.cleanup = append(a.cleanup, func() { _ = conn.Close() })
	return conn, nil
}

// registrar is where svc registers its gRPC services: its network server
// and, in -target=all, the in-process channel too (behind the same
// interceptors; streaming calls on the channel use the network).
func (a *App) registrar(svc string) grpc.ServiceRegistrar {
	srv := a.servers[svc]
	if a.inproc == nil {
		return srv.GRPC()
	}
	inproc := a.inproc.Registrar(srv.UnaryInterceptor())
	return registrarFunc(func(desc *grpc.ServiceDesc, impl any) {
		srv.GRPC().RegisterService(desc, impl)
		inproc.RegisterService(desc, impl)
		if len(desc.Streams) > 0 {
			if conn, err := a.network(svc); err == nil {
				a.inproc.SetStreamFallback(desc.ServiceName, conn)
			}
		}
	})
}

type registrarFunc func(desc *grpc.ServiceDesc, impl any)

func (f registrarFunc) RegisterService(desc *grpc.ServiceDesc, impl any) { f(desc, impl) }

// externalTools starts the MCP and ToolProvider connections configured in
// -tools-file; their manager runs as a background loop, so it stops after
// the toolrunner's gRPC server has drained.
func (a *App) externalTools() ([]tool.Source, error) {
	if a.cfg.ToolsFile == "" {
		return nil, nil
	}
	cfg, err := external.LoadFile(a.cfg.ToolsFile)
	if err != nil {
		return nil, fmt.Errorf("setting tools-file: %w", err)
	}
	mgr, err := external.New(cfg, external.Options{Logger: a.log, Registerer: a.reg, TracerProvider: a.tp})
	if err != nil {
		return nil, fmt.Errorf("setting tools-file: %w", err)
	}
	a.background = append(a.background, mgr.Run)
	return mgr.Sources(), nil
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

// Run serves until ctx is done, then shuts down gracefully: gRPC servers
// drain in-flight RPCs (bounded by -shutdown-timeout), background loops stop,
// the NATS connection drains, and the embedded NATS stops last. It returns
// nil after a requested shutdown and the first error if something failed
// while serving (after shutting the rest down).
func (a *App) Run(ctx context.Context) error {
	defer a.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		errOnce.Do(func() {
			firstErr = err
			cancel() // one failure stops the whole process
		})
	}
	start := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(f(ctx))
		}()
	}
	start(a.metrics.Serve)
	for _, svc := range a.order {
		start(a.servers[svc].Serve)
	}
	for _, f := range a.background {
		start(f)
	}
	a.log.Info("baagent running", "target", a.cfg.Target)
	<-ctx.Done()
	a.log.Info("baagent shutting down")
	wg.Wait()

	if a.nc != nil {
		if err := drain(a.nc, a.cfg.ShutdownTimeout); err != nil {
			a.log.Warn("NATS drain incomplete", "err", err)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	a.log.Info("baagent stopped")
	return nil
}

// drain flushes what the connection still has to publish and waits for it
// to close, up to timeout.
func drain(nc *nats.Conn, timeout time.Duration) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		return err
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("still draining after %s", timeout)
	}
}

// close releases everything New acquired, last acquired first.
func (a *App) close() {
	for i := len(a.cleanup) - 1; i >= 0; i-- {
		a.cleanup[i]()
	}
	a.cleanup = nil
}

// unlimitedIfZero maps a setting's 0 (no limit) to a service option's
// negative (no limit; 0 there is the default).
func unlimitedIfZero(v int) int {
	if v == 0 {
		return -1
	}
	return v
}
