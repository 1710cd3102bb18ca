package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/internal/natsx"
)

// Authentication. A caller presents an API key (`authorization: Bearer
// <key>` or `x-api-key: <key>`), mapped to its tenant by configuration.
// Browsers, which cannot set headers on EventSource or WebSocket, exchange
// their key for a short-lived signed stream token (POST
// /v1/auth/stream-token) and pass it as ?token=. With no keys configured
// there is one tenant, "default", served to loopback clients only.
// Every protocol authenticates before it validates anything, so a caller
// without a valid credential learns nothing but that.

// tokenPrefix versions the stream token format: v1.<payload>.<mac> with
// payload = base64url("<tenant>|<unix expiry>|<subject>"). The subject
// names the API key that asked for the token (an HMAC of its hash, so the
// token reveals nothing about the key): its streams count as the key's,
// and it stops working when the key is removed. Tokens without a subject
// (earlier gateways) are accepted, counted per tenant.
const tokenPrefix = "v1."

// maxKeyLen bounds a presented key or token before any work is done on it.
const maxKeyLen = 512

// tokenClockSkew is how much later than TokenTTL from now a token may
// expire: replicas' clocks differ a little.
const tokenClockSkew = time.Minute

// tokenRoute is where a stream token is obtained (see routes).
const tokenRoute = "POST /v1/auth/stream-token"

var (
	errNoCredentials  = errors.New("missing API key: send `authorization: Bearer <key>` or `x-api-key: <key>`")
	errBadCredentials = errors.New("invalid API key")
	errBadToken       = errors.New("invalid or expired stream token: get a new one with " + tokenRoute)
	errTokenTooLong   = errors.New("stream token expires later than this gateway's token lifetime allows: get a new one with " + tokenRoute)
	errNotLoopback    = errors.New("no API keys are configured, so only loopback clients are served; configure api-keys or api-keys-file")
)

type authenticator struct {
	keys     map[[32]byte]string // sha256(key) -> tenant; lookups leak nothing about keys
	subjects map[string][32]byte // token subject -> sha256(key)
	secret   []byte
	derived  bool // secret derived from the key list (no StreamTokenSecret)
	ttl      time.Duration
	now      func() time.Time
}

func newAuthenticator(keys map[string]string, secret string, ttl time.Duration) (*authenticator, error) {
	a := &authenticator{keys: make(map[[32]byte]string, len(keys)), subjects: make(map[string][32]byte, len(keys)), ttl: ttl, now: time.Now}
	names := make([]string, 0, len(keys))
	for k, tenant := range keys {
		if k == "" || len(k) > maxKeyLen {
			return nil, fmt.Errorf("api key for tenant %q: must be 1-%d bytes", tenant, maxKeyLen)
		}
		if err := natsx.ValidateToken("tenant", tenant); err != nil {
			return nil, fmt.Errorf("api key mapping: %w", err)
		}
		a.keys[sha256.Sum256([]byte(k))] = tenant
		names = append(names, k+"="+tenant)
	}
	switch {
	case secret != "":
		if len(secret) < MinStreamTokenSecretBytes {
			return nil, fmt.Errorf("stream token secret (gateway-token-secret): must be at least %d bytes, got %d", MinStreamTokenSecretBytes, len(secret))
		}
		// A fixed-length key whatever the secret's length and encoding.
		mac := hmac.New(sha256.New, []byte("baagent gateway stream tokens v2"))
		mac.Write([]byte(secret))
		a.secret = mac.Sum(nil)
	case len(keys) > 0:
		// The fallback: replicas with the same keys agree on it without
		// any other setting, and it changes when the keys do.
		slices.Sort(names)
		mac := hmac.New(sha256.New, []byte("baagent gateway stream tokens v1"))
		for _, n := range names {
			mac.Write([]byte(n))
			mac.Write([]byte{0})
		}
		a.secret = mac.Sum(nil)
		a.derived = true
	default:
		a.secret = make([]byte, 32)
		if _, err := rand.Read(a.secret); err != nil {
			return nil, fmt.Errorf("stream token secret: %w", err)
		}
	}
	for id := range a.keys {
		a.subjects[a.subject(id)] = id
	}
	return a, nil
}

func (a *authenticator) open() bool { return len(a.keys) == 0 }

func (a *authenticator) mode() string {
	if a.open() {
		return "none (tenant default, loopback only)"
	}
	return strconv.Itoa(len(a.keys)) + " API keys"
}

// caller is an authenticated caller: its tenant and, for the per-key
// limits, an identity (the hash of its API key; for a stream token, of
// the key that asked for it).
type caller struct {
	tenant string
	id     [32]byte
	keyed  bool // false when no keys are configured: nothing to limit by
}

// tenantForKey resolves a presented key; remote is the client's address,
// checked when no keys are configured.
func (a *authenticator) tenantForKey(key string, remote net.Addr) (caller, error) {
	if a.open() {
		if !isLoopback(remote) {
			return caller{}, errNotLoopback
		}
		return caller{tenant: DefaultTenant}, nil
	}
	if key == "" {
		return caller{}, errNoCredentials
	}
	if len(key) > maxKeyLen {
		return caller{}, errBadCredentials
	}
	id := sha256.Sum256([]byte(key))
	t, ok := a.keys[id]
	if !ok {
		return caller{}, errBadCredentials
	}
	return caller{tenant: t, id: id, keyed: true}, nil
}

// tokenCaller is the caller of a verified token without a subject: its
// streams share one identity per tenant.
func (a *authenticator) tokenCaller(tenant string) caller {
	return caller{tenant: tenant, id: sha256.Sum256([]byte("stream-token\x00" + tenant)), keyed: !a.open()}
}

// subject is the token subject of a key: not reversible, and only this
// gateway's secret maps it back.
func (a *authenticator) subject(id [32]byte) string {
	mac := hmac.New(sha256.New, a.secret)
	mac.Write([]byte("subject\x00"))
	mac.Write(id[:])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:12])
}

// issue returns a stream token for c and its expiry.
func (a *authenticator) issue(c caller) (string, time.Time) {
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	claims := c.tenant + "|" + strconv.FormatInt(exp.Unix(), 10)
	if c.keyed {
		claims += "|" + a.subject(c.id)
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(claims))
	return tokenPrefix + payload + "." + a.sign(payload), exp
}

func (a *authenticator) sign(payload string) string {
	mac := hmac.New(sha256.New, a.secret)
	mac.Write([]byte(tokenPrefix + payload))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verify checks a stream token and returns its caller. A token that
// expires further ahead than this gateway's TTL is refused even when its
// signature is good: a signer with another TTL, or one that learnt the
// secret, cannot mint tokens that outlive key rotations.
func (a *authenticator) verify(token string) (caller, error) {
	if len(token) > maxKeyLen || !strings.HasPrefix(token, tokenPrefix) {
		return caller{}, errBadToken
	}
	payload, mac, ok := strings.Cut(token[len(tokenPrefix):], ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(a.sign(payload))) {
		return caller{}, errBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return caller{}, errBadToken
	}
	claims := strings.Split(string(raw), "|")
	if len(claims) != 2 && len(claims) != 3 {
		return caller{}, errBadToken
	}
	tenant := claims[0]
	exp, err := strconv.ParseInt(claims[1], 10, 64)
	if err != nil || natsx.ValidateToken("tenant", tenant) != nil {
		return caller{}, errBadToken
	}
	now := a.now()
	expiry := time.Unix(exp, 0)
	if !now.Before(expiry) {
		return caller{}, errBadToken
	}
	if expiry.After(now.Add(a.ttl + tokenClockSkew)) {
		return caller{}, errTokenTooLong
	}
	if len(claims) == 2 {
		return a.tokenCaller(tenant), nil
	}
	id, ok := a.subjects[claims[2]]
	if !ok || a.keys[id] != tenant {
		// The key was removed (or never belonged to the tenant).
		return caller{}, errBadToken
	}
	return caller{tenant: tenant, id: id, keyed: true}, nil
}

// bearer extracts the key from an authorization value ("Bearer <key>").
func bearer(v string) string {
	const p = "bearer "
	if len(v) > len(p) && strings.EqualFold(v[:len(p)], p) {
		return strings.TrimSpace(v[len(p):])
	}
	return ""
}

// authStatus turns an authentication failure into its status.
func authStatus(err error) error {
	code := codes.Unauthenticated
	if errors.Is(err, errNotLoopback) {
		code = codes.PermissionDenied
	}
	return status.Error(code, err.Error())
}

// authenticate resolves a credential presented from remote: a stream
// token when token is set, else key. A throttled address is refused
// before its credential is looked at; an invalid one counts against it.
// The caller then takes a rate token.
func (s *Server) authenticate(api string, remote net.Addr, key, token string) (caller, error) {
	if err := s.ready(); err != nil {
		return caller{}, err
	}
	keyed := !s.auth.open()
	if keyed {
		if err := s.throttled(api, remote); err != nil {
			return caller{}, err
		}
	}
	var c caller
	var err error
	switch {
	case !keyed && !isLoopback(remote):
		// Tokens too: without keys nothing but loopback is served.
		err = errNotLoopback
	case token != "":
		c, err = s.auth.verify(token)
	default:
		c, err = s.auth.tenantForKey(key, remote)
	}
	if err != nil {
		if keyed && !errors.Is(err, errNoCredentials) {
			// Guessing costs an attempt; omitting the key does not (a
			// browser asks once without one to learn keys are needed).
			s.authFailed(api, remote)
		}
		return caller{}, authStatus(err)
	}
	if err := s.limit(c, api); err != nil {
		return caller{}, err
	}
	return c, nil
}

// grpcCaller authenticates a gRPC call from its metadata.
func (s *Server) grpcCaller(ctx context.Context) (caller, error) {
	key, remote := grpcCredentials(ctx)
	return s.authenticate(apiGRPC, remote, key, "")
}

// grpcCredentials is a gRPC call's key (a bearer token in authorization,
// else x-api-key) and the caller's address.
func grpcCredentials(ctx context.Context) (key string, remote net.Addr) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		key = bearer(v[0])
	}
	if v := md.Get("x-api-key"); key == "" && len(v) > 0 {
		key = strings.TrimSpace(v[0])
	}
	if p, ok := peer.FromContext(ctx); ok {
		remote = p.Addr
	}
	return key, remote
}

// grpcUnary authenticates a unary gRPC call and takes one of its key's
// in-flight slots; done gives it back.
func (s *Server) grpcUnary(ctx context.Context) (tenant string, done func(), err error) {
	c, err := s.grpcCaller(ctx)
	if err != nil {
		return "", nil, err
	}
	done, err = s.hold(c, s.inFlight, apiGRPC)
	if err != nil {
		return "", nil, err
	}
	return c.tenant, done, nil
}

// httpCaller authenticates an HTTP request from its headers, or, when
// allowToken is set (event streams), from a ?token= stream token.
func (s *Server) httpCaller(r *http.Request, allowToken bool) (caller, error) {
	var remote net.Addr
	if ap, err := netipAddr(r.RemoteAddr); err == nil {
		remote = ap
	}
	if tok := r.URL.Query().Get("token"); allowToken && tok != "" {
		return s.authenticate(apiHTTP, remote, "", tok)
	}
	key := bearer(r.Header.Get("Authorization"))
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	return s.authenticate(apiHTTP, remote, key, "")
}

func netipAddr(hostport string) (net.Addr, error) {
	return net.ResolveTCPAddr("tcp", hostport)
}

// isLoopback reports whether addr is a loopback TCP or Unix-socket peer.
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}
