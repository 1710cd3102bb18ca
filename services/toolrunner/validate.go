package toolrunner

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Request limits from the contract and the ToolRetryPolicy.
const (
	// MaxTimeoutMs caps timeout_ms, retry delays and max_timeout_ms (5 min).
	MaxTimeoutMs = 300_000
	// MaxRetries caps ToolRetryPolicy.max_retries.
	MaxRetries = 10
	// MaxMultiplier caps the backoff and timeout multipliers.
	MaxMultiplier = 10.0
	// MaxPatternBytes caps ReadArtifactRequest.pattern.
	MaxPatternBytes = 1024
)

// retryable are the error types a retry policy may name (the
// retryable half of ToolErrorType).
var retryable = map[baagentv1.ToolErrorType]bool{
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT:         true,
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT:      true,
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR:  true,
	baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR: true,
}

// Edge validation of every ToolRunnerService request. Each function returns
// nil or an InvalidArgument status naming every offending field.

func validateInvoke(req *baagentv1.InvokeRequest) error {
	var e validate.Errors
	validateInvocation(&e, "request", req.GetRequest())
	return e.Err()
}

// validateInvocation checks a ToolInvocationRequest. The tool name is checked
// leniently: an unknown or misspelled name (the model wrote it) becomes a
// NOT_FOUND result the model can correct, not an RPC error. tool_call_id is
// required and never generated.
func validateInvocation(e *validate.Errors, f string, r *baagentv1.ToolInvocationRequest) {
	if r == nil {
		e.Add(f, "required")
		return
	}
	validate.ToolCallID(e, f+".tool_call_id", r.GetToolCallId())
	validate.ToolCallName(e, f+".tool_name", r.GetToolName())
	validate.Optional(e, f+".tool_version", r.GetToolVersion(), validate.Version)
	validate.Struct(e, f+".parameters", r.GetParameters())
	validate.Enum(e, f+".output_level", r.GetOutputLevel(), baagentv1.OutputLevel_name, true)
	if t := r.GetTimeoutMs(); t < 0 || t > MaxTimeoutMs {
		e.Addf(f+".timeout_ms", "must be between 0 and %d (0 uses the default of 120000), got %d", MaxTimeoutMs, t)
	}
	validate.Optional(e, f+".storage_dir", r.GetStorageDir(), validate.RelativePath)
	validate.ID(e, f+".caller_id", r.GetCallerId())
	validate.Optional(e, f+".permission_level", r.GetPermissionLevel(), validate.ID)
	validate.Optional(e, f+".idempotency_key", r.GetIdempotencyKey(), validate.IdempotencyKey)
	validate.Enum(e, f+".cache_policy", r.GetCachePolicy(), baagentv1.ToolCachePolicy_name, true)
	validate.Tenant(e, f+".tenant", r.GetTenant())
	validate.ID(e, f+".conversation_id", r.GetConversationId())
	validate.Optional(e, f+".run_id", r.GetRunId(), validate.RunID)
	validate.Range(e, f+".context_usage", r.GetContextUsage(), 0, 1)
	validate.ToolAllowList(e, f+".allowed_tools", r.GetAllowedTools())
	retryPolicy(e, f+".retry_policy", r.GetRetryPolicy())
}

// retryPolicy checks an optional ToolRetryPolicy override. Zero fields take
// the defaults; set fields must be sensible: multipliers 1–10, delays and
// timeouts within 5 minutes, and only retryable error types.
func retryPolicy(e *validate.Errors, f string, p *baagentv1.ToolRetryPolicy) {
	if p == nil {
		return
	}
	if p.MaxRetries != nil {
		validate.Range(e, f+".max_retries", p.GetMaxRetries(), 0, MaxRetries)
	}
	on := p.GetRetryOn()
	validate.MaxItems(e, f+".retry_on", len(on), len(baagentv1.ToolErrorType_name))
	for i, t := range on {
		field := validate.Index(f+".retry_on", i)
		if _, known := baagentv1.ToolErrorType_name[int32(t)]; !known || t == 0 {
			validate.Enum(e, field, t, baagentv1.ToolErrorType_name, false)
			continue
		}
		if !retryable[t] {
			e.Addf(field, "%s is not retryable: only TOOL_ERROR_TYPE_TIMEOUT, TOOL_ERROR_TYPE_RATE_LIMIT, TOOL_ERROR_TYPE_RESOURCE_ERROR and TOOL_ERROR_TYPE_TRANSIENT_ERROR may be retried", t)
		}
	}
	multiplier(e, f+".backoff_multiplier", p.GetBackoffMultiplier())
	validate.Range(e, f+".initial_delay_ms", p.GetInitialDelayMs(), 0, MaxTimeoutMs)
	validate.Range(e, f+".max_delay_ms", p.GetMaxDelayMs(), 0, MaxTimeoutMs)
	if lo, hi := p.GetInitialDelayMs(), p.GetMaxDelayMs(); lo > 0 && hi > 0 && lo > hi {
		e.Addf(f+".max_delay_ms", "must be at least initial_delay_ms (%d), got %d", lo, hi)
	}
	multiplier(e, f+".timeout_multiplier", p.GetTimeoutMultiplier())
	validate.Range(e, f+".max_timeout_ms", p.GetMaxTimeoutMs(), 0, MaxTimeoutMs)
}

// multiplier accepts 0 (the default) or a finite value from 1 to
// [MaxMultiplier]: a multiplier below 1 would shrink delays and timeouts.
func multiplier(e *validate.Errors, field string, v float64) {
	if v != 0 && !(v >= 1 && v <= MaxMultiplier) {
		e.Addf(field, "must be 0 (default) or between 1 and %v, got %v", MaxMultiplier, v)
	}
}

func validateListTools(req *baagentv1.ListToolsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ToolAllowList(&e, "allowed_tools", req.GetAllowedTools())
	return e.Err()
}

// validateReadArtifact: limit above the 2000-line cap is shortened to the cap
// by the reader (the contract says "default and cap"), so only a negative
// limit is refused.
func validateReadArtifact(req *baagentv1.ReadArtifactRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	validate.ArtifactID(&e, "artifact_id", req.GetArtifactId())
	validate.NonNegative(&e, "offset", req.GetOffset())
	validate.NonNegative(&e, "limit", req.GetLimit())
	validate.Regexp(&e, "pattern", req.GetPattern(), MaxPatternBytes)
	return e.Err()
}

func validateReleaseConversation(req *baagentv1.ReleaseConversationRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.ID(&e, "conversation_id", req.GetConversationId())
	return e.Err()
}
