package external

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// codeLegacyResourceNotFound is the resource-not-found code of MCP servers
// older than SEP-2164 (newer ones answer InvalidParams).
const codeLegacyResourceNotFound = -32002

// maxErrorMessage bounds an error message taken from a remote server.
const maxErrorMessage = 4096

type errType = baagentv1.ToolErrorType

const (
	typeTimeout    = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT
	typeRateLimit  = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT
	typeResource   = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR
	typeTransient  = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR
	typePermission = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED
	typeInvalid    = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS
	typeNotFound   = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND
	typeExecution  = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR
	typeDependency = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_DEPENDENCY_ERROR
)

// contextError maps the end of the attempt's context: its deadline is a
// TIMEOUT (retried with a longer timeout); a cancellation means the caller
// gave up, which is not retried.
func contextError(ctx context.Context, err error) *tool.Error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &tool.Error{Type: typeTimeout, Code: "TIMEOUT", Message: "the tool did not finish in time", Err: err}
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return &tool.Error{Type: typeExecution, Code: "CANCELLED", Message: "the call was cancelled", Err: err}
	}
	return nil
}

// grpcError maps a failed ExecuteTool RPC to a typed tool error. Unavailable
// and Aborted are retried (gRPC reports Unavailable when the call could not
// reach the provider); codes that mean the provider misbehaved are
// DEPENDENCY_ERROR, which is not retried.
func grpcError(ctx context.Context, provider string, err error) *tool.Error {
	if te := contextError(ctx, err); te != nil {
		return te
	}
	st, _ := status.FromError(err)
	msg := clipMessage(st.Message())
	mk := func(t errType, code, text string) *tool.Error {
		return &tool.Error{Type: t, Code: code, Message: text, Err: err}
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return mk(typeTimeout, "TIMEOUT", "the tool provider did not answer in time")
	case codes.Canceled:
		return mk(typeExecution, "CANCELLED", "the call was cancelled")
	case codes.Unavailable:
		return mk(typeTransient, "PROVIDER_UNAVAILABLE", "tool provider "+provider+" is unavailable: "+msg)
	case codes.Aborted:
		return mk(typeTransient, "ABORTED", msg)
	case codes.ResourceExhausted:
		if strings.Contains(msg, "larger than max") {
			return mk(typeExecution, "RESULT_TOO_LARGE", "the tool provider's answer is too large: "+msg)
		}
		return mk(typeRateLimit, "RATE_LIMITED", msg)
	case codes.InvalidArgument, codes.OutOfRange:
		return mk(typeInvalid, "INVALID_PARAMETERS", msg)
	case codes.NotFound:
		return mk(typeNotFound, "NOT_FOUND", msg)
	case codes.PermissionDenied, codes.Unauthenticated:
		return mk(typePermission, "PERMISSION_DENIED", msg)
	case codes.FailedPrecondition:
		return mk(typeExecution, "FAILED_PRECONDITION", msg)
	case codes.AlreadyExists:
		return mk(typeExecution, "ALREADY_EXISTS", msg)
	case codes.Unimplemented:
		return mk(typeDependency, "PROVIDER_UNIMPLEMENTED", "tool provider "+provider+" does not implement ExecuteTool: "+msg)
	default: // Internal, Unknown, DataLoss
		return mk(typeDependency, "PROVIDER_ERROR", "tool provider "+provider+" failed: "+msg)
	}
}

// providerError maps a ToolError a provider returned. An unset type is an
// EXECUTION_ERROR: the tool ran and failed.
func providerError(e interface {
	GetType() baagentv1.ToolErrorType
	GetCode() string
	GetMessage() string
}) *tool.Error {
	t := e.GetType()
	if _, known := baagentv1.ToolErrorType_name[int32(t)]; !known || t == baagentv1.ToolErrorType_TOOL_ERROR_TYPE_UNSPECIFIED {
		t = typeExecution
	}
	code := clipMessage(e.GetCode())
	if code == "" {
		code = strings.TrimPrefix(t.String(), "TOOL_ERROR_TYPE_")
	}
	msg := clipMessage(e.GetMessage())
	if msg == "" {
		msg = "the tool failed without a message"
	}
	return &tool.Error{Type: t, Code: code, Message: msg}
}

// mcpError maps a failed tools/call. A JSON-RPC error is the server's
// answer; anything else means the connection failed. After a connection
// failure a read-only call is safe to retry (TRANSIENT_ERROR, once the server
// is back); a call with side effects may have run, so it is a
// DEPENDENCY_ERROR that is not retried.
func mcpError(ctx context.Context, server string, readOnly bool, err error) *tool.Error {
	if te := contextError(ctx, err); te != nil {
		return te
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		msg := clipMessage(we.Message)
		switch we.Code {
		case jsonrpc.CodeInvalidParams:
			return &tool.Error{Type: typeInvalid, Code: "INVALID_PARAMETERS", Message: msg, Err: err}
		case jsonrpc.CodeMethodNotFound, codeLegacyResourceNotFound:
			return &tool.Error{Type: typeNotFound, Code: "NOT_FOUND", Message: msg, Err: err}
		case jsonrpc.CodeInternalError:
			return &tool.Error{Type: typeExecution, Code: "MCP_INTERNAL_ERROR", Message: msg, Err: err}
		default:
			return &tool.Error{Type: typeExecution, Code: "MCP_ERROR", Message: msg, Err: err}
		}
	}
	msg := "lost the connection to MCP server " + server + ": " + clipMessage(err.Error())
	if readOnly {
		return &tool.Error{Type: typeTransient, Code: "MCP_CONNECTION_LOST", Message: msg, Err: err}
	}
	return &tool.Error{Type: typeDependency, Code: "MCP_CONNECTION_LOST", Message: msg + " (the call may have run; not retried because the tool has side effects)", Err: err}
}

// unavailable is the error of a call made while the source is down (between
// a crash and the restart): nothing was sent, so it is safe to retry.
func unavailable(source string) *tool.Error {
	return &tool.Error{Type: typeResource, Code: "SOURCE_UNAVAILABLE", Message: source + " is not connected; it is being restarted"}
}

// clipMessage bounds a remote message and keeps it valid UTF-8.
func clipMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorMessage {
		return s
	}
	cut := maxErrorMessage
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
