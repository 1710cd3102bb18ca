package toolrunner

import (
	"path"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/allowlist"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// The built-in defaults (see docs/concepts/errors-and-retries.md).
const (
	DefaultTimeout           = 120 * time.Second
	DefaultMaxRetries        = 3
	DefaultBackoffMultiplier = 1.5
	DefaultInitialDelay      = time.Second
	DefaultMaxDelay          = 10 * time.Second
	DefaultTimeoutMultiplier = 2.0
	DefaultMaxTimeout        = 5 * time.Minute
	// contextUsageBrief is the context usage above which an unset output
	// level becomes BRIEF.
	contextUsageBrief = 0.8
)

// retryableTypes are the error types retried by default: all the retryable
// ones.
var retryableTypes = []baagentv1.ToolErrorType{
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT,
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT,
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR,
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR,
}

// RetryPolicy is a resolved ToolRetryPolicy: every field set.
type RetryPolicy struct {
	MaxRetries        int
	RetryOn           []baagentv1.ToolErrorType
	BackoffMultiplier float64
	InitialDelay      time.Duration
	MaxDelay          time.Duration
	TimeoutMultiplier float64
	MaxTimeout        time.Duration
}

// DefaultRetryPolicy is the built-in retry policy.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxRetries: DefaultMaxRetries, RetryOn: slices.Clone(retryableTypes),
		BackoffMultiplier: DefaultBackoffMultiplier, InitialDelay: DefaultInitialDelay, MaxDelay: DefaultMaxDelay,
		TimeoutMultiplier: DefaultTimeoutMultiplier, MaxTimeout: DefaultMaxTimeout,
	}
}

// overlay returns p with the fields set in o (a partial policy) replacing
// its own. Types that are not retryable are dropped from retry_on.
func (p RetryPolicy) overlay(o *baagentv1.ToolRetryPolicy) RetryPolicy {
	if o == nil {
		return p
	}
	if o.MaxRetries != nil {
		p.MaxRetries = int(o.GetMaxRetries())
	}
	if len(o.GetRetryOn()) > 0 {
		p.RetryOn = slices.DeleteFunc(slices.Clone(o.GetRetryOn()), func(t baagentv1.ToolErrorType) bool { return !tool.Retryable(t) })
	}
	if v := o.GetBackoffMultiplier(); v != 0 {
		p.BackoffMultiplier = v
	}
	if v := o.GetInitialDelayMs(); v > 0 {
		p.InitialDelay = time.Duration(v) * time.Millisecond
	}
	if v := o.GetMaxDelayMs(); v > 0 {
		p.MaxDelay = time.Duration(v) * time.Millisecond
	}
	if v := o.GetTimeoutMultiplier(); v != 0 {
		p.TimeoutMultiplier = v
	}
	if v := o.GetMaxTimeoutMs(); v > 0 {
		p.MaxTimeout = time.Duration(v) * time.Millisecond
	}
	return p
}

// ShouldRetry reports whether a failure of type t after attempt (0-based)
// is retried: t is in RetryOn, is retryable at all, and retries remain.
func (p RetryPolicy) ShouldRetry(t baagentv1.ToolErrorType, attempt int) bool {
	return tool.Retryable(t) && slices.Contains(p.RetryOn, t) && attempt < p.MaxRetries
}

// Delay is the wait before retry number n (0-based): initial ×
// multiplier^n, capped at MaxDelay, without jitter (the seed's policy).
// MaxDelay caps even an InitialDelay above it, which retry.Backoff would
// raise the cap to.
func (p RetryPolicy) Delay(n int) time.Duration {
	b := retry.Backoff{Initial: p.InitialDelay, Max: p.MaxDelay, Multiplier: p.BackoffMultiplier}
	return min(b.Delay(n), p.MaxDelay)
}

// Timeout is the timeout of attempt (0 = the first): base ×
// timeout_multiplier^attempt, capped at MaxTimeout.
func (p RetryPolicy) Timeout(base time.Duration, attempt int) time.Duration {
	d := float64(base)
	for range attempt {
		d *= p.TimeoutMultiplier
		if d >= float64(p.MaxTimeout) {
			return p.MaxTimeout
		}
	}
	return min(time.Duration(d), p.MaxTimeout)
}

// proto returns the policy as a ToolRetryPolicy (for ListTools).
func (p RetryPolicy) proto() *baagentv1.ToolRetryPolicy {
	return &baagentv1.ToolRetryPolicy{
		MaxRetries: proto.Int32(int32(p.MaxRetries)), RetryOn: slices.Clone(p.RetryOn),
		BackoffMultiplier: p.BackoffMultiplier, InitialDelayMs: p.InitialDelay.Milliseconds(), MaxDelayMs: p.MaxDelay.Milliseconds(),
		TimeoutMultiplier: p.TimeoutMultiplier, MaxTimeoutMs: p.MaxTimeout.Milliseconds(),
	}
}

// ToolPolicy is the operator's configuration of one tool (or of every tool
// matching a pattern): zero fields keep the lower layer's value.
type ToolPolicy struct {
	Permission  baagentv1.ToolPermission
	Timeout     time.Duration
	OutputLevel baagentv1.OutputLevel
	CachePolicy baagentv1.ToolCachePolicy
	Retry       *baagentv1.ToolRetryPolicy
}

// Policies is the `policies:` section of the tools file.
type Policies struct {
	// Defaults apply to every tool below the tool's own Spec.
	Defaults ToolPolicy
	// Tools maps tool names or globs (`mcp__fs__*`) to overrides above the
	// Spec. An exact name wins over globs; among globs the longest wins.
	Tools map[string]ToolPolicy
}

// effective is everything the pipeline needs to know about one tool.
type effective struct {
	permission  baagentv1.ToolPermission
	timeout     time.Duration
	toolLevel   baagentv1.OutputLevel // tool default in the decision chain
	globalLevel baagentv1.OutputLevel // last step of the decision chain
	cache       baagentv1.ToolCachePolicy
	retry       RetryPolicy
}

// resolve layers, lowest first: the built-in defaults, policies.defaults,
// the tool's Spec, the matching policies.tools entry.
func (ps *Policies) resolve(s tool.Spec) effective {
	e := effective{
		permission:  baagentv1.ToolPermission_TOOL_PERMISSION_ALLOW,
		timeout:     DefaultTimeout,
		globalLevel: baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD,
		cache:       baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_NO_CACHE,
		retry:       DefaultRetryPolicy(),
	}
	d := ps.Defaults
	if d.Permission != 0 {
		e.permission = d.Permission
	}
	if d.Timeout > 0 {
		e.timeout = d.Timeout
	}
	if d.OutputLevel != 0 {
		e.globalLevel = d.OutputLevel
	}
	if d.CachePolicy != 0 {
		e.cache = d.CachePolicy
	}
	e.retry = e.retry.overlay(d.Retry)

	if s.Timeout > 0 {
		e.timeout = s.Timeout
	}
	e.toolLevel = s.DefaultOutputLevel
	if s.CachePolicy != 0 {
		e.cache = s.CachePolicy
	}
	e.retry = e.retry.overlay(s.Retry)

	if t, ok := ps.match(s.Name); ok {
		if t.Permission != 0 {
			e.permission = t.Permission
		}
		if t.Timeout > 0 {
			e.timeout = t.Timeout
		}
		if t.OutputLevel != 0 {
			e.toolLevel = t.OutputLevel
		}
		if t.CachePolicy != 0 {
			e.cache = t.CachePolicy
		}
		e.retry = e.retry.overlay(t.Retry)
	}
	e.timeout = min(e.timeout, DefaultMaxTimeout)
	return e
}

// match finds the policies.tools entry for name.
func (ps *Policies) match(name string) (ToolPolicy, bool) {
	if t, ok := ps.Tools[name]; ok {
		return t, true
	}
	best, found := "", false
	for pattern := range ps.Tools {
		if !strings.ContainsAny(pattern, "*?") {
			continue
		}
		if ok, _ := path.Match(pattern, name); !ok {
			continue
		}
		if !found || len(pattern) > len(best) || len(pattern) == len(best) && pattern < best {
			best, found = pattern, true
		}
	}
	if !found {
		return ToolPolicy{}, false
	}
	return ps.Tools[best], true
}

// outputLevel is the decision chain (docs/concepts/output-levels.md): explicit → tool default → BRIEF
// when context usage > 0.8 → the global default (STANDARD).
func outputLevel(explicit, toolDefault baagentv1.OutputLevel, contextUsage float64, global baagentv1.OutputLevel) baagentv1.OutputLevel {
	switch {
	case explicit != baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED:
		return explicit
	case toolDefault != baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED:
		return toolDefault
	case contextUsage > contextUsageBrief:
		return baagentv1.OutputLevel_OUTPUT_LEVEL_BRIEF
	case global != baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED:
		return global
	}
	return baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD
}

// cacheTTL is how long a policy keeps a result; 0 for NO_CACHE.
func cacheTTL(p baagentv1.ToolCachePolicy) time.Duration {
	switch p {
	case baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_CACHEABLE, baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_MEDIUM:
		return time.Hour
	case baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_SHORT:
		return 5 * time.Minute
	case baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_LONG:
		return 24 * time.Hour
	}
	return 0
}

// allowedBy reports whether an allow list (nil = no restriction) admits
// name. artifact_read is always admitted: it only reads what the admitted
// tools of the same conversation produced.
func allowedBy(list *baagentv1.ToolAllowList, name string) bool {
	return name == artifactReadTool || allowlist.Allows(list, name)
}

const artifactReadTool = "artifact_read"
