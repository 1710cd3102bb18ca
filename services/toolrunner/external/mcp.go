package external

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baagent/baagent/internal/buildinfo"
	"github.com/baagent/baagent/internal/mcpws"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/internal/tracing"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of an MCP server entry.
const (
	DefaultMCPTimeout = 30 * time.Second
	// DefaultKeepAlive is the interval of MCP pings that detect a server
	// that hangs or an HTTP endpoint that went away.
	DefaultKeepAlive = 30 * time.Second
	// DefaultStopGrace is how long a stdio server has to exit after its
	// stdin is closed (and again after SIGTERM) before it is killed.
	DefaultStopGrace = 2 * time.Second
	// healthyUptime is how long a session must have lived for the restart
	// backoff to start over: a server that crashes right after starting
	// keeps backing off.
	healthyUptime = time.Minute
)

// inheritedEnv are the variables a stdio server gets from the toolrunner by
// default: enough to find executables and a home directory, nothing secret.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// mcpSource is a tool.Source backed by one MCP server. Its run loop starts
// (or connects to) the server, lists its tools, serves calls until the
// session ends, and restarts it with backoff.
type mcpSource struct {
	*sourceState
	cfg       MCPServerConfig
	backoff   retry.Backoff
	keepAlive time.Duration
	stopGrace time.Duration
	logger    *slog.Logger // passed to the SDK; nil keeps it quiet
	tp        trace.TracerProvider

	mu      sync.RWMutex
	session *mcp.ClientSession // nil while down
	version string             // the server's version, part of each tool's Spec.Version
	pid     int                // the stdio child's process id while it runs

	listChanged chan struct{} // capacity 1: a pending tools/list_changed
}

func newMCPSource(cfg MCPServerConfig, opts Options, m *metrics, names *nameRegistry) *mcpSource {
	if cfg.Timeout == 0 {
		cfg.Timeout = Duration(DefaultMCPTimeout)
	}
	m.mcpTransport.WithLabelValues("mcp:"+cfg.Name, string(cfg.TransportKind())).Set(1)
	return &mcpSource{
		sourceState: newSourceState("mcp:"+cfg.Name, opts.Logger, m, names),
		cfg:         cfg,
		backoff:     reconnectBackoff(opts.Backoff),
		keepAlive:   opts.KeepAlive,
		stopGrace:   opts.StopGrace,
		tp:          opts.TracerProvider,
		listChanged: make(chan struct{}, 1),
	}
}

// run keeps the server running until ctx ends.
func (s *mcpSource) run(ctx context.Context) {
	defer s.names.release(s.name)
	attempt := 0
	for {
		started := time.Now()
		err := s.serve(ctx)
		s.setDown(err)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) >= healthyUptime {
			attempt = 0
		}
		delay := s.backoff.Jittered(attempt)
		attempt++
		s.log.Warn("MCP server stopped; restarting", "error", err, "in", delay.Round(time.Millisecond), "attempt", attempt)
		if !retry.Sleep(ctx, delay) {
			return
		}
	}
}

// serve runs one session: connect, list tools, then wait until the session
// ends (server exit, connection loss, failed keepalive) or ctx ends. The
// session is always closed and a child process always killed on return.
func (s *mcpSource) serve(ctx context.Context) error {
	transport, cmd, err := s.transport()
	if err != nil {
		s.metrics.listFailures.WithLabelValues(s.name).Inc()
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "baagent-toolrunner", Version: buildinfo.Read().Version}, &mcp.ClientOptions{
		Logger: s.logger,
		// No roots, sampling or elicitation: the toolrunner only calls tools.
		Capabilities: &mcp.ClientCapabilities{},
		KeepAlive:    s.keepAlive,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.listChanged <- struct{}{}:
			default:
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
	session, err := client.Connect(cctx, transport, nil)
	cancel()
	if err != nil {
		killGroup(cmd)
		s.metrics.listFailures.WithLabelValues(s.name).Inc()
		return fmt.Errorf("connect: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- session.Wait() }() // returns once the session is closed below
	defer func() {
		s.setSession(nil, "", 0)
		if err := session.Close(); err != nil {
			s.log.Debug("closing MCP session", "error", err)
		}
		killGroup(cmd)
		<-ended //nolint:errcheck // a killed server's exit status says nothing new
	}()

	version := ""
	if ir := session.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		version = ir.ServerInfo.Version
	}
	pid := 0
	if cmd != nil && cmd.Process != nil {
		pid = cmd.Process.Pid
	}
	s.setSession(session, version, pid)
	if err := s.list(ctx, session); err != nil {
		s.metrics.listFailures.WithLabelValues(s.name).Inc()
		return err
	}
	for {
		select {
		case err := <-ended:
			ended <- err // for the deferred wait
			if err == nil {
				err = errors.New("the server closed the session")
			}
			return fmt.Errorf("session ended: %w", err)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.listChanged:
			if err := s.list(ctx, session); err != nil {
				s.metrics.listFailures.WithLabelValues(s.name).Inc()
				return err
			}
		}
	}
}

// list fetches every page of the server's tools and publishes them.
func (s *mcpSource) list(ctx context.Context, session *mcp.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
	defer cancel()
	var listed []*mcp.Tool
	for t, err := range session.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if len(listed) >= maxListedTools {
			return fmt.Errorf("tools/list: more than %d tools", maxListedTools)
		}
		listed = append(listed, t)
	}
	tools, invalid := mcpTools(s, listed)
	s.setTools(tools, invalid)
	return nil
}

func (s *mcpSource) setSession(cs *mcp.ClientSession, version string, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.version, s.pid = cs, version, pid
}

// childPID is the stdio child's process id while it runs, else 0.
func (s *mcpSource) childPID() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pid
}

// current is the live session, or nil while the server is down.
func (s *mcpSource) current() *mcp.ClientSession {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.session
}

// transport builds the transport of one session; for stdio it also returns
// the command, whose process group is killed when the session ends.
func (s *mcpSource) transport() (mcp.Transport, *exec.Cmd, error) {
	kind := s.cfg.TransportKind()
	if kind == TransportStdio {
		c := s.cfg.Stdio
		cmd := exec.Command(c.Command, c.Args...)
		cmd.Dir = c.Dir
		cmd.Env = childEnv(c, os.LookupEnv, os.Environ)
		cmd.Stderr = newLineLogger(s.log, "MCP server stderr")
		isolate(cmd)
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: s.stopGrace}, cmd, nil
	}
	c := s.cfg.HTTP
	origin, err := originOf(c.URL)
	if err != nil {
		return nil, nil, err
	}
	client := &http.Client{Transport: s.traced(headerTransport{headers: c.Headers, origin: origin, base: http.DefaultTransport})}
	return networkTransport(c.URL, kind, client), nil, nil
}

// networkTransport is the MCP transport of kind to url over client.
func networkTransport(url string, kind Transport, client *http.Client) mcp.Transport {
	switch kind {
	case TransportSSE:
		return connectOnly{&mcp.SSEClientTransport{Endpoint: url, HTTPClient: client, MaxEventSize: maxMCPMessageBytes}}
	case TransportWebSocket:
		return &mcpws.ClientTransport{URL: url, HTTPClient: client, MaxMessageBytes: maxMCPMessageBytes}
	default:
		return &mcp.StreamableClientTransport{
			Endpoint:   url,
			HTTPClient: client,
			// Few reconnects of the event stream: when the server is gone
			// the session should end, so that the run loop restarts it
			// with its own backoff and the tools are withdrawn meanwhile.
			MaxRetries: 2,
		}
	}
}

// maxMCPMessageBytes bounds one message from a network MCP server (an SSE
// event or a WebSocket message), as the SDK bounds a stdio line.
const maxMCPMessageBytes = mcp.DefaultMaxLineLength

// connectOnly makes the context given to Connect bound the connect only. The
// SDK's SSE client ties its event stream (a hanging GET) to that context, so
// the connect timeout would otherwise end every session a moment after it
// started. A connect abandoned early is still cancelled; the stream then
// ends when the connection is closed.
type connectOnly struct{ inner mcp.Transport }

func (t connectOnly) Connect(ctx context.Context) (mcp.Connection, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	conn, err := t.inner.Connect(life)
	if !stop() { // ctx ended while connecting
		cancel()
		if err == nil {
			_ = conn.Close()
			err = context.Cause(ctx)
		}
		return nil, err
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &cancelOnClose{Connection: conn, cancel: cancel}, nil
}

// cancelOnClose ends the connection's lifetime context when it is closed.
type cancelOnClose struct {
	mcp.Connection
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}

// childEnv is a stdio server's environment: the safe subset (or all, with
// inherit_env) of the toolrunner's, then the entry's env.
func childEnv(c *StdioConfig, lookup func(string) (string, bool), environ func() []string) []string {
	var env []string
	if c.InheritEnv {
		env = environ()
	} else {
		for _, k := range inheritedEnv {
			if v, ok := lookup(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+c.Env[k])
	}
	return env
}

// traced wraps rt in an HTTP client span per request (with the trace
// context propagated) when tracing is on.
func (s *mcpSource) traced(rt http.RoundTripper) http.RoundTripper { return traced(s.tp, rt) }

func traced(tp trace.TracerProvider, rt http.RoundTripper) http.RoundTripper {
	if !tracing.Enabled(tp) {
		return rt
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
}

// headerTransport adds the configured headers to every request to origin,
// and to no other: not to where a redirect leads, nor to a message endpoint
// an SSE server announces on another host.
type headerTransport struct {
	headers map[string]string
	origin  string // as originOf returns it
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) == 0 || originOfURL(r.URL) != h.origin {
		return h.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// originOf is the origin of raw (`https://host:443`): scheme, lower-case
// host and explicit port; ws and wss count as http and https, since a
// WebSocket handshake is an HTTP request to the same server.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url: %w", err)
	}
	return originOfURL(u), nil
}

func originOfURL(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "ws":
		scheme = "http"
	case "wss":
		scheme = "https"
	}
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
