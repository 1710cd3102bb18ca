package external

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/buildinfo"
	"github.com/baagent/baagent/services/toolrunner/mcpauth"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Defaults of the per-tenant sessions of an auth: oauth MCP server.
const (
	// DefaultOAuthSessions bounds the sessions of one server; beyond it the
	// least recently used tenant's session is closed.
	DefaultOAuthSessions = 256
	// DefaultOAuthIdle closes a tenant's session unused for that long.
	DefaultOAuthIdle = 10 * time.Minute
)

// CodeAuthRequired is the tool error code of a call to an auth: oauth
// server the tenant has not authorized (or whose token the server refused).
const CodeAuthRequired = "MCP_AUTH_REQUIRED"

// errNeedsAuth: the tenant holds no usable grant for the server.
var errNeedsAuth = errors.New("mcp oauth: authorization required")

// authRequired is the tool error telling the user how to authorize server.
func authRequired(server string) *tool.Error {
	return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, Code: CodeAuthRequired,
		Message: mcpauth.NeedsAuthError(server).Error(), Err: errNeedsAuth}
}

// oauthSource is an auth: oauth MCP server. It offers no tools to every
// tenant (Tools is empty): each tenant holding a grant gets its own session,
// whose requests carry that tenant's bearer token, and sees the tools that
// session lists (tool.TenantSource).
type oauthSource struct {
	cfg       MCPServerConfig
	name      string // "mcp:<server>"
	log       *slog.Logger
	sdkLog    *slog.Logger
	flow      *mcpauth.Flow // nil: MCP OAuth is off, no tenant is authorized
	keepAlive time.Duration
	tp        trace.TracerProvider
	metrics   *metrics
	pool      *sessionPool
}

func newOAuthSource(cfg MCPServerConfig, opts Options, m *metrics) *oauthSource {
	if cfg.Timeout == 0 {
		cfg.Timeout = Duration(DefaultMCPTimeout)
	}
	name := "mcp:" + cfg.Name
	m.mcpTransport.WithLabelValues(name, string(cfg.TransportKind())).Set(1)
	m.oauthSessions.WithLabelValues(name).Set(0)
	m.authRequired.WithLabelValues(name)
	return &oauthSource{
		cfg: cfg, name: name, log: opts.Logger.With("source", name), sdkLog: opts.SDKLogger,
		flow: opts.OAuth, keepAlive: opts.KeepAlive, tp: opts.TracerProvider, metrics: m,
		pool: newSessionPool(opts.OAuthSessions, opts.OAuthIdle, time.Now),
	}
}

// Name implements tool.Source.
func (o *oauthSource) Name() string { return o.name }

// Tools implements tool.Source: none without a tenant.
func (o *oauthSource) Tools() []tool.Tool { return nil }

// TenantTools implements tool.TenantSource: the tools of tenant's session,
// none when the tenant has not authorized the server or it cannot be
// reached.
func (o *oauthSource) TenantTools(ctx context.Context, tenant string) []tool.Tool {
	s, err := o.session(ctx, tenant)
	if err != nil {
		if !errors.Is(err, errNeedsAuth) && ctx.Err() == nil {
			o.log.WarnContext(ctx, "MCP server unavailable for a tenant; its tools are not listed", "tenant", tenant, "error", err)
		}
		return nil
	}
	return s.tools
}

// TenantTool implements tool.TenantSource. Every name under the server's
// prefix belongs to it: for a tenant without a grant such a name resolves
// to a tool that fails with CodeAuthRequired.
func (o *oauthSource) TenantTool(ctx context.Context, tenant, name string) (tool.Tool, bool) {
	if !strings.HasPrefix(name, MCPToolName(o.cfg.Name, "")) {
		return nil, false
	}
	s, err := o.session(ctx, tenant)
	switch {
	case err == nil:
		for _, t := range s.tools {
			if t.Spec().Name == name {
				return t, true
			}
		}
		return nil, false
	case errors.Is(err, errNeedsAuth):
		return &failingTool{spec: o.placeholder(name), err: authRequired(o.cfg.Name)}, true
	case ctx.Err() != nil:
		return &failingTool{spec: o.placeholder(name), err: contextError(ctx, ctx.Err())}, true
	default:
		return &failingTool{spec: o.placeholder(name), err: unavailable(o.name)}, true
	}
}

// placeholder is the spec of a tool the tenant cannot list now.
func (o *oauthSource) placeholder(name string) tool.Spec {
	return tool.Spec{Name: name, Source: o.name, Timeout: o.cfg.Timeout.Std()}
}

// authorized reports whether tenant holds a grant for the server.
func (o *oauthSource) authorized(ctx context.Context, tenant string) (bool, error) {
	if o.flow == nil {
		return false, nil
	}
	st, err := o.flow.Status(ctx, tenant, o.cfg.Name)
	if err != nil {
		return false, err
	}
	return st.Authorized, nil
}

// session returns tenant's live session, connecting it when there is none.
// It returns errNeedsAuth when the tenant holds no grant or the server
// refused its token (the grant is then dropped).
func (o *oauthSource) session(ctx context.Context, tenant string) (*tenantSession, error) {
	ok, err := o.authorized(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("reading the tenant's authorization: %w", err)
	}
	if !ok {
		o.closeSessions(o.pool.removeTenant(tenant))
		return nil, errNeedsAuth
	}
	for retried := false; ; retried = true {
		s, created, evicted := o.pool.get(tenant)
		o.closeSessions(evicted)
		if s == nil {
			return nil, errors.New("the toolrunner is stopping")
		}
		o.metrics.oauthSessions.WithLabelValues(o.name).Set(float64(o.pool.len()))
		if created {
			o.connect(ctx, s)
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		switch {
		case s.refused.Load():
			if o.pool.remove(s) {
				s.close()
				o.metrics.oauthSessions.WithLabelValues(o.name).Set(float64(o.pool.len()))
			}
			o.refused(ctx, s)
			return nil, errNeedsAuth
		case s.err == nil:
			return s, nil
		case created || retried || o.pool.now().Sub(s.doneAt) < connectRetryDelay:
			// The failure stays in the pool for connectRetryDelay, so
			// that an unreachable server does not make every listing
			// of the tenant wait for a connect.
			return nil, s.err
		}
		o.pool.remove(s) // a failure old enough: connect again
	}
}

// connectRetryDelay is how long a failed connect of a tenant's session is
// remembered before the next listing or call tries again.
const connectRetryDelay = 5 * time.Second

// refused drops tenant's grant after the server refused its token: the
// tenant must authorize again.
// Only the grant holding the refused token is dropped; without a 401 (no
// token could be had) the flow has already dropped or never had one.
func (o *oauthSource) refused(ctx context.Context, s *tenantSession) {
	o.metrics.authRequired.WithLabelValues(o.name).Inc()
	tok := s.refusedToken.Load()
	if o.flow == nil || tok == nil {
		return
	}
	dropped, err := o.flow.Store.DropRefusedGrant(context.WithoutCancel(ctx), s.tenant, o.cfg.Name, *tok)
	if err != nil {
		o.log.WarnContext(ctx, "dropping a refused MCP OAuth grant", "tenant", s.tenant, "error", err)
		return
	}
	if dropped {
		o.log.InfoContext(ctx, "MCP server refused the tenant's token; the tenant must authorize again", "tenant", s.tenant)
	}
}

// connect opens s's session and lists its tools, then marks s ready. The
// connect is not bound to the caller's cancellation (other callers of the
// same tenant wait for it), only to the server's timeout.
func (o *oauthSource) connect(ctx context.Context, s *tenantSession) {
	defer func() {
		s.doneAt = o.pool.now()
		close(s.ready)
	}()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.Timeout.Std())
	defer cancel()
	origin, err := originOf(o.cfg.HTTP.URL)
	if err != nil {
		s.err = err
		return
	}
	base := headerTransport{headers: o.cfg.HTTP.Headers, origin: origin, base: http.DefaultTransport}
	rt := &watchTransport{s: s, origin: origin, base: base, authed: o.flow.Transport(s.tenant, o.cfg.Name, base)}
	client := &http.Client{Transport: traced(o.tp, rt)}
	mc := mcp.NewClient(&mcp.Implementation{Name: "baagent-toolrunner", Version: buildinfo.Read().Version}, &mcp.ClientOptions{
		Logger: o.sdkLog, Capabilities: &mcp.ClientCapabilities{}, KeepAlive: o.keepAlive,
	})
	cs, err := mc.Connect(cctx, networkTransport(o.cfg.HTTP.URL, o.cfg.TransportKind(), client), nil)
	if err != nil {
		o.metrics.listFailures.WithLabelValues(o.name).Inc()
		s.err = fmt.Errorf("connect: %w", err)
		return
	}
	if !s.setSession(cs) { // evicted while connecting
		_ = cs.Close()
		s.err = errors.New("session closed while connecting")
		return
	}
	var listed []*mcp.Tool
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			o.metrics.listFailures.WithLabelValues(o.name).Inc()
			s.err = fmt.Errorf("tools/list: %w", err)
			return
		}
		if len(listed) >= maxListedTools {
			s.err = fmt.Errorf("tools/list: more than %d tools", maxListedTools)
			return
		}
		listed = append(listed, t)
	}
	version := ""
	if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		version = ir.ServerInfo.Version
	}
	specs, refused := mcpSpecs(o.cfg, o.name, version, listed)
	for _, r := range refused {
		o.log.Debug("external tool refused", "tool", r.name, "reason", r.reason)
	}
	for _, sp := range specs {
		if !validName(sp.spec.Name) {
			continue
		}
		s.tools = append(s.tools, &oauthTool{src: o, tenant: s.tenant, remote: sp.remote, spec: sp.spec})
	}
}

// closeSessions closes sessions removed from the pool.
func (o *oauthSource) closeSessions(ss []*tenantSession) {
	for _, s := range ss {
		s.close()
	}
	if len(ss) > 0 {
		o.metrics.oauthSessions.WithLabelValues(o.name).Set(float64(o.pool.len()))
	}
}

// run closes idle sessions until ctx ends, then closes every session.
func (o *oauthSource) run(ctx context.Context) {
	every := max(o.pool.idle/4, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.closeSessions(o.pool.drain())
			return
		case <-t.C:
			o.closeSessions(o.pool.expire())
		}
	}
}

// live reports whether tenant has a connected session now.
func (o *oauthSource) live(tenant string) bool { return o.pool.live(tenant) }

// oauthTool is one tool of an auth: oauth server for one tenant. Each call
// finds the tenant's live session (reconnecting after eviction) and checks
// the grant.
type oauthTool struct {
	src    *oauthSource
	tenant string
	remote string
	spec   tool.Spec
}

// Spec implements tool.Tool.
func (t *oauthTool) Spec() tool.Spec { return t.spec }

// Execute implements tool.Tool.
func (t *oauthTool) Execute(ctx context.Context, call tool.Call) (tool.Result, error) {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.spec.Timeout)
		defer cancel()
	}
	s, err := t.src.session(ctx, t.tenant)
	switch {
	case errors.Is(err, errNeedsAuth):
		return tool.Result{}, authRequired(t.src.cfg.Name)
	case err != nil && ctx.Err() != nil:
		return tool.Result{}, contextError(ctx, err)
	case err != nil:
		return tool.Result{}, unavailable(t.src.name)
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	cs := s.current()
	if cs == nil { // closed (evicted, idle) since it was looked up
		return tool.Result{}, unavailable(t.src.name)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: args})
	if s.refused.Load() {
		if t.src.pool.remove(s) {
			s.close()
		}
		t.src.refused(ctx, s)
		return tool.Result{}, authRequired(t.src.cfg.Name)
	}
	if err != nil {
		return tool.Result{}, mcpError(ctx, t.src.cfg.Name, t.spec.ReadOnly, err)
	}
	return callResult(res)
}

// failingTool stands for a tool the tenant cannot use now; calls fail with
// err.
type failingTool struct {
	spec tool.Spec
	err  *tool.Error
}

func (t *failingTool) Spec() tool.Spec { return t.spec }
func (t *failingTool) Execute(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{}, t.err
}

// watchTransport sends the tenant's bearer token to the server's origin (and
// only there) and notes when the server refuses it (401) or no token could
// be had.
type watchTransport struct {
	s      *tenantSession
	origin string
	base   http.RoundTripper // other origins
	authed http.RoundTripper // the server's origin, with the bearer token
}

func (w *watchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if originOfURL(r.URL) != w.origin {
		return w.base.RoundTrip(r)
	}
	resp, err := w.authed.RoundTrip(r)
	switch {
	case errors.Is(err, mcpauth.ErrNotAuthorized):
		w.s.refused.Store(true)
	case err == nil && resp.StatusCode == http.StatusUnauthorized:
		// resp.Request is the request as sent, with the token.
		if resp.Request != nil {
			if tok, ok := strings.CutPrefix(resp.Request.Header.Get("Authorization"), "Bearer "); ok {
				w.s.refusedToken.Store(&tok)
			}
		}
		w.s.refused.Store(true)
	}
	return resp, err
}

// tenantSession is one tenant's session with an auth: oauth server.
type tenantSession struct {
	tenant  string
	ready   chan struct{} // closed once connect has finished
	err     error         // set before ready closes
	doneAt  time.Time     // set before ready closes
	tools   []tool.Tool   // set before ready closes
	refused atomic.Bool   // the server refused the token, or there was none
	// refusedToken is the access token the server answered 401 to.
	refusedToken atomic.Pointer[string]

	mu      sync.Mutex
	session *mcp.ClientSession
	closed  bool

	// guarded by the pool's mutex
	elem     *list.Element
	lastUsed time.Time
}

func newTenantSession(tenant string) *tenantSession {
	return &tenantSession{tenant: tenant, ready: make(chan struct{})}
}

// setSession stores cs unless the session was closed meanwhile.
func (s *tenantSession) setSession(cs *mcp.ClientSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.session = cs
	return true
}

func (s *tenantSession) current() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

// close closes the session; one still connecting closes once connected. It
// never blocks on the network.
func (s *tenantSession) close() {
	s.mu.Lock()
	cs := s.session
	s.closed, s.session = true, nil
	s.mu.Unlock()
	if cs != nil {
		_ = cs.Close()
	}
}

func (s *tenantSession) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// sessionPool holds at most max sessions, one per tenant, most recently
// used first. Removed sessions are returned to the caller to close outside
// the lock.
type sessionPool struct {
	max  int
	idle time.Duration
	now  func() time.Time

	mu       sync.Mutex
	byTenant map[string]*tenantSession // bounded by max
	stopped  bool                      // drained: no new sessions
	order    *list.List                // of *tenantSession, front: most recently used
}

func newSessionPool(maxSessions int, idle time.Duration, now func() time.Time) *sessionPool {
	if maxSessions <= 0 {
		maxSessions = DefaultOAuthSessions
	}
	if idle <= 0 {
		idle = DefaultOAuthIdle
	}
	return &sessionPool{max: maxSessions, idle: idle, now: now, byTenant: map[string]*tenantSession{}, order: list.New()}
}

// get returns tenant's session, marking it used, or adds a new one
// (created) and evicts the least recently used beyond max.
func (p *sessionPool) get(tenant string) (s *tenantSession, created bool, evicted []*tenantSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil, false, nil
	}
	now := p.now()
	if s, ok := p.byTenant[tenant]; ok {
		s.lastUsed = now
		p.order.MoveToFront(s.elem)
		return s, false, nil
	}
	s = newTenantSession(tenant)
	s.lastUsed = now
	s.elem = p.order.PushFront(s)
	p.byTenant[tenant] = s
	for p.order.Len() > p.max {
		old := p.order.Back().Value.(*tenantSession)
		p.unlink(old)
		evicted = append(evicted, old)
	}
	return s, true, evicted
}

func (p *sessionPool) unlink(s *tenantSession) {
	p.order.Remove(s.elem)
	delete(p.byTenant, s.tenant)
}

// remove takes s out of the pool if it is still there.
func (p *sessionPool) remove(s *tenantSession) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTenant[s.tenant] != s {
		return false
	}
	p.unlink(s)
	return true
}

// removeTenant takes tenant's session out, if any.
func (p *sessionPool) removeTenant(tenant string) []*tenantSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byTenant[tenant]
	if !ok {
		return nil
	}
	p.unlink(s)
	return []*tenantSession{s}
}

// expire takes out the sessions unused for idle.
func (p *sessionPool) expire() []*tenantSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := p.now().Add(-p.idle)
	var out []*tenantSession
	for e := p.order.Back(); e != nil; {
		s := e.Value.(*tenantSession)
		if s.lastUsed.After(cutoff) {
			break
		}
		e = e.Prev()
		p.unlink(s)
		out = append(out, s)
	}
	return out
}

// drain takes out every session.
func (p *sessionPool) drain() []*tenantSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*tenantSession, 0, len(p.byTenant))
	for _, s := range p.byTenant {
		out = append(out, s)
	}
	p.byTenant = map[string]*tenantSession{}
	p.order.Init()
	p.stopped = true
	return out
}

func (p *sessionPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byTenant)
}

// live reports whether tenant's session is connected.
func (p *sessionPool) live(tenant string) bool {
	p.mu.Lock()
	s, ok := p.byTenant[tenant]
	p.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-s.ready:
		return s.err == nil && !s.refused.Load() && s.current() != nil
	default:
		return false
	}
}
