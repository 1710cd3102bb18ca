package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/tracing"
	contextsvc "github.com/baagent/baagent/services/context"
	"github.com/baagent/baagent/services/gateway"
	"github.com/baagent/baagent/services/orchestrator"
	"github.com/baagent/baagent/services/skills"
	skillstore "github.com/baagent/baagent/services/skills/store"
	"github.com/baagent/baagent/services/tokens"
	"github.com/baagent/baagent/services/tokens/encoding"
	"github.com/baagent/baagent/services/toolrunner"
	"github.com/baagent/baagent/services/toolrunner/external"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/mcpauth"
)

// buildService constructs one service with its dependencies.
func (a *App) buildService(ctx context.Context, svc string, dial map[string]string) (registrar, error) {
	log := a.log
	switch svc {
	case config.TargetTokens:
		opts := a.cfg.Tokens.Options()
		opts.Logger = log
		opts.Registerer = a.reg
		return tokens.New(opts)
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
		opts := a.cfg.Skills.Options()
		opts.Logger = log
		opts.Registerer = a.reg
		opts.Counter = skills.NewTokensServiceCounter(baagentv1.NewTokensServiceClient(tokensConn), 0)
		if a.cfg.Skills.StoreEnabled() {
			js, err := a.jetStream()
			if err != nil {
				return nil, fmt.Errorf("skills (setting skills-store): %w", err)
			}
			st, err := skillstore.Open(ctx, js, skillstore.Config{Replicas: a.cfg.NATSReplicas, Logger: log, Registerer: a.reg})
			if err != nil {
				return nil, fmt.Errorf("skills (settings skills-store, nats-url): %w", err)
			}
			a.cleanup = append(a.cleanup, st.Close)
			opts.Store = st
		}
		s, err := skills.New(opts)
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
		auth, err := a.mcpAuth(ctx, js, log)
		if err != nil {
			return nil, err
		}
		var flow *mcpauth.Flow
		if auth != nil {
			flow = auth.Flow
		}
		mgr, err := a.externalTools(flow)
		if err != nil {
			return nil, err
		}
		opts := a.cfg.ToolRunner.Options()
		opts.Logger = log
		opts.Registerer = a.reg
		opts.Records = records
		memConn, err := a.peer(config.TargetMemory)
		if err != nil {
			return nil, err
		}
		opts.Memory = baagentv1.NewMemoryServiceClient(memConn)
		if mgr != nil {
			opts.Sources = mgr.Sources()
			var authorized external.Authorized
			if auth != nil {
				authorized = func(ctx context.Context, tenant, server string) (bool, error) {
					st, err := auth.Flow.Status(ctx, tenant, server)
					return err == nil && st.Authorized, err
				}
			}
			opts.ServerStatus = func(ctx context.Context, tenant string) []*baagentv1.ExternalServerStatus {
				return mgr.ServerStatus(ctx, tenant, authorized)
			}
		}
		s, err := toolrunner.New(opts)
		if err != nil {
			return nil, fmt.Errorf("toolrunner (settings workspace-dir, workspace-seed-dir, artifact-dir, tools-file): %w", err)
		}
		a.cleanup = append(a.cleanup, func() { _ = s.Close() })
		a.background = append(a.background, s.Run)
		if auth == nil {
			return s, nil
		}
		return registrars{s, auth}, nil
	case config.TargetMemory:
		r, err := a.buildMemory(ctx)
		if err != nil {
			return nil, err
		}
		if err := a.startMemoryCapture(); err != nil {
			return nil, err
		}
		return r, nil
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
	conns, err := a.peersOf(config.TargetContext, config.TargetSkills, config.TargetToolRunner, config.TargetTokens, config.TargetMemory)
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
	known, err := tokens.KnownModels(a.cfg.Tokens.EncodersFile)
	if err != nil {
		return nil, fmt.Errorf("setting token-encoders-file: %w", err)
	}
	client, err := llm.New(llm.Config{
		BaseURL: ep.baseURL, APIKey: ep.apiKey, Model: ep.model,
		MetricModels:     known,
		FirstByteTimeout: a.cfg.Orchestrator.ModelFirstByteTimeout,
		IdleTimeout:      a.cfg.Orchestrator.ModelIdleTimeout,
		Retry:            llm.RetryPolicy{MaxAttempts: a.cfg.Orchestrator.ModelMaxAttempts},
		Logger:           a.log, Registerer: a.reg,
		TracerProvider: a.tp,
	})
	if err != nil {
		return nil, fmt.Errorf("setting model-base-url: %w", err)
	}
	opts := a.cfg.Orchestrator.Options()
	opts.Logger = a.log
	opts.Registerer = a.reg
	opts.TracerProvider = a.tp
	opts.JetStream = js
	opts.Context = baagentv1.NewContextServiceClient(conns[config.TargetContext])
	opts.Skills = baagentv1.NewSkillsServiceClient(conns[config.TargetSkills])
	opts.ToolRunner = baagentv1.NewToolRunnerServiceClient(conns[config.TargetToolRunner])
	opts.Tokens = baagentv1.NewTokensServiceClient(conns[config.TargetTokens])
	opts.Memory = baagentv1.NewMemoryServiceClient(conns[config.TargetMemory])
	opts.Model = orchestrator.LLM(client)
	opts.ScriptedModel = ep.scripted
	opts.DefaultModel = ep.model
	opts.MaxMsgBytes = a.cfg.MaxMsgBytes
	s := orchestrator.New(opts)
	a.background = append(a.background, s.Run)
	return s, nil
}

// buildGateway binds the public HTTP listener and connects the gateway to
// JetStream (event streams) and its peers (the run and read-only APIs).
func (a *App) buildGateway() (registrar, error) {
	conns, err := a.peersOf(config.TargetOrchestrator, config.TargetSkills, config.TargetToolRunner, config.TargetTokens, config.TargetMemory)
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
	opts := a.cfg.Gateway.Options()
	opts.Logger = a.log
	opts.Registerer = a.reg
	opts.TracerProvider = a.tp
	opts.JetStream = js
	opts.Orchestrator = baagentv1.NewOrchestratorServiceClient(conns[config.TargetOrchestrator])
	opts.Skills = baagentv1.NewSkillsServiceClient(conns[config.TargetSkills])
	opts.ToolRunner = baagentv1.NewToolRunnerServiceClient(conns[config.TargetToolRunner])
	opts.MCPAuth = baagentv1.NewMcpAuthServiceClient(conns[config.TargetToolRunner])
	opts.Tokens = baagentv1.NewTokensServiceClient(conns[config.TargetTokens])
	opts.Memory = baagentv1.NewMemoryServiceClient(conns[config.TargetMemory])
	opts.MaxMsgBytes = a.cfg.MaxMsgBytes
	// The chat interfaces (GET /v1/models) serve the configured default
	// model: the gateway cannot see what else the endpoint offers.
	opts.Models = []string{a.cfg.Model}
	opts.HTTPListener = lis
	opts.ShutdownTimeout = a.cfg.ShutdownTimeout
	s := gateway.New(opts)
	a.background = append(a.background, s.Run)
	a.log.Info("gateway HTTP API and dashboard", "addr", lis.Addr().String(), "api_keys", len(a.cfg.Gateway.APIKeys))
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

// externalTools starts the MCP and ToolProvider connections configured in
// -tools-file; their manager runs as a background loop, so it stops after
// the toolrunner's gRPC server has drained.
func (a *App) externalTools(flow *mcpauth.Flow) (*external.Manager, error) {
	if a.cfg.ToolRunner.ToolsFile == "" {
		return nil, nil
	}
	cfg, err := external.LoadFile(a.cfg.ToolRunner.ToolsFile)
	if err != nil {
		return nil, fmt.Errorf("setting tools-file: %w", err)
	}
	mgr, err := external.New(cfg, external.Options{Logger: a.log, Registerer: a.reg, TracerProvider: a.tp, OAuth: flow})
	if err != nil {
		return nil, fmt.Errorf("setting tools-file: %w", err)
	}
	a.background = append(a.background, mgr.Run)
	return mgr, nil
}

// mcpAuth builds McpAuthService when -mcp-oauth-key-file is set: grants
// sealed in the MCP OAuth buckets, servers from the `auth: oauth` entries
// of -tools-file.
func (a *App) mcpAuth(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*mcpauth.Service, error) {
	st := a.cfg.ToolRunner
	if st.MCPOAuthKeyFile == "" {
		return nil, nil
	}
	key, err := mcpauth.LoadKey(st.MCPOAuthKeyFile)
	if err != nil {
		return nil, fmt.Errorf("setting mcp-oauth-key-file: %w", err)
	}
	kv, err := js.KeyValue(ctx, natsx.BucketMCPOAuth)
	if err != nil {
		return nil, fmt.Errorf("toolrunner (setting nats-url): bucket %s: %w", natsx.BucketMCPOAuth, err)
	}
	states, err := js.KeyValue(ctx, natsx.BucketMCPOAuthState)
	if err != nil {
		return nil, fmt.Errorf("toolrunner (setting nats-url): bucket %s: %w", natsx.BucketMCPOAuthState, err)
	}
	store, err := mcpauth.NewStore(kv, states, key)
	if err != nil {
		return nil, fmt.Errorf("setting mcp-oauth-key-file: %w", err)
	}
	servers := map[string]mcpauth.Server{}
	if st.ToolsFile != "" {
		cfg, err := external.LoadFile(st.ToolsFile)
		if err != nil {
			return nil, fmt.Errorf("setting tools-file: %w", err)
		}
		servers = cfg.OAuthServers()
	}
	m, err := mcpauth.NewMetrics(a.reg)
	if err != nil {
		return nil, err
	}
	flow := &mcpauth.Flow{Store: store, RedirectURL: st.MCPOAuthRedirectURL, Logger: log.With("component", "mcp-oauth"), Metrics: m}
	return &mcpauth.Service{Flow: flow, Servers: func(name string) (mcpauth.Server, bool) {
		s, ok := servers[name]
		return s, ok
	}}, nil
}

// registrars registers several services on one server.
type registrars []registrar

func (rs registrars) Register(gs grpc.ServiceRegistrar) {
	for _, r := range rs {
		r.Register(gs)
	}
}
