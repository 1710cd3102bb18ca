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
// their key for a short-lived signed stream token (POST /v1/tokens) and
// pass it as ?token=. With no keys configured there is one tenant,
// "default", served to loopback clients only.

// tokenPrefix versions the stream token format: v1.<payload>.<mac> with
// payload = base64url("<tenant>|<unix expiry>").
const tokenPrefix = "v1."

// maxKeyLen bounds a presented key or token before any work is done on it.
const maxKeyLen = 512

var (
	errNoCredentials  = errors.New("missing API key: send `authorization: Bearer <key>` or `x-api-key: <key>`")
	errBadCredentials = errors.New("invalid API key")
	errBadToken       = errors.New("invalid or expired stream token: get a new one with POST /v1/tokens")
	errNotLoopback    = errors.New("no API keys are configured, so only loopback clients are served; configure api-keys or api-keys-file")
)

type authenticator struct {
	keys   map[[32]byte]string // sha256(key) -> tenant; lookups leak nothing about keys
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

func newAuthenticator(keys map[string]string, secret []byte, ttl time.Duration) (*authenticator, error) {
	a := &authenticator{keys: make(map[[32]byte]string, len(keys)), ttl: ttl, now: time.Now}
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
	case len(secret) > 0:
		a.secret = slices.Clone(secret)
	case len(keys) > 0:
		slices.Sort(names)
		mac := hmac.New(sha256.New, []byte("baagent gateway stream tokens v1"))
		for _, n := range names {
			mac.Write([]byte(n))
			mac.Write([]byte{0})
		}
		a.secret = mac.Sum(nil)
	default:
		a.secret = make([]byte, 32)
		if _, err := rand.Read(a.secret); err != nil {
			return nil, fmt.Errorf("stream token secret: %w", err)
		}
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

// caller is an authenticated caller: its tenant and, for rate limiting,
// an identity (a hash of its API key, or of its stream token's tenant).
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

// tokenCaller is the caller of a verified stream token: the tenant's
// keys minted it, so its streams share one bucket per tenant.
func (a *authenticator) tokenCaller(tenant string) caller {
	return caller{tenant: tenant, id: sha256.Sum256([]byte("stream-token\x00" + tenant)), keyed: !a.open()}
}

// issue returns a stream token for tenant and its expiry.
func (a *authenticator) issue(tenant string) (string, time.Time) {
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	payload := base64.RawURLEncoding.EncodeToString([]byte(tenant + "|" + strconv.FormatInt(exp.Unix(), 10)))
	return tokenPrefix + payload + "." + a.sign(payload), exp
}

func (a *authenticator) sign(payload string) string {
	mac := hmac.New(sha256.New, a.secret)
	mac.Write([]byte(tokenPrefix + payload))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verify checks a stream token and returns its tenant.
func (a *authenticator) verify(token string) (string, error) {
	if len(token) > maxKeyLen || !strings.HasPrefix(token, tokenPrefix) {
		return "", errBadToken
	}
	payload, mac, ok := strings.Cut(token[len(tokenPrefix):], ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(a.sign(payload))) {
		return "", errBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", errBadToken
	}
	tenant, expStr, ok := strings.Cut(string(raw), "|")
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if !ok || err != nil || natsx.ValidateToken("tenant", tenant) != nil {
		return "", errBadToken
	}
	if !a.now().Before(time.Unix(exp, 0)) {
		return "", errBadToken
	}
	return tenant, nil
}

// bearer extracts the key from an authorization value ("Bearer <key>").
func bearer(v string) string {
	const p = "bearer "
	if len(v) > len(p) && strings.EqualFold(v[:len(p)], p) {
		return strings.TrimSpace(v[len(p):])
	}
	return ""
}

// grpcTenant authenticates a gRPC call from its metadata.
func (s *Server) grpcTenant(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	key := ""
	if v := md.Get("authorization"); len(v) > 0 {
		key = bearer(v[0])
	}
	if v := md.Get("x-api-key"); key == "" && len(v) > 0 {
		key = strings.TrimSpace(v[0])
	}
	var remote net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		remote = p.Addr
	}
	c, err := s.auth.tenantForKey(key, remote)
	if err != nil {
		code := codes.Unauthenticated
		if errors.Is(err, errNotLoopback) {
			code = codes.PermissionDenied
		}
		return "", status.Error(code, err.Error())
	}
	if err := s.limit(c, apiGRPC); err != nil {
		return "", err
	}
	return c.tenant, nil
}

// httpTenant authenticates an HTTP request from its headers, or, when
// allowToken is set (event streams), from a ?token= stream token.
func (s *Server) httpTenant(r *http.Request, allowToken bool) (string, error) {
	if tok := r.URL.Query().Get("token"); allowToken && tok != "" {
		t, err := s.auth.verify(tok)
		if err != nil {
			return "", status.Error(codes.Unauthenticated, err.Error())
		}
		if err := s.limit(s.auth.tokenCaller(t), apiHTTP); err != nil {
			return "", err
		}
		return t, nil
	}
	key := bearer(r.Header.Get("Authorization"))
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	var remote net.Addr
	if ap, err := netipAddr(r.RemoteAddr); err == nil {
		remote = ap
	}
	c, err := s.auth.tenantForKey(key, remote)
	if err != nil {
		code := codes.Unauthenticated
		if errors.Is(err, errNotLoopback) {
			code = codes.PermissionDenied
		}
		return "", status.Error(code, err.Error())
	}
	if err := s.limit(c, apiHTTP); err != nil {
		return "", err
	}
	return c.tenant, nil
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
