package external

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

func TestGRPCError(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	cases := []struct {
		code      codes.Code
		msg       string
		want      errType
		retryable bool
	}{
		{codes.DeadlineExceeded, "", typeTimeout, true},
		{codes.Unavailable, "connection refused", typeTransient, true},
		{codes.Aborted, "", typeTransient, true},
		{codes.ResourceExhausted, "quota", typeRateLimit, true},
		{codes.ResourceExhausted, "grpc: received message larger than max (20 vs. 16)", typeExecution, false},
		{codes.InvalidArgument, "amount", typeInvalid, false},
		{codes.OutOfRange, "", typeInvalid, false},
		{codes.NotFound, "", typeNotFound, false},
		{codes.PermissionDenied, "", typePermission, false},
		{codes.Unauthenticated, "", typePermission, false},
		{codes.FailedPrecondition, "", typeExecution, false},
		{codes.Unimplemented, "", typeDependency, false},
		{codes.Internal, "boom", typeDependency, false},
		{codes.Unknown, "", typeDependency, false},
		{codes.DataLoss, "", typeDependency, false},
		{codes.Canceled, "", typeExecution, false},
	}
	for _, c := range cases {
		te := grpcError(ctx, "fx", status.Error(c.code, c.msg))
		if te.Type != c.want || tool.Retryable(te.Type) != c.retryable {
			t.Errorf("%v %q: %v (retryable %v), want %v", c.code, c.msg, te.Type, tool.Retryable(te.Type), c.want)
		}
		if te.Code == "" || te.Message == "" && c.msg != "" {
			t.Errorf("%v: empty code or message: %+v", c.code, te)
		}
	}
	// The attempt's own deadline wins over the status the transport chose.
	dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-dctx.Done()
	if te := grpcError(dctx, "fx", status.Error(codes.Canceled, "")); te.Type != typeTimeout {
		t.Errorf("deadline passed: %v, want TIMEOUT", te.Type)
	}
	cctx, cancel2 := context.WithCancel(ctx)
	cancel2()
	if te := grpcError(cctx, "fx", status.Error(codes.Unavailable, "")); te.Type != typeExecution || te.Code != "CANCELLED" {
		t.Errorf("cancelled: %+v, want EXECUTION_ERROR/CANCELLED (not retried)", te)
	}
	long := strings.Repeat("é", maxErrorMessage)
	if te := grpcError(ctx, "fx", status.Error(codes.Internal, long)); len(te.Message) > maxErrorMessage+100 {
		t.Errorf("message not bounded: %d bytes", len(te.Message))
	}
}

func TestProviderError(t *testing.T) {
	t.Parallel()

	te := providerError(&baagentv1.ToolError{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT, Code: "SLOW_DOWN", Message: "later"})
	if te.Type != typeRateLimit || te.Code != "SLOW_DOWN" || te.Message != "later" {
		t.Errorf("kept fields: %+v", te)
	}
	te = providerError(&baagentv1.ToolError{})
	if te.Type != typeExecution || te.Code != "EXECUTION_ERROR" || te.Message == "" {
		t.Errorf("unset type: %+v", te)
	}
	te = providerError(&baagentv1.ToolError{Type: 999, Message: "x"})
	if te.Type != typeExecution {
		t.Errorf("unknown type: %+v", te)
	}
}

func TestMCPError(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	wire := func(code int64) error {
		return fmt.Errorf("calling tools/call: %w", &jsonrpc.Error{Code: code, Message: "m"})
	}
	cases := []struct {
		err      error
		readOnly bool
		want     errType
	}{
		{wire(jsonrpc.CodeInvalidParams), false, typeInvalid},
		{wire(jsonrpc.CodeMethodNotFound), false, typeNotFound},
		{wire(codeLegacyResourceNotFound), false, typeNotFound},
		{wire(jsonrpc.CodeInternalError), false, typeExecution},
		{wire(-1), false, typeExecution},
		{fmt.Errorf("x: %w", mcp.ErrConnectionClosed), true, typeTransient},
		{fmt.Errorf("x: %w", mcp.ErrConnectionClosed), false, typeDependency},
		{errors.New("EOF"), true, typeTransient},
		{context.DeadlineExceeded, false, typeTimeout},
	}
	for _, c := range cases {
		if te := mcpError(ctx, "fs", c.readOnly, c.err); te.Type != c.want {
			t.Errorf("%v (readOnly %v): %v, want %v", c.err, c.readOnly, te.Type, c.want)
		}
	}
	if te := unavailable("mcp:fs"); !tool.Retryable(te.Type) {
		t.Errorf("a call while the server restarts must be retryable: %+v", te)
	}
}

func TestCallResult(t *testing.T) {
	t.Parallel()

	text := func(s string) mcp.Content { return &mcp.TextContent{Text: s} }
	res, err := callResult(&mcp.CallToolResult{Content: []mcp.Content{text("hello")}})
	if err != nil || res.Data != "hello" {
		t.Errorf("one text: %v, %v", res.Data, err)
	}
	res, _ = callResult(&mcp.CallToolResult{Content: []mcp.Content{text("a"), &mcp.ImageContent{Data: make([]byte, 10), MIMEType: "image/png"}}})
	items, ok := res.Data.([]any)
	if !ok || len(items) != 2 || items[0] != "a" {
		t.Fatalf("two items: %#v", res.Data)
	}
	if img := items[1].(map[string]any); img["type"] != "image" || img["bytes"] != int64(10) || img["mime_type"] != "image/png" {
		t.Errorf("image: %v", img)
	}
	res, _ = callResult(&mcp.CallToolResult{Content: []mcp.Content{text(`{"x":1}`)}, StructuredContent: map[string]any{"x": 1.0}})
	if m, ok := res.Data.(map[string]any); !ok || m["x"] != 1.0 {
		t.Errorf("structured content should win: %#v", res.Data)
	}
	res, _ = callResult(&mcp.CallToolResult{StructuredContent: struct{ N int }{3}})
	if m, ok := res.Data.(map[string]any); !ok || m["N"] != 3.0 {
		t.Errorf("non-JSON structured content normalised: %#v", res.Data)
	}
	res, _ = callResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a", Text: "body"}}}})
	if m := res.Data.(map[string]any); m["text"] != "body" || m["uri"] != "file:///a" {
		t.Errorf("embedded resource: %v", m)
	}
	res, err = callResult(&mcp.CallToolResult{})
	if err != nil || res.Data != nil {
		t.Errorf("empty: %v, %v", res.Data, err)
	}
	_, err = callResult(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("no such file")}})
	te := tool.Classify(err)
	if te.Type != typeExecution || te.Code != "MCP_TOOL_ERROR" || te.Message != "no such file" {
		t.Errorf("isError: %+v", te)
	}
	_, err = callResult(&mcp.CallToolResult{IsError: true})
	if te := tool.Classify(err); te.Message == "" {
		t.Errorf("isError without text needs a message: %+v", te)
	}
	if _, err := callResult(nil); tool.Classify(err).Type != typeDependency {
		t.Errorf("nil result: %v", err)
	}
}

func TestInputSchema(t *testing.T) {
	t.Parallel()

	if b, err := inputSchema(nil); err != nil || string(b) != `{"type":"object"}` {
		t.Errorf("nil: %s %v", b, err)
	}
	if b, err := inputSchema(map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}); err != nil || !strings.Contains(string(b), `"a"`) {
		t.Errorf("object: %s %v", b, err)
	}
	for _, bad := range []any{map[string]any{"type": "string"}, []any{1}, "x"} {
		if _, err := inputSchema(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestReconnectBackoffDefaults: a zero Backoff reconnects after 500 ms
// doubling up to 30 s, with ±20% jitter; set fields are kept.
func TestReconnectBackoffDefaults(t *testing.T) {
	t.Parallel()

	b := reconnectBackoff(retry.Backoff{})
	if b.Initial != 500*time.Millisecond || b.Max != 30*time.Second || b.Multiplier != 2 || b.Jitter != 0.2 {
		t.Errorf("defaults %+v", b)
	}
	for i := range 50 {
		if j := b.Jittered(3); j < 3200*time.Millisecond || j > 4800*time.Millisecond {
			t.Fatalf("try %d: Jittered(3) = %v, outside ±20%% of 4s", i, j)
		}
	}
	set := retry.Backoff{Initial: time.Second, Max: 2 * time.Second, Multiplier: 3, Jitter: 0.5}
	if got := reconnectBackoff(set); got != set {
		t.Errorf("set fields changed: %+v", got)
	}
}
