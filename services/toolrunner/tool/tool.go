// Package tool is the contract between the toolrunner's invoke pipeline and
// the things it runs: built-in tools, ToolProvider servers in any language
// and MCP servers. The pipeline (validation, permissions, idempotency,
// timeouts, retries, output levels, artifacts) lives in the toolrunner; a
// Tool only executes one attempt and says how it failed.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Spec describes a tool to the model and to the pipeline.
type Spec struct {
	// Name is unique within the toolrunner: `file_read`, `mcp__fs__read`.
	Name string
	// Description is shown to the model.
	Description string
	// Version takes part in the idempotency key.
	Version string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// ReadOnly reports that the tool has no side effects. Only read-only
	// tools are ever served from the cache.
	ReadOnly bool
	// DefaultOutputLevel is the tool's default in the output-level decision
	// chain; UNSPECIFIED means none.
	DefaultOutputLevel baagentv1.OutputLevel
	// CachePolicy is the tool's default cache policy (NO_CACHE when unset).
	CachePolicy baagentv1.ToolCachePolicy
	// Retry overrides the default retry policy; nil keeps the default.
	Retry *baagentv1.ToolRetryPolicy
	// Timeout of one attempt; zero keeps the default.
	Timeout time.Duration
	// Source is where the tool comes from: `builtin`, `provider:<name>`,
	// `mcp:<server>`.
	Source string
}

// Call is one attempt of one invocation, after validation.
type Call struct {
	// ToolCallID is the model's id, passed through unchanged.
	ToolCallID string
	// Tenant, ConversationID and RunID identify the caller's context.
	Tenant         string
	ConversationID string
	RunID          string
	// CallerID is the caller's identity from the request.
	CallerID string
	// Args is the arguments object, already validated against
	// Spec.Parameters.
	Args map[string]any
	// Attempt is 0 for the first attempt.
	Attempt int
	// IdempotencyKey of the invocation, for tools that deduplicate writes.
	IdempotencyKey string
	// Workspace is the conversation's workspace directory. Built-in tools
	// must not leave it; external tools may ignore it.
	Workspace *os.Root
	// QuotaWrite, when set, is how a tool makes each change to Workspace:
	// it runs write, which creates or replaces the file name (a path in
	// Workspace) with size bytes, if the tenant's workspace quota has room,
	// and accounts for the change. A refusal is a non-retryable *Error with
	// code QUOTA_EXCEEDED, and write does not run. Nil: no quota.
	QuotaWrite func(name string, size int64, write func() error) error
}

// Result is what a successful attempt produced.
type Result struct {
	// Data is a JSON-compatible value (map[string]any, []any, string,
	// float64/int64, bool, nil) that the pipeline formats at the effective
	// output level and stores as an artifact when large.
	Data any
}

// Generic turns any JSON-compatible value (typed slices, structs) into the
// generic JSON shapes (map[string]any, []any, string, float64, bool, nil) by
// a round trip; values that are already generic pass through. A value JSON
// cannot encode becomes its fmt.Sprint text.
func Generic(v any) any {
	switch v.(type) {
	case nil, string, bool, float64, []any, map[string]any:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	return out
}

// Tool executes one attempt of a call.
type Tool interface {
	Spec() Spec
	// Execute runs one attempt. ctx carries the attempt's deadline. A
	// failure should be an *Error so that the pipeline can decide on a
	// retry; any other error is treated as an EXECUTION_ERROR (not retried),
	// and a context deadline as a TIMEOUT.
	Execute(ctx context.Context, call Call) (Result, error)
}

// Source is a set of tools that can change while the service runs: an MCP
// server that restarts, a ToolProvider that comes and goes.
type Source interface {
	// Name identifies the source in logs and metrics (`mcp:fs`).
	Name() string
	// Tools returns the tools the source offers now; an unavailable source
	// returns none. Safe for concurrent use.
	Tools() []Tool
}

// Error is a typed tool failure; its Type decides whether the pipeline
// retries.
type Error struct {
	Type    baagentv1.ToolErrorType
	Code    string
	Message string
	Err     error
	// BudgetExhausted reports that the tool stopped because the call used
	// up one of the tool's own budgets (CPU time, memory, bytes scanned) on
	// deterministic work: the same arguments would use it up again, so the
	// pipeline does not retry the call, whatever its Type.
	BudgetExhausted bool
}

// Errorf returns an *Error of type t with a formatted message.
func Errorf(t baagentv1.ToolErrorType, code, format string, args ...any) *Error {
	return &Error{Type: t, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether a retry policy may retry failures of
// type t: only TIMEOUT, RATE_LIMIT, RESOURCE_ERROR and TRANSIENT_ERROR.
func Retryable(t baagentv1.ToolErrorType) bool {
	switch t {
	case baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT,
		baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT,
		baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR,
		baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR:
		return true
	}
	return false
}

// Classify turns any error from Execute into an *Error: an *Error is kept,
// a context deadline becomes TIMEOUT, anything else EXECUTION_ERROR.
func Classify(err error) *Error {
	if err == nil {
		return nil
	}
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, Code: "TIMEOUT", Message: "the tool did not finish in time", Err: err}
	}
	return &Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, Code: "EXECUTION_ERROR", Message: err.Error(), Err: err}
}

// TenantSource is a Source some of whose tools depend on the tenant: an MCP
// server each tenant authorizes with its own OAuth grant. Tools (from
// Source) returns the tools every tenant sees; the methods below add the
// tenant's own.
type TenantSource interface {
	Source
	// TenantTools returns the tools tenant sees now. Safe for concurrent use.
	TenantTools(ctx context.Context, tenant string) []Tool
	// TenantTool returns the tool called name for tenant. A name the source
	// owns but the tenant cannot use yet may still be returned: its Execute
	// then fails with the reason (for example, how to authorize).
	TenantTool(ctx context.Context, tenant, name string) (Tool, bool)
}
