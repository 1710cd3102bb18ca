package mcpauth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"
)

// ErrNotAuthorized is returned when a tenant holds no grant for a server.
var ErrNotAuthorized = errors.New("not authorized")

// Grant is what the store keeps for one tenant and MCP server: the tokens
// and everything needed to refresh and revoke them without discovering the
// authorization server again.
type Grant struct {
	ClientID      string    `json:"client_id"`
	ClientSecret  string    `json:"client_secret,omitempty"`
	AuthStyle     int       `json:"auth_style,omitempty"`
	Issuer        string    `json:"issuer,omitempty"`
	TokenURL      string    `json:"token_url"`
	RevocationURL string    `json:"revocation_url,omitempty"`
	Resource      string    `json:"resource"`
	Scopes        []string  `json:"scopes,omitempty"`
	AccessToken   string    `json:"access_token"`
	TokenType     string    `json:"token_type,omitempty"`
	RefreshToken  string    `json:"refresh_token,omitempty"`
	Expiry        time.Time `json:"expiry,omitzero"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func (g *Grant) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: g.AccessToken, TokenType: g.TokenType, RefreshToken: g.RefreshToken, Expiry: g.Expiry}
}

func (g *Grant) oauth2Config() *oauth2.Config {
	return &oauth2.Config{
		ClientID:     g.ClientID,
		ClientSecret: g.ClientSecret,
		Endpoint:     oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: oauth2.AuthStyle(g.AuthStyle)},
		Scopes:       g.Scopes,
	}
}

// pending is an authorization in progress, stored under its state until the
// callback consumes it.
type pending struct {
	Tenant        string    `json:"tenant"`
	Server        string    `json:"server"`
	Verifier      string    `json:"verifier"`
	ClientID      string    `json:"client_id"`
	ClientSecret  string    `json:"client_secret,omitempty"`
	AuthStyle     int       `json:"auth_style,omitempty"`
	Issuer        string    `json:"issuer,omitempty"`
	AuthURL       string    `json:"auth_url"`
	TokenURL      string    `json:"token_url"`
	RevocationURL string    `json:"revocation_url,omitempty"`
	Resource      string    `json:"resource"`
	RedirectURL   string    `json:"redirect_url"`
	Scopes        []string  `json:"scopes,omitempty"`
	Expires       time.Time `json:"expires"`
}

// registration is a client registered dynamically at an issuer for one
// server; every tenant of that server shares it.
type registration struct {
	Issuer       string `json:"issuer"`
	RedirectURL  string `json:"redirect_url"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthStyle    int    `json:"auth_style,omitempty"`
}

// Store keeps grants, pending authorizations and registered clients in a
// JetStream KV bucket, every value sealed with AES-256-GCM bound to its key.
type Store struct {
	kv     jetstream.KeyValue // grants and registrations, no TTL
	states jetstream.KeyValue // pending authorizations, expired by the bucket's TTL
	seal   *sealer
}

// NewStore returns a store keeping grants in kv (natsx.BucketMCPOAuth) and
// pending authorizations in states (natsx.BucketMCPOAuthState, whose TTL
// drops abandoned ones), sealing with key (KeySize bytes, see LoadKey).
func NewStore(kv, states jetstream.KeyValue, key []byte) (*Store, error) {
	if kv == nil || states == nil {
		return nil, errors.New("mcpauth: nil KV bucket")
	}
	s, err := newSealer(key)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, states: states, seal: s}, nil
}

// KV keys: names are base64url-encoded (no padding) so that any tenant id
// or server name maps to the KV key alphabet and no two pairs collide.
func enc(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func grantKey(tenant, server string) string { return "g." + enc(tenant) + "." + enc(server) }
func stateKey(state string) string          { return "s." + state }
func regKey(server string) string           { return "c." + enc(server) }

func (s *Store) put(ctx context.Context, kv jetstream.KeyValue, key string, v any) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	sealed, err := s.seal.seal(b, key)
	if err != nil {
		return 0, err
	}
	return kv.Put(ctx, key, sealed)
}

// get loads and opens key into v; it returns the revision, or
// jetstream.ErrKeyNotFound.
func (s *Store) get(ctx context.Context, kv jetstream.KeyValue, key string, v any) (uint64, error) {
	e, err := kv.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	plain, err := s.seal.open(e.Value(), key)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return e.Revision(), nil
}

// Grant returns the grant of tenant for server, or ErrNotAuthorized.
func (s *Store) Grant(ctx context.Context, tenant, server string) (*Grant, uint64, error) {
	var g Grant
	rev, err := s.get(ctx, s.kv, grantKey(tenant, server), &g)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotAuthorized
	}
	if err != nil {
		return nil, 0, err
	}
	return &g, rev, nil
}

// PutGrant stores g for tenant and server, replacing any previous grant.
func (s *Store) PutGrant(ctx context.Context, tenant, server string, g *Grant) error {
	_, err := s.put(ctx, s.kv, grantKey(tenant, server), g)
	return err
}

// updateGrant stores g only if the stored grant is still at revision rev,
// so two replicas refreshing at once do not overwrite each other's newer
// refresh token. It reports false when another writer won.
func (s *Store) updateGrant(ctx context.Context, tenant, server string, g *Grant, rev uint64) (bool, error) {
	key := grantKey(tenant, server)
	b, err := json.Marshal(g)
	if err != nil {
		return false, err
	}
	sealed, err := s.seal.seal(b, key)
	if err != nil {
		return false, err
	}
	if _, err := s.kv.Update(ctx, key, sealed, rev); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) {
			return false, nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// DeleteGrant forgets the grant of tenant for server; it reports whether
// there was one.
func (s *Store) DeleteGrant(ctx context.Context, tenant, server string) (bool, error) {
	key := grantKey(tenant, server)
	if _, err := s.kv.Get(ctx, key); err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return false, nil
		}
		return false, err
	}
	if err := s.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, err
	}
	return true, nil
}

// DropRefusedGrant forgets the grant of tenant for server after the MCP
// server refused its access token, but only if the stored grant still holds
// that token: a grant the tenant made again (or a refresh) since the token
// was sent is kept. It reports whether a grant was dropped.
func (s *Store) DropRefusedGrant(ctx context.Context, tenant, server, accessToken string) (bool, error) {
	g, rev, err := s.Grant(ctx, tenant, server)
	if errors.Is(err, ErrNotAuthorized) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if subtle.ConstantTimeCompare([]byte(g.AccessToken), []byte(accessToken)) != 1 {
		return false, nil
	}
	err = s.kv.Purge(ctx, grantKey(tenant, server), jetstream.LastRevision(rev))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyExists) ||
			errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return false, nil // changed meanwhile
		}
		return false, err
	}
	return true, nil
}

func (s *Store) putPending(ctx context.Context, state string, p *pending) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	key := stateKey(state)
	sealed, err := s.seal.seal(b, key)
	if err != nil {
		return err
	}
	_, err = s.states.Create(ctx, key, sealed)
	return err
}

// takePending loads and deletes the pending authorization of state. The
// delete is conditional on the revision read, so of two callbacks racing
// with the same state exactly one gets it: a state is single-use.
func (s *Store) takePending(ctx context.Context, state string) (*pending, error) {
	var p pending
	key := stateKey(state)
	rev, err := s.get(ctx, s.states, key, &p)
	if err != nil {
		return nil, err
	}
	if err := s.states.Purge(ctx, key, jetstream.LastRevision(rev)); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return nil, jetstream.ErrKeyNotFound
		}
		return nil, err
	}
	return &p, nil
}

func (s *Store) registration(ctx context.Context, server string) (*registration, error) {
	var r registration
	if _, err := s.get(ctx, s.kv, regKey(server), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *Store) putRegistration(ctx context.Context, server string, r *registration) error {
	_, err := s.put(ctx, s.kv, regKey(server), r)
	return err
}
