package gateway

import (
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/natsx"
)

// Settings holds the gateway's settings: who may call it (API keys), what
// one client may cost it, which web pages may use it, and the dashboard's
// link to traces. Limits of 0 are unlimited.
type Settings struct {
	// APIKeys maps API keys to tenants, from -api-keys and -api-keys-file
	// together (resolved by Validate).
	APIKeys map[string]string
	// RateLimit is the calls and stream opens per second each API key may
	// make (0: unlimited); RateBurst how many at once.
	RateLimit float64
	RateBurst int
	// TokenSecret signs browser stream tokens; every replica shares it.
	TokenSecret string
	TokenTTL    time.Duration
	// AllowedOrigins are browser origins, besides the gateway's own, that
	// may use it (WebSockets in every mode; everything without API keys),
	// resolved by Validate from -gateway-allowed-origins.
	AllowedOrigins    []string
	MaxStreamsPerKey  int
	MaxInFlightPerKey int
	AuthFailureLimit  int
	AuthFailureWindow time.Duration
	BodyReadTimeout   time.Duration
	// MaxSkillBytes bounds an uploaded skill (SKILL.md or archive).
	MaxSkillBytes int64
	// TraceLinkTemplate makes a run's trace id a link in the dashboard:
	// a URL with {trace_id} in it; empty: no link.
	TraceLinkTemplate string

	// The lists as given, which Validate resolves into APIKeys and
	// AllowedOrigins.
	apiKeys, apiKeysFile, allowedOrigins string

	// AdminAPIKeys may call the admin API (any tenant's budget), from
	// -admin-api-keys and -admin-api-keys-file together (resolved by
	// Validate); none: the admin API is disabled.
	AdminAPIKeys                []string
	adminAPIKeys, adminKeysFile string
}

// RegisterFlags registers the settings on fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.apiKeys, "api-keys", "", "gateway API keys as key=tenant,key=tenant (prefer the environment variable)")
	fs.StringVar(&s.apiKeysFile, "api-keys-file", "", "file of key=tenant lines mapping gateway API keys to tenants")
	fs.Float64Var(&s.RateLimit, "gateway-rate-limit", 50, "calls and stream opens per second each gateway API key may make; 0 = unlimited")
	fs.IntVar(&s.RateBurst, "gateway-rate-burst", 100, "calls an idle gateway API key may make at once")
	fs.StringVar(&s.TokenSecret, "gateway-token-secret", "", "secret (at least 16 bytes) signing browser stream tokens, shared by every gateway replica; empty: derived from the API keys (prefer the environment variable)")
	fs.DurationVar(&s.TokenTTL, "gateway-token-ttl", 10*time.Minute, "lifetime of a browser stream token; tokens that expire later are refused")
	fs.StringVar(&s.allowedOrigins, "gateway-allowed-origins", "", "browser origins (scheme://host[:port], comma-separated) besides the gateway's own that may use it; WebSockets from other origins are refused")
	fs.IntVar(&s.MaxStreamsPerKey, "gateway-max-streams-per-key", 100, "event streams (gRPC, SSE, WebSocket together) one API key may hold open; 0 = unlimited")
	fs.IntVar(&s.MaxInFlightPerKey, "gateway-max-in-flight-per-key", 64, "requests one API key may have in progress at once; 0 = unlimited")
	fs.IntVar(&s.AuthFailureLimit, "gateway-auth-failure-limit", 20, "invalid API keys or tokens one client address may present per window before its requests are refused (429); 0 = no throttling")
	fs.DurationVar(&s.AuthFailureWindow, "gateway-auth-failure-window", time.Minute, "window of gateway-auth-failure-limit")
	fs.DurationVar(&s.BodyReadTimeout, "gateway-body-read-timeout", 30*time.Second, "how long an HTTP request body may take to arrive (408 after); 0 = no limit")
	fs.Int64Var(&s.MaxSkillBytes, "gateway-max-skill-bytes", DefaultMaxSkillBytes, "largest skill (SKILL.md, or zip/tar/tar.gz of its folder) a tenant may upload through the gateway; larger uploads are refused (413) before reaching the skills service")
	fs.StringVar(&s.adminAPIKeys, "admin-api-keys", "", "admin API keys (comma-separated, at least 16 characters each, never tenant keys) that may read and set any tenant's budget; empty: the admin API is disabled (prefer the environment variable)")
	fs.StringVar(&s.adminKeysFile, "admin-api-keys-file", "", "file of admin API keys, one a line (# comments)")
	fs.StringVar(&s.TraceLinkTemplate, "trace-link-template", "", "URL of a trace in the tracing UI, with {trace_id}, e.g. http://localhost:16686/trace/{trace_id}; the dashboard links a run's trace id with it")
}

// Validate checks the settings and resolves the lists: the allowed
// origins, and the API keys of -api-keys and the -api-keys-file it reads.
func (s *Settings) Validate() error {
	for _, check := range []func() error{s.validateLimits, s.validateBrowser, s.validateAPIKeys, s.validateTraceLink, s.validateAdminKeys} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateLimits checks what one client may cost the gateway.
func (s *Settings) validateLimits() error {
	switch {
	case s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0):
		return fmt.Errorf("setting gateway-rate-limit: want a rate >= 0 (0 = unlimited), got %v", s.RateLimit)
	case s.RateBurst < 1:
		return fmt.Errorf("setting gateway-rate-burst: must be at least 1, got %d", s.RateBurst)
	case s.MaxStreamsPerKey < 0:
		return fmt.Errorf("setting gateway-max-streams-per-key: want >= 0 (0 = unlimited), got %d", s.MaxStreamsPerKey)
	case s.MaxInFlightPerKey < 0:
		return fmt.Errorf("setting gateway-max-in-flight-per-key: want >= 0 (0 = unlimited), got %d", s.MaxInFlightPerKey)
	case s.AuthFailureLimit < 0:
		return fmt.Errorf("setting gateway-auth-failure-limit: want >= 0 (0 = no throttling), got %d", s.AuthFailureLimit)
	case s.AuthFailureWindow < time.Second:
		return fmt.Errorf("setting gateway-auth-failure-window: want at least 1s, got %s", s.AuthFailureWindow)
	case s.BodyReadTimeout < 0:
		return fmt.Errorf("setting gateway-body-read-timeout: want >= 0 (0 = no limit), got %s", s.BodyReadTimeout)
	case s.MaxSkillBytes < 1<<10 || s.MaxSkillBytes > 1<<30:
		return fmt.Errorf("setting gateway-max-skill-bytes: want 1024 to 1073741824 bytes, got %d", s.MaxSkillBytes)
	}
	return nil
}

// validateBrowser checks the stream tokens and the origins that may use
// the gateway from a web page.
func (s *Settings) validateBrowser() error {
	switch {
	case s.TokenSecret != "" && len(s.TokenSecret) < 16:
		return fmt.Errorf("setting gateway-token-secret: want at least 16 bytes, got %d", len(s.TokenSecret))
	case s.TokenTTL < time.Minute || s.TokenTTL > 24*time.Hour:
		return fmt.Errorf("setting gateway-token-ttl: want 1m to 24h, got %s", s.TokenTTL)
	}
	s.AllowedOrigins = splitList(s.allowedOrigins)
	for _, o := range s.AllowedOrigins {
		u, err := url.Parse(strings.TrimSuffix(o, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("setting gateway-allowed-origins: %q is not an origin (want http://host[:port] or https://host[:port])", o)
		}
	}
	return nil
}

// validateAPIKeys reads the API keys of -api-keys and -api-keys-file; a
// key both map must map to the same tenant.
func (s *Settings) validateAPIKeys() error {
	keys, err := parseAPIKeys("api-keys", s.apiKeys)
	if err != nil {
		return err
	}
	if s.apiKeysFile != "" {
		data, err := os.ReadFile(s.apiKeysFile)
		if err != nil {
			return fmt.Errorf("setting api-keys-file: %w", err)
		}
		fileKeys, err := parseAPIKeys("api-keys-file "+s.apiKeysFile, strings.ReplaceAll(string(data), "\n", ","))
		if err != nil {
			return err
		}
		for k, t := range fileKeys {
			if other, dup := keys[k]; dup && other != t {
				return fmt.Errorf("setting api-keys-file: a key is mapped to both tenant %q and %q", other, t)
			}
			keys[k] = t
		}
	}
	s.APIKeys = keys
	return nil
}

// validateTraceLink checks the dashboard's link to a trace.
func (s *Settings) validateTraceLink() error {
	t := strings.TrimSpace(s.TraceLinkTemplate)
	s.TraceLinkTemplate = t
	if t == "" {
		return nil
	}
	if !strings.Contains(t, "{trace_id}") {
		return fmt.Errorf("setting trace-link-template: must contain {trace_id}, got %q", t)
	}
	u, err := url.Parse(strings.ReplaceAll(t, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("setting trace-link-template: want an http(s) URL with {trace_id}, such as http://localhost:16686/trace/{trace_id}, got %q", t)
	}
	return nil
}

// parseAPIKeys reads "key=tenant" pairs separated by commas; blank entries
// and lines starting with # are skipped. Tenants follow the NATS subject
// token rules used everywhere else.
func parseAPIKeys(setting, s string) (map[string]string, error) {
	keys := map[string]string{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		key, tenant, ok := strings.Cut(entry, "=")
		key, tenant = strings.TrimSpace(key), strings.TrimSpace(tenant)
		if !ok || key == "" || tenant == "" {
			return nil, fmt.Errorf("setting %s: entry %d: want key=tenant", setting, i+1)
		}
		if len(key) < 16 {
			return nil, fmt.Errorf("setting %s: entry %d: API key shorter than 16 characters", setting, i+1)
		}
		if err := natsx.ValidateToken("tenant", tenant); err != nil {
			return nil, fmt.Errorf("setting %s: entry %d: %w", setting, i+1, err)
		}
		if other, dup := keys[key]; dup && other != tenant {
			return nil, fmt.Errorf("setting %s: entry %d: key mapped to both tenant %q and %q", setting, i+1, other, tenant)
		}
		keys[key] = tenant
	}
	return keys, nil
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Options returns the service options the settings select; the caller
// adds the runtime dependencies (logger, registerer, JetStream, peers,
// HTTP listener, message and shutdown limits, tracer).
func (s *Settings) Options() Options {
	return Options{
		APIKeys:   s.APIKeys,
		RateLimit: s.RateLimit,
		RateBurst: s.RateBurst,
		// The options read 0 as their default and a negative limit as
		// none; the settings read 0 as none.
		StreamTokenSecret: s.TokenSecret,
		TokenTTL:          s.TokenTTL,
		AllowedOrigins:    s.AllowedOrigins,
		MaxStreamsPerKey:  config.UnlimitedIfZero(s.MaxStreamsPerKey),
		MaxInFlightPerKey: config.UnlimitedIfZero(s.MaxInFlightPerKey),
		AuthFailureLimit:  config.UnlimitedIfZero(s.AuthFailureLimit),
		AuthFailureWindow: s.AuthFailureWindow,
		BodyReadTimeout:   config.UnlimitedIfZero(s.BodyReadTimeout),
		TraceLinkTemplate: s.TraceLinkTemplate,
		MaxSkillBytes:     s.MaxSkillBytes,
		AdminAPIKeys:      s.AdminAPIKeys,
	}
}

// validateAdminKeys reads the admin keys of -admin-api-keys and
// -admin-api-keys-file; a key may not be a tenant key too.
func (s *Settings) validateAdminKeys() error {
	var keys []string
	add := func(setting string, list []string) error {
		for i, k := range list {
			if strings.HasPrefix(k, "#") {
				continue
			}
			if len(k) < 16 {
				return fmt.Errorf("setting %s: entry %d: admin API key shorter than 16 characters", setting, i+1)
			}
			if _, tenant := s.APIKeys[k]; tenant {
				return fmt.Errorf("setting %s: entry %d: the key is also a tenant API key; use separate keys", setting, i+1)
			}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return nil
	}
	if err := add("admin-api-keys", splitList(s.adminAPIKeys)); err != nil {
		return err
	}
	if s.adminKeysFile != "" {
		data, err := os.ReadFile(s.adminKeysFile)
		if err != nil {
			return fmt.Errorf("setting admin-api-keys-file: %w", err)
		}
		if err := add("admin-api-keys-file "+s.adminKeysFile, splitList(strings.ReplaceAll(string(data), "\n", ","))); err != nil {
			return err
		}
	}
	s.AdminAPIKeys = keys
	return nil
}
