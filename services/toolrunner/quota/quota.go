// Package quota holds what the toolrunner's per-tenant disk quotas share:
// the refusal error (QUOTA_EXCEEDED, never retried: a retry cannot free
// space) and how its settings read (0 takes the default, negative means no
// quota). The accounting itself lives with what it accounts for: the
// workspaces in the toolrunner, the artifacts in the artifact store.
package quota

import (
	"fmt"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Code is the tool error code of a refusal.
const Code = "QUOTA_EXCEEDED"

// Kinds of quota, also the values of the metric label `kind`.
const (
	Workspace = "workspace"
	Artifact  = "artifact"
)

// Error is a write refused because it would take a tenant past its quota.
// Nothing was written.
type Error struct {
	// Kind is Workspace or Artifact.
	Kind   string
	Tenant string
	// Limit is the quota, Used the tenant's usage (in-flight writes
	// included) and Want the bytes the refused write needed.
	Limit, Used, Want int64
	// What names the refused write for the message ("this write").
	What string
}

func (e *Error) Error() string {
	what := e.What
	if what == "" {
		what = "this write"
	}
	var head string
	if e.Want > e.Limit {
		head = fmt.Sprintf("the %s quota of tenant %q is %s and %s needs %s, more than the whole quota",
			e.Kind, e.Tenant, Size(e.Limit), what, Size(e.Want))
	} else {
		head = fmt.Sprintf("tenant %q has used %s of its %s quota of %s and %s needs %s more",
			e.Tenant, Size(e.Used), e.Kind, Size(e.Limit), what, Size(e.Want))
	}
	advice := "ask for a smaller result (filter, limit or aggregate the data), or ask the operator to raise the tenant's artifact quota"
	if e.Kind == Workspace {
		advice = "free space by overwriting workspace files that are no longer needed with shorter content, or ask the operator " +
			"to raise the tenant's workspace quota (the workspaces of released and long idle conversations are removed automatically)"
	}
	return head + "; nothing was stored and retrying will not help: " + advice + "."
}

// ToolError is e as the tool failure the model sees. EXECUTION_ERROR, not
// RESOURCE_ERROR: the retry policy retries RESOURCE_ERROR, and a retry of
// a refused write is refused again.
func (e *Error) ToolError() *tool.Error {
	return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, Code: Code, Message: e.Error(), Err: e}
}

// Limit resolves a quota setting: 0 takes def, a negative value means no
// quota (returned as 0).
func Limit(setting, def int64) int64 {
	switch {
	case setting == 0:
		return def
	case setting < 0:
		return 0
	}
	return setting
}

// Size formats n bytes for a message: 1.5 GiB, 300 KiB, 12 bytes.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
