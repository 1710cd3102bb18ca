// Package toolerror writes the observation a model reads when a tool call
// fails. The orchestrator (for calls that never reached a tool) and the
// toolrunner (for calls that did) must write it the same way, so that the
// model sees one format. See docs/concepts/errors-and-retries.md.
package toolerror

import (
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Defaults for the parts a failure may lack.
const (
	UnknownType    = "Unknown"
	UnknownCode    = "UNKNOWN"
	UnknownMessage = "An unknown error occurred"
)

// TypeName is t as the observation names it: the enum's suffix in lowercase
// ("timeout", "permission", …), or UnknownType when unspecified.
func TypeName(t baagentv1.ToolErrorType) string {
	if t == baagentv1.ToolErrorType_TOOL_ERROR_TYPE_UNSPECIFIED {
		return UnknownType
	}
	return strings.ToLower(strings.TrimPrefix(t.String(), "TOOL_ERROR_TYPE_"))
}

// Observation is the standard failure observation of tool call callID.
func Observation(callID string, t baagentv1.ToolErrorType, code, msg string) string {
	if code == "" {
		code = UnknownCode
	}
	if msg == "" {
		msg = UnknownMessage
	}
	return "Operation failed.\n\n" +
		"Error Type: " + TypeName(t) + "\n" +
		"Error Code: " + code + "\n" +
		"Error Message: " + msg + "\n\n" +
		"Tool Call ID: " + callID
}
