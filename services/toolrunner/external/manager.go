package external

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/baagent/baagent/internal/grpcclient"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/toolrunner/mcpauth"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a Manager.
type Options struct {
	// Logger receives connection and restart logs and the stderr of stdio
	// MCP servers; nil discards them.
	Logger *slog.Logger
	// Registerer receives the per-source metrics; nil registers none.
	Registerer prometheus.Registerer
	// ReservedNames are tool names external tools may not take; nil means
	// DefaultReservedNames (the built-in tools).
	ReservedNames []string
	// Backoff is the delay between reconnects and restarts; zero fields take
	// retry's defaults (500 ms, doubling up to 30 s) and ±20% jitter.
	Backoff retry.Backoff
	// KeepAlive is the interval of MCP pings; 0 means DefaultKeepAlive and a
	// negative value disables them.
	KeepAlive time.Duration
	// StopGrace is how long a stdio MCP server may take to exit when it is
	// stopped, before SIGTERM and then SIGKILL; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// SDKLogger, when set, receives the MCP SDK's own debug logs.
	SDKLogger *slog.Logger
	// TracerProvider traces the calls to ToolProvider servers (gRPC) and
	// network MCP servers (the HTTP requests of streamable HTTP and SSE, the
	// WebSocket handshake), propagating the caller's trace
	// context; nil or a no-op provider: nothing is traced.
	TracerProvider trace.TracerProvider
	// OAuth hands out tenants' tokens for auth: oauth MCP servers; nil
	// (MCP OAuth off): no tenant can use those servers.
	OAuth *mcpauth.Flow
	// OAuthSessions bounds the per-tenant sessions of each auth: oauth
	// server (DefaultOAuthSessions if 0); OAuthIdle closes a session unused
	// that long (DefaultOAuthIdle if 0).
	OAuthSessions int
	OAuthIdle     time.Duration
}

// reconnectJitter is the jitter of reconnects and restarts when Backoff
// sets none, so that servers that fail together do not retry in step.
const reconnectJitter = 0.2

// reconnectBackoff is b with its defaults filled.
func reconnectBackoff(b retry.Backoff) retry.Backoff {
	if b.Jitter == 0 {
		b.Jitter = reconnectJitter
	}
	return b.WithDefaults()
}

// Manager owns the connections to the configured ToolProvider and MCP
// servers. It offers one tool.Source per server (Sources), in configuration
// order: providers first, then MCP servers. The sources exist from New on
// and offer no tools until Run has connected them.
type Manager struct {
	log       *slog.Logger
	metrics   *metrics
	providers []*providerSource
	mcps      []*mcpSource
	oauth     []*oauthSource // auth: oauth MCP servers, a session per tenant

	mu      sync.Mutex
	running bool
}

// New builds a Manager from cfg (as returned by Parse or LoadFile). It does
// not connect: Run does. It fails on a provider whose TLS files cannot be
// loaded or whose address gRPC refuses, and when the metrics cannot be
// registered.
func New(cfg Config, opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Logger = opts.Logger.With("component", "external-tools")
	if opts.ReservedNames == nil {
		opts.ReservedNames = DefaultReservedNames
	}
	switch {
	case opts.KeepAlive == 0:
		opts.KeepAlive = DefaultKeepAlive
	case opts.KeepAlive < 0:
		opts.KeepAlive = 0
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	dialOpts := make([][]grpc.DialOption, len(cfg.Providers))
	for i, p := range cfg.Providers {
		o, err := providerDialOptions(p, opts.Backoff)
		if err != nil {
			return nil, err
		}
		dialOpts[i] = append(o, grpcclient.TraceOptions(opts.TracerProvider)...)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	names := newNameRegistry(opts.ReservedNames)
	mgr := &Manager{log: opts.Logger, metrics: m}
	for i, p := range cfg.Providers {
		mgr.providers = append(mgr.providers, newProviderSource(p, dialOpts[i], opts.Backoff, opts.Logger, m, names))
	}
	for _, s := range cfg.MCPServers {
		if s.Auth == AuthOAuth && s.HTTP != nil {
			// Connected per tenant, with the tenant's token, when a
			// tenant holding a grant lists or calls its tools.
			mgr.oauth = append(mgr.oauth, newOAuthSource(s, opts, m))
			continue
		}
		ms := newMCPSource(s, opts, m, names)
		ms.logger = opts.SDKLogger
		mgr.mcps = append(mgr.mcps, ms)
	}
	return mgr, nil
}

// Sources returns one tool.Source per configured server. Pass them to the
// toolrunner; each offers its tools only while its server is up.
func (m *Manager) Sources() []tool.Source {
	out := make([]tool.Source, 0, len(m.providers)+len(m.mcps)+len(m.oauth))
	for _, p := range m.providers {
		out = append(out, p)
	}
	for _, s := range m.mcps {
		out = append(out, s)
	}
	for _, s := range m.oauth {
		out = append(out, s)
	}
	return out
}

// ErrRunTwice is returned by a second call of Run.
var ErrRunTwice = errors.New("external tools: Manager.Run called twice")

// Run connects every server and keeps them connected, reconnecting
// providers and restarting MCP servers with backoff, until ctx ends (also
// with no server configured). It then closes every connection, stops every
// child process and returns nil once all are gone. A Manager runs once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrRunTwice
	}
	m.running = true
	m.mu.Unlock()

	m.log.Info("external tools starting", "providers", len(m.providers), "mcp_servers", len(m.mcps))
	var wg sync.WaitGroup
	for _, p := range m.providers {
		wg.Go(func() { p.run(ctx) })
	}
	for _, s := range m.mcps {
		wg.Go(func() { s.run(ctx) })
	}
	for _, s := range m.oauth {
		wg.Go(func() { s.run(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	m.log.Info("external tools stopped")
	return nil
}
