// Package gateway is the GatewayService, the public edge: runs, their event
// streams, skills, tools and token counts for the caller's tenant, over
// gRPC, HTTP/JSON, Server-Sent Events, WebSocket and a live dashboard. The
// tenant comes from the caller's API key, never from the request.
//
// Run operations are forwarded to the orchestrator, catalog reads to the
// skills, toolrunner and tokens services, and a tenant's skill writes
// (skills_admin.go) to the skills service, all through their gRPC
// contracts.
// Event streams come from one in-process hub (internal/hub) that shares one
// JetStream consumer per run among all of the run's viewers.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.GatewayService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.GatewayService"

// Limits and defaults.
const (
	// MaxPageSize is the largest ListRuns page (the contract's maximum).
	MaxPageSize = 500
	// DefaultMaxTextBytes bounds the text of CountTokens (16 MiB, as the
	// tokens service).
	DefaultMaxTextBytes = 16 << 20
	// DefaultWriteTimeout bounds one write to a streaming client; a client
	// that does not take an event within it is cut as a slow consumer.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultHeartbeat is the interval of SSE comments and WebSocket pings.
	DefaultHeartbeat = 15 * time.Second
	// DefaultTokenTTL is the lifetime of a browser stream token.
	DefaultTokenTTL = 10 * time.Minute
	// DefaultMaxBodyBytes bounds an HTTP/JSON request body.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxHeaderBytes bounds an HTTP request's header (an API key is
	// at most 512 bytes; nothing else the API reads is large).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultShutdownTimeout bounds draining the HTTP server.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultTenant serves every caller when no API keys are configured
	// (loopback clients only).
	DefaultTenant = "default"
	// DefaultPageSize is the ListRuns page size when none is given (the
	// contract's default).
	DefaultPageSize = 50
	// DefaultMaxMsgBytes is the gRPC message limit assumed when
	// Options.MaxMsgBytes is not set (grpcserver's default).
	DefaultMaxMsgBytes = 16 << 20
	// DefaultMaxStreamsPerKey bounds the event streams one API key holds
	// open at once (gRPC, SSE and WebSocket together).
	DefaultMaxStreamsPerKey = 100
	// DefaultMaxInFlightPerKey bounds the requests of one API key in
	// progress at once.
	DefaultMaxInFlightPerKey = 64
	// DefaultAuthFailureLimit is how many invalid credentials one address
	// may present per DefaultAuthFailureWindow before it is throttled.
	DefaultAuthFailureLimit = 20
	// DefaultAuthFailureWindow is the window of DefaultAuthFailureLimit.
	DefaultAuthFailureWindow = time.Minute
	// DefaultMaxAuthFailureAddrs bounds the addresses the failed-auth
	// throttle tracks.
	DefaultMaxAuthFailureAddrs = 10000
	// DefaultBodyReadTimeout bounds reading one HTTP request body (4 MiB
	// at the default limit: about 140 KB/s at least).
	DefaultBodyReadTimeout = 30 * time.Second
	// MinStreamTokenSecretBytes is the shortest StreamTokenSecret accepted.
	MinStreamTokenSecretBytes = 16
)

// Options configures a [Server]. Zero values take the defaults (RateLimit:
// no limit); a negative per-key limit, AuthFailureLimit or
// BodyReadTimeout turns it off. Without
// JetStream the event streams answer Unavailable; without a peer client the
// RPCs that need it answer Unavailable naming it.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the baagent_gateway_* collectors; nil registers
	// none.
	Registerer prometheus.Registerer

	// JetStream reads run events (natsx.StreamEvents, provisioned).
	JetStream jetstream.JetStream
	// Peers, by their gRPC contracts.
	Orchestrator baagentv1.OrchestratorServiceClient
	Skills       baagentv1.SkillsServiceClient
	ToolRunner   baagentv1.ToolRunnerServiceClient
	Tokens       baagentv1.TokensServiceClient
	// MCPAuth is the toolrunner's McpAuthService; nil answers the MCP
	// OAuth routes with 501.
	MCPAuth baagentv1.McpAuthServiceClient
	// Memory is the memory service; nil answers the memory API
	// Unavailable.
	Memory baagentv1.MemoryServiceClient

	// APIKeys maps API keys to tenants (config api-keys / api-keys-file).
	// Empty serves the single tenant "default" to loopback clients only.
	APIKeys map[string]string
	// StreamTokenSecret is the secret the browser stream tokens (?token=)
	// are signed with (config gateway-token-secret, from the environment);
	// every replica behind one address must share it. At least
	// MinStreamTokenSecretBytes. Empty derives the signing key from
	// APIKeys (a warning is logged: tokens then change whenever the keys
	// do), or with no keys from a random secret (one replica only).
	StreamTokenSecret string
	// TokenTTL is the lifetime of a stream token (default 10 min); a
	// token expiring later than TokenTTL (plus a minute of clock skew)
	// from now is refused, whoever signed it.
	TokenTTL time.Duration

	// AllowedOrigins are browser origins (scheme://host[:port]) other than
	// the gateway's own that may use it: their pages may open WebSockets
	// (which CORS does not protect) in every mode and, with no API keys,
	// their host names are accepted in the Host header and their
	// requests served (see origin.go). Empty: the gateway's own origin
	// only.
	AllowedOrigins []string

	// MaxStreamsPerKey bounds the event streams one API key holds open at
	// once, gRPC StreamRunEvents and StartRunStream, SSE and WebSocket together (the key's
	// stream tokens count as the key); one more is ResourceExhausted
	// (HTTP 429). 0: DefaultMaxStreamsPerKey; negative: no limit.
	MaxStreamsPerKey int
	// MaxInFlightPerKey bounds the unary calls and HTTP/JSON requests of
	// one API key in progress at once (a request holds its slot while its
	// body is read). 0: DefaultMaxInFlightPerKey; negative: no limit.
	MaxInFlightPerKey int
	// AuthFailureLimit is how many invalid API keys or stream tokens one
	// client address (an IPv4 address, an IPv6 /64) may present within
	// AuthFailureWindow; after that every request from it is answered
	// ResourceExhausted (HTTP 429) without its credential being looked
	// at until the window ends. 0: DefaultAuthFailureLimit; negative: no
	// throttling. Only with API keys configured.
	AuthFailureLimit int
	// AuthFailureWindow is the window of AuthFailureLimit (default 1 min).
	AuthFailureWindow time.Duration
	// MaxAuthFailureAddrs bounds the addresses tracked (default 10,000).
	MaxAuthFailureAddrs int
	// BodyReadTimeout bounds reading an HTTP request's body, from the end
	// of its header (which http.Server bounds to 10 s): a body still not
	// received is answered 408 and the connection closed, so slow bodies
	// cannot hold connections and handlers. Event streams carry no body
	// and are not affected. 0: DefaultBodyReadTimeout; negative: none.
	BodyReadTimeout time.Duration
	// MaxMsgBytes is the gRPC message limit of the server the gateway is
	// registered on (config max-msg-bytes; default 16 MiB): a ListRuns
	// page is trimmed to fit in it, with a next_page_token for the rest.
	MaxMsgBytes int

	// Models are the model names GET /v1/models lists and the chat
	// interfaces accept (a run's model names its agent configuration);
	// empty: any model name is passed to the orchestrator, which decides.
	Models []string

	// HTTPListener serves HTTP/JSON, SSE, WebSocket and the dashboard
	// (config gateway-http-listen); nil serves no HTTP (see Handler).
	HTTPListener net.Listener
	// ShutdownTimeout bounds draining HTTP at shutdown (default 10 s).
	ShutdownTimeout time.Duration

	// MaxTextBytes bounds GatewayServiceCountTokensRequest.text (default 16 MiB).
	MaxTextBytes int
	// MaxSkillBytes bounds an uploaded skill, GatewayServicePutSkillRequest
	// content and the body of PUT /v1/skills/{name} (default
	// DefaultMaxSkillBytes, 10 MiB; a JSON body may be a third larger, for
	// base64); a larger one is InvalidArgument naming content, or 413.
	MaxSkillBytes int64
	// MaxBodyBytes bounds an HTTP request body (default 4 MiB); a larger
	// one is answered 413.
	MaxBodyBytes int64
	// MaxHeaderBytes bounds an HTTP request header (default 64 KiB); a
	// larger one is answered 431.
	MaxHeaderBytes int
	// SendQueueBytes bounds a streaming client's unread live events
	// (default 1 MiB).
	SendQueueBytes int
	// WriteTimeout bounds one write to a streaming client (default 5 s).
	WriteTimeout time.Duration
	// Heartbeat is the SSE comment / WebSocket ping interval (default 15 s).
	Heartbeat time.Duration
	// FeedIdleTimeout is how long a run's consumer is kept after its last
	// viewer leaves (default 30 s).
	FeedIdleTimeout time.Duration
	// MaxFeeds bounds the runs watched at once (default 1024).
	MaxFeeds int

	// RateLimit is how many calls and stream opens per second each API key
	// may make; 0 means no limit (unlike the other fields, so that it maps
	// onto its config setting, whose default is DefaultRateLimit, 50). With
	// no API keys configured (loopback only) nothing is limited.
	RateLimit float64
	// RateBurst is how many an idle key may make at once (0: the larger of
	// DefaultRateBurst, 100, and RateLimit).
	RateBurst int
	// MaxRateBuckets bounds the limiter's per-key state (default 10,000).
	MaxRateBuckets int

	// TracerProvider traces the HTTP API (server spans, W3C trace context
	// from the caller) and, through the context, the calls to the peers;
	// nil or a no-op provider: nothing is traced.
	TracerProvider trace.TracerProvider
	// TraceLinkTemplate is a URL with {trace_id} that the dashboard makes
	// a run's trace id a link with (served by GET /v1/whoami); empty: no
	// link.
	TraceLinkTemplate string

	// MaxExportRuns bounds the runs of one conversation export (default
	// MaxExportRuns, 10,000); a conversation with more is
	// ResourceExhausted.
	MaxExportRuns int
	// AdminAPIKeys may call the admin API (budgets of any tenant); they
	// are not tenant keys, and a tenant key is refused there. Empty: the
	// admin API is disabled.
	AdminAPIKeys []string

	// noDirect makes every SSE and WebSocket event go through the client's own goroutine
	// (no direct writes by the run's fan-out): for tests and benchmarks
	// comparing the two.
	noDirect bool
}

// Server implements baagentv1.GatewayServiceServer and the HTTP edge.
type Server struct {
	baagentv1.UnimplementedGatewayServiceServer

	opts    Options
	log     *slog.Logger
	auth    *authenticator
	hub     *hub.Hub // nil without JetStream
	initErr error    // a construction failure, reported by Run and the RPCs
	handler http.Handler
	streams streamTracker // SSE streams, waited for by Run

	limiter     *rateLimiter // nil: no limit
	rateLimited *prometheus.CounterVec

	origins     *originPolicy
	streamSlots *keySlots     // event streams per key
	inFlight    *keySlots     // unary calls and JSON requests per key
	throttle    *authThrottle // nil: no failed-auth throttling
	edge        *edgeMetrics
	// skillMetrics count skill writes (skills_admin.go).
	skillMetrics *skillMetrics
	// exportM count exports (export.go).
	exportM *exportMetrics
	// memoryM count memory API calls (memory.go).
	memoryM *memoryMetrics
	// consoleM count the web console's responses (console.go).
	consoleM *consoleMetrics

	runOnce sync.Once

	admins map[[32]byte]bool // sha256 of the admin API keys (budgets.go)
}

var _ baagentv1.GatewayServiceServer = (*Server)(nil)

// New returns a Server configured by opts. A configuration problem (such as
// metrics already registered) is returned by Run and by every RPC.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxTextBytes <= 0 {
		opts.MaxTextBytes = DefaultMaxTextBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxSkillBytes <= 0 {
		opts.MaxSkillBytes = DefaultMaxSkillBytes
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	opts.MaxStreamsPerKey = orDefault(opts.MaxStreamsPerKey, DefaultMaxStreamsPerKey)
	opts.MaxInFlightPerKey = orDefault(opts.MaxInFlightPerKey, DefaultMaxInFlightPerKey)
	opts.AuthFailureLimit = orDefault(opts.AuthFailureLimit, DefaultAuthFailureLimit)
	opts.MaxAuthFailureAddrs = orDefault(opts.MaxAuthFailureAddrs, DefaultMaxAuthFailureAddrs)
	opts.BodyReadTimeout = orDefault(opts.BodyReadTimeout, DefaultBodyReadTimeout)
	if opts.AuthFailureWindow <= 0 {
		opts.AuthFailureWindow = DefaultAuthFailureWindow
	}
	if opts.MaxMsgBytes <= 0 {
		opts.MaxMsgBytes = DefaultMaxMsgBytes
	}
	if opts.MaxExportRuns <= 0 {
		opts.MaxExportRuns = MaxExportRuns
	}
	s := &Server{opts: opts, log: opts.Logger.With("service", ServiceName)}
	var err error
	s.auth, err = newAuthenticator(opts.APIKeys, opts.StreamTokenSecret, opts.TokenTTL)
	if err != nil {
		s.initErr = err
	} else if s.auth.derived {
		s.log.Warn("no stream token secret configured (gateway-token-secret): stream tokens are signed with a key derived from the API keys, so they stop working whenever the keys change, and replicas accept each other's tokens only with identical keys")
	}
	if s.origins, err = newOriginPolicy(opts.AllowedOrigins); err != nil {
		s.origins = &originPolicy{} // nothing allowed but the own origin
		if s.initErr == nil {
			s.initErr = err
		}
	}
	s.limiter = newRateLimiter(opts.RateLimit, opts.RateBurst, opts.MaxRateBuckets, time.Now)
	s.throttle = newAuthThrottle(opts.AuthFailureLimit, opts.AuthFailureWindow, opts.MaxAuthFailureAddrs, time.Now)
	if s.initErr == nil {
		s.rateLimited, err = newRateLimitedCounter(opts.Registerer)
		if err != nil {
			s.initErr = err
		}
	}
	if s.rateLimited == nil {
		s.rateLimited, _ = newRateLimitedCounter(nil)
	}
	if s.initErr == nil {
		if s.edge, err = newEdgeMetrics(opts.Registerer); err != nil {
			s.initErr = err
		}
	}
	if s.edge == nil {
		s.edge, _ = newEdgeMetrics(nil)
	}
	if s.initErr == nil {
		if s.skillMetrics, err = newSkillMetrics(opts.Registerer); err != nil {
			s.initErr = err
		}
	}
	if s.skillMetrics == nil {
		s.skillMetrics, _ = newSkillMetrics(nil)
	}
	if s.initErr == nil {
		if s.exportM, err = newExportMetrics(opts.Registerer); err != nil {
			s.initErr = err
		}
	}
	if s.exportM == nil {
		s.exportM, _ = newExportMetrics(nil)
	}
	if s.initErr == nil {
		if s.memoryM, err = newMemoryMetrics(opts.Registerer); err != nil {
			s.initErr = err
		}
	}
	if s.memoryM == nil {
		s.memoryM, _ = newMemoryMetrics(nil)
	}
	if s.initErr == nil {
		if s.consoleM, err = newConsoleMetrics(opts.Registerer); err != nil {
			s.initErr = err
		}
	}
	if s.consoleM == nil {
		s.consoleM, _ = newConsoleMetrics(nil)
	}
	s.streamSlots = newKeySlots(limitStreams, opts.MaxStreamsPerKey, s.edge.held.WithLabelValues(limitStreams))
	s.inFlight = newKeySlots(limitInFlight, opts.MaxInFlightPerKey, s.edge.held.WithLabelValues(limitInFlight))
	if opts.JetStream != nil && s.initErr == nil {
		s.hub, err = hub.New(hub.Options{
			JetStream:      opts.JetStream,
			Logger:         s.log,
			Registerer:     opts.Registerer,
			SendQueueBytes: opts.SendQueueBytes,
			MaxFeeds:       opts.MaxFeeds,
			IdleTimeout:    opts.FeedIdleTimeout,
			Framings:       hubFramings,
		})
		if err != nil {
			s.initErr = err
		}
	}
	if err := s.initAdmins(); err != nil && s.initErr == nil {
		s.initErr = err
	}
	s.handler = s.routes()
	return s
}

// Register registers the GatewayService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterGatewayServiceServer(gs, s)
}

// Handler is the HTTP edge (HTTP/JSON API, SSE, WebSocket, dashboard), for
// callers that serve HTTP themselves instead of passing HTTPListener. It
// applies the body read timeout itself; such a caller's http.Server should
// set what Run's does: ReadHeaderTimeout (10 s), MaxHeaderBytes, and no
// ReadTimeout or WriteTimeout (they would cut event streams).
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves HTTP on Options.HTTPListener (if set) and runs the event hub
// until ctx ends, then drains HTTP and stops the hub. It may be called once.
func (s *Server) Run(ctx context.Context) error {
	if s.initErr != nil {
		return fmt.Errorf("gateway: %w", s.initErr)
	}
	err := errors.New("gateway: Run called twice")
	s.runOnce.Do(func() { err = s.run(ctx) })
	return err
}

func (s *Server) run(ctx context.Context) error {
	var wg sync.WaitGroup
	if s.hub != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.hub.Run(ctx) }()
		defer s.hub.Close()
	}
	defer wg.Wait()
	if s.opts.HTTPListener == nil {
		<-ctx.Done()
		return nil
	}
	// No ReadTimeout or WriteTimeout: they would cut event streams. Bodies
	// are bounded per request instead (bodyDeadline), headers here.
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(s.opts.HTTPListener) }()
	s.log.Info("gateway HTTP serving", "addr", s.opts.HTTPListener.Addr().String(), "auth", s.auth.mode())
	select {
	case err := <-served:
		return fmt.Errorf("gateway HTTP on %s: %w", s.opts.HTTPListener.Addr(), err)
	case <-ctx.Done():
	}
	// Streams end when ctx (their base context) ends; Shutdown waits for
	// them and for in-flight JSON calls.
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-served //nolint:errcheck // Serve ends with ErrServerClosed after Shutdown
	s.streams.closeAndWait()
	return nil
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

// ready reports a construction failure as Unavailable.
func (s *Server) ready() error {
	if s.initErr != nil {
		return status.Errorf(codes.Unavailable, "gateway misconfigured: %v", s.initErr)
	}
	return nil
}
