package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"
)

// Defaults of a Flow.
const (
	DefaultStateTTL = 10 * time.Minute
	// DefaultRefreshSkew is how long before its expiry an access token is
	// refreshed, so a token is never sent in its last seconds.
	DefaultRefreshSkew = time.Minute
	// DefaultHTTPTimeout bounds each request to an authorization server.
	DefaultHTTPTimeout = 15 * time.Second
)

// Server is what the flow needs of one `mcp_servers:` entry with
// `auth: oauth`.
type Server struct {
	// Name is the entry's name.
	Name string
	// URL is the MCP endpoint; it is the OAuth resource (RFC 8707).
	URL string
	// ClientID and ClientSecret are a pre-registered client; with no
	// ClientID one is registered dynamically (RFC 7591).
	ClientID     string
	ClientSecret string
	// Scopes are requested; empty uses the scopes the protected-resource
	// metadata advertises.
	Scopes []string
}

// Metadata is what discovery found for an MCP server.
type Metadata struct {
	Resource string
	Scopes   []string
	AS       *oauthex.AuthServerMeta
}

// Flow runs authorizations and hands out tokens.
type Flow struct {
	// Store keeps grants and pending authorizations.
	Store *Store
	// RedirectURL is the gateway's callback, `https://host/v1/mcp/oauth/callback`.
	RedirectURL string
	// ClientName is sent when registering a client ("BA-Agent" if empty).
	ClientName string
	// HTTPClient talks to authorization servers; nil uses a client with
	// DefaultHTTPTimeout.
	HTTPClient *http.Client
	// StateTTL bounds the wait for the callback (DefaultStateTTL if zero; at
	// most the state bucket's TTL).
	StateTTL time.Duration
	// RefreshSkew (DefaultRefreshSkew if zero).
	RefreshSkew time.Duration
	// Logger (slog.Default if nil) and Metrics (none if nil).
	Logger  *slog.Logger
	Metrics *Metrics
	// Now is the clock (time.Now if nil).
	Now func() time.Time

	refresh singleflight.Group // one refresh per tenant and server at a time
}

func (f *Flow) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Flow) client() *http.Client {
	if f.HTTPClient != nil {
		return f.HTTPClient
	}
	return &http.Client{Timeout: DefaultHTTPTimeout}
}

func (f *Flow) logger() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}

// oauthCtx makes golang.org/x/oauth2 use the flow's HTTP client.
func (f *Flow) oauthCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, f.client())
}

// ProtectedResourceMetadataURLs returns the RFC 9728 metadata URLs to try
// for an MCP endpoint: the well-known path inserted before the endpoint's
// path, then at the root.
func ProtectedResourceMetadataURLs(resource string) ([]string, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("server url %q: want an absolute http(s) URL", resource)
	}
	base := url.URL{Scheme: u.Scheme, Host: u.Host}
	var urls []string
	if p := strings.Trim(u.Path, "/"); p != "" {
		base.Path = "/.well-known/oauth-protected-resource/" + p
		urls = append(urls, base.String())
	}
	base.Path = "/.well-known/oauth-protected-resource"
	return append(urls, base.String()), nil
}

// Discover finds the authorization server of the MCP server at resource:
// the protected-resource metadata names it, and its RFC 8414 metadata gives
// the endpoints. The authorization server must support PKCE with S256.
func (f *Flow) Discover(ctx context.Context, resource string) (*Metadata, error) {
	urls, err := ProtectedResourceMetadataURLs(resource)
	if err != nil {
		return nil, err
	}
	var prm *oauthex.ProtectedResourceMetadata
	var errs []error
	for _, u := range urls {
		prm, err = oauthex.GetProtectedResourceMetadata(ctx, u, resource, f.client())
		if err == nil {
			break
		}
		errs = append(errs, err)
	}
	if prm == nil {
		return nil, fmt.Errorf("protected resource metadata of %s: %w", resource, errors.Join(errs...))
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("protected resource metadata of %s names no authorization server", resource)
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, f.client())
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %w", issuer, err)
	}
	if asm == nil {
		return nil, fmt.Errorf("authorization server %s publishes no metadata", issuer)
	}
	if asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" {
		return nil, fmt.Errorf("authorization server %s: metadata lacks authorization or token endpoint", issuer)
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("authorization server %s does not support PKCE S256", issuer)
	}
	return &Metadata{Resource: resource, Scopes: prm.ScopesSupported, AS: asm}, nil
}

// client returns the client to use at asm for server: the configured one,
// or one registered earlier, or a new registration.
func (f *Flow) clientFor(ctx context.Context, srv Server, asm *oauthex.AuthServerMeta) (*registration, error) {
	if srv.ClientID != "" {
		style := oauth2.AuthStyleInHeader
		if srv.ClientSecret == "" {
			style = oauth2.AuthStyleInParams
		}
		return &registration{Issuer: asm.Issuer, ClientID: srv.ClientID, ClientSecret: srv.ClientSecret, AuthStyle: int(style)}, nil
	}
	reg, err := f.Store.registration(ctx, srv.Name)
	switch {
	case err == nil && reg.Issuer == asm.Issuer && reg.RedirectURL == f.RedirectURL:
		return reg, nil
	case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, err
	}
	if asm.RegistrationEndpoint == "" {
		return nil, fmt.Errorf("authorization server %s offers no dynamic client registration; set client_id for %s", asm.Issuer, srv.Name)
	}
	method := "none"
	if slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_basic") {
		method = "client_secret_basic"
	}
	name := f.ClientName
	if name == "" {
		name = "BA-Agent"
	}
	resp, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{f.RedirectURL},
		TokenEndpointAuthMethod: method,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              name,
		ApplicationType:         "web",
	}, f.client())
	if err != nil {
		return nil, fmt.Errorf("register client at %s: %w", asm.Issuer, err)
	}
	style := oauth2.AuthStyleInHeader
	if resp.ClientSecret == "" {
		style = oauth2.AuthStyleInParams
	}
	reg = &registration{Issuer: asm.Issuer, RedirectURL: f.RedirectURL, ClientID: resp.ClientID, ClientSecret: resp.ClientSecret, AuthStyle: int(style)}
	if err := f.Store.putRegistration(ctx, srv.Name, reg); err != nil {
		return nil, err
	}
	f.Metrics.registered()
	return reg, nil
}

// Started is the result of Start.
type Started struct {
	// AuthorizationURL is where the user consents.
	AuthorizationURL string
	// State identifies the authorization at the callback.
	State string
	// Expires is when the state stops being accepted.
	Expires time.Time
}

// Start begins an authorization of tenant for srv and returns the URL the
// user opens.
func (f *Flow) Start(ctx context.Context, tenant string, srv Server) (*Started, error) {
	if f.RedirectURL == "" {
		return nil, errors.New("mcp oauth: no redirect URL configured")
	}
	md, err := f.Discover(ctx, srv.URL)
	if err != nil {
		f.Metrics.started("discovery_failed")
		return nil, err
	}
	reg, err := f.clientFor(ctx, srv, md.AS)
	if err != nil {
		f.Metrics.started("registration_failed")
		return nil, err
	}
	scopes := srv.Scopes
	if len(scopes) == 0 {
		scopes = md.Scopes
	}
	state, err := newState()
	if err != nil {
		return nil, err
	}
	ttl := f.StateTTL
	if ttl <= 0 {
		ttl = DefaultStateTTL
	}
	p := &pending{
		Tenant: tenant, Server: srv.Name, Verifier: oauth2.GenerateVerifier(),
		ClientID: reg.ClientID, ClientSecret: reg.ClientSecret, AuthStyle: reg.AuthStyle,
		Issuer: md.AS.Issuer, AuthURL: md.AS.AuthorizationEndpoint, TokenURL: md.AS.TokenEndpoint,
		RevocationURL: md.AS.RevocationEndpoint, Resource: md.Resource, RedirectURL: f.RedirectURL,
		Scopes: scopes, Expires: f.now().Add(ttl),
	}
	if err := f.Store.putPending(ctx, state, p); err != nil {
		return nil, err
	}
	authURL := p.config().AuthCodeURL(state, oauth2.S256ChallengeOption(p.Verifier),
		oauth2.SetAuthURLParam("resource", p.Resource))
	f.Metrics.started("ok")
	f.logger().InfoContext(ctx, "mcp oauth authorization started", "tenant", tenant, "server", srv.Name, "issuer", p.Issuer)
	return &Started{AuthorizationURL: authURL, State: state, Expires: p.Expires}, nil
}

func (p *pending) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		Endpoint:    oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, AuthStyle: oauth2.AuthStyle(p.AuthStyle)},
		RedirectURL: p.RedirectURL, Scopes: p.Scopes,
	}
}

// Completed names whose authorization the callback completed.
type Completed struct {
	Tenant, Server string
	Expiry         time.Time
}

// Complete exchanges the callback's code for tokens and stores them. The
// state is consumed whatever the outcome; ErrBadState means it was
// malformed, unknown, used or expired.
func (f *Flow) Complete(ctx context.Context, state, code string) (*Completed, error) {
	if _, err := ParseState(state); err != nil {
		f.Metrics.completed("bad_state")
		return nil, err
	}
	p, err := f.Store.takePending(ctx, state)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		f.Metrics.completed("bad_state")
		return nil, ErrBadState
	}
	if err != nil {
		return nil, err
	}
	if !f.now().Before(p.Expires) {
		f.Metrics.completed("bad_state")
		return nil, ErrBadState
	}
	if code == "" {
		f.Metrics.completed("exchange_failed")
		return nil, errors.New("authorization code is empty")
	}
	tok, err := p.config().Exchange(f.oauthCtx(ctx), code, oauth2.VerifierOption(p.Verifier),
		oauth2.SetAuthURLParam("resource", p.Resource))
	if err != nil {
		f.Metrics.completed("exchange_failed")
		return nil, fmt.Errorf("exchange code at %s: %w", p.Issuer, err)
	}
	g := &Grant{
		ClientID: p.ClientID, ClientSecret: p.ClientSecret, AuthStyle: p.AuthStyle, Issuer: p.Issuer,
		TokenURL: p.TokenURL, RevocationURL: p.RevocationURL, Resource: p.Resource, Scopes: p.Scopes,
		AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken,
		Expiry: f.expiry(tok), UpdatedAt: f.now(),
	}
	if err := f.Store.PutGrant(ctx, p.Tenant, p.Server, g); err != nil {
		return nil, err
	}
	f.Metrics.completed("ok")
	f.logger().InfoContext(ctx, "mcp oauth authorization completed", "tenant", p.Tenant, "server", p.Server)
	return &Completed{Tenant: p.Tenant, Server: p.Server, Expiry: g.Expiry}, nil
}

// expiry is when tok expires by the flow's clock (the oauth2 package
// computes tok.Expiry from the wall clock).
func (f *Flow) expiry(tok *oauth2.Token) time.Time {
	if tok.ExpiresIn > 0 {
		return f.now().Add(time.Duration(tok.ExpiresIn) * time.Second)
	}
	return tok.Expiry
}

// Abort consumes state after the authorization server redirected with an
// error (the user denied consent), so the state cannot be used later.
func (f *Flow) Abort(ctx context.Context, state string) (*Completed, error) {
	if _, err := ParseState(state); err != nil {
		f.Metrics.completed("bad_state")
		return nil, err
	}
	p, err := f.Store.takePending(ctx, state)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		f.Metrics.completed("bad_state")
		return nil, ErrBadState
	}
	if err != nil {
		return nil, err
	}
	f.Metrics.completed("denied")
	return &Completed{Tenant: p.Tenant, Server: p.Server}, nil
}

// Status is what GetAuthorization reports.
type Status struct {
	Authorized  bool
	Expiry      time.Time
	Refreshable bool
	Scopes      []string
	UpdatedAt   time.Time
}

// Status reports whether tenant holds a grant for server.
func (f *Flow) Status(ctx context.Context, tenant, server string) (*Status, error) {
	g, _, err := f.Store.Grant(ctx, tenant, server)
	if errors.Is(err, ErrNotAuthorized) {
		return &Status{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Status{Authorized: true, Expiry: g.Expiry, Refreshable: g.RefreshToken != "", Scopes: g.Scopes, UpdatedAt: g.UpdatedAt}, nil
}

// Token returns a valid access token of tenant for server, refreshing it
// when it expires within RefreshSkew. It returns ErrNotAuthorized when the
// tenant has no grant, or when the grant expired and cannot be refreshed.
func (f *Flow) Token(ctx context.Context, tenant, server string) (*oauth2.Token, error) {
	g, rev, err := f.Store.Grant(ctx, tenant, server)
	if err != nil {
		return nil, err
	}
	if f.fresh(g) {
		return g.token(), nil
	}
	if g.RefreshToken == "" {
		return nil, fmt.Errorf("%w: the access token expired and no refresh token was issued", ErrNotAuthorized)
	}
	v, err, _ := f.refresh.Do(grantKey(tenant, server), func() (any, error) {
		return f.refreshGrant(ctx, tenant, server, g, rev)
	})
	if err != nil {
		return nil, err
	}
	return v.(*oauth2.Token), nil
}

func (f *Flow) fresh(g *Grant) bool {
	skew := f.RefreshSkew
	if skew <= 0 {
		skew = DefaultRefreshSkew
	}
	return g.Expiry.IsZero() || f.now().Add(skew).Before(g.Expiry)
}

func (f *Flow) refreshGrant(ctx context.Context, tenant, server string, g *Grant, rev uint64) (*oauth2.Token, error) {
	src := g.oauth2Config().TokenSource(f.oauthCtx(ctx), &oauth2.Token{RefreshToken: g.RefreshToken, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			// The authorization server no longer honours the grant
			// (revoked or expired there): forget it so the server shows
			// as needing authorization.
			f.Metrics.refreshed("invalid_grant")
			if _, derr := f.Store.DeleteGrant(ctx, tenant, server); derr != nil {
				f.logger().WarnContext(ctx, "mcp oauth: dropping an invalid grant", "tenant", tenant, "server", server, "err", derr)
			}
			return nil, fmt.Errorf("%w: the authorization server refused the refresh token", ErrNotAuthorized)
		}
		f.Metrics.refreshed("error")
		return nil, fmt.Errorf("refresh token at %s: %w", g.Issuer, err)
	}
	ng := *g
	ng.AccessToken, ng.TokenType, ng.Expiry, ng.UpdatedAt = tok.AccessToken, tok.TokenType, f.expiry(tok), f.now()
	if tok.RefreshToken != "" {
		ng.RefreshToken = tok.RefreshToken
	}
	ok, err := f.Store.updateGrant(ctx, tenant, server, &ng, rev)
	if err != nil {
		f.Metrics.refreshed("error")
		return nil, err
	}
	if !ok {
		// Another replica refreshed (or the grant was revoked) meanwhile:
		// use what is stored now.
		cur, _, err := f.Store.Grant(ctx, tenant, server)
		if err != nil {
			return nil, err
		}
		f.Metrics.refreshed("raced")
		return cur.token(), nil
	}
	f.Metrics.refreshed("ok")
	return ng.token(), nil
}

// Revoke revokes tenant's grant for server at the authorization server
// (RFC 7009, when it has a revocation endpoint) and forgets it. It reports
// whether there was a grant. A failure to revoke remotely is logged; the
// grant is forgotten regardless so the toolrunner stops using it.
func (f *Flow) Revoke(ctx context.Context, tenant, server string) (bool, error) {
	g, _, err := f.Store.Grant(ctx, tenant, server)
	if errors.Is(err, ErrNotAuthorized) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if g.RevocationURL != "" {
		tok, hint := g.RefreshToken, "refresh_token"
		if tok == "" {
			tok, hint = g.AccessToken, "access_token"
		}
		if err := f.revokeRemote(ctx, g, tok, hint); err != nil {
			f.logger().WarnContext(ctx, "mcp oauth: remote revocation failed", "tenant", tenant, "server", server, "err", err)
		}
	}
	existed, err := f.Store.DeleteGrant(ctx, tenant, server)
	if err != nil {
		return false, err
	}
	f.Metrics.revoked()
	return existed, nil
}

func (f *Flow) revokeRemote(ctx context.Context, g *Grant, tok, hint string) error {
	form := url.Values{"token": {tok}, "token_type_hint": {hint}}
	if oauth2.AuthStyle(g.AuthStyle) != oauth2.AuthStyleInHeader {
		form.Set("client_id", g.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if oauth2.AuthStyle(g.AuthStyle) == oauth2.AuthStyleInHeader {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	resp, err := f.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revocation endpoint answered %s", resp.Status)
	}
	return nil
}

// Transport returns a RoundTripper that sends tenant's bearer token for
// server on every request through base (http.DefaultTransport if nil).
func (f *Flow) Transport(tenant, server string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &bearerTransport{f: f, tenant: tenant, server: server, base: base}
}

type bearerTransport struct {
	f              *Flow
	tenant, server string
	base           http.RoundTripper
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.f.Token(req.Context(), t.tenant, t.server)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return t.base.RoundTrip(r)
}
