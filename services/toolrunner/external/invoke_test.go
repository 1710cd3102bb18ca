package external

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner"
)

// TestInvokeExternalTools wires the Manager into the toolrunner service as
// the application does and calls a third-party MCP server's tools and a
// second-process ToolProvider's tools through ListTools and Invoke over gRPC
// on loopback.
func TestInvokeExternalTools(t *testing.T) {
	t.Parallel()

	node, script := everythingServer(t)
	addr := freeAddr(t)
	startToolProvider(t, buildToolProvider(t), addr)

	dir := t.TempDir()
	cfg, err := Parse([]byte(`
providers:
  - {name: fx, address: '`+addr+`'}
mcp_servers:
  - name: ev
    stdio: {command: '`+node+`', args: ['`+script+`', stdio]}
    tools: [echo, get-sum]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	srv, err := toolrunner.New(toolrunner.Options{
		Logger:       testLogger(t),
		WorkspaceDir: filepath.Join(dir, "ws"),
		ArtifactDir:  filepath.Join(dir, "artifacts"),
		Sources:      m.Sources(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := baagentv1.NewToolRunnerServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	sources := map[string]string{}
	testkit.Eventually(t, 30*time.Second, "ListTools to show the external tools", func() bool {
		resp, err := client.ListTools(ctx, &baagentv1.ListToolsRequest{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.GetTools() {
			sources[d.GetSchema().GetName()] = d.GetSource()
		}
		return sources["mcp__ev__get-sum"] != "" && sources["convert_currency"] != ""
	})
	if sources["mcp__ev__echo"] != "mcp:ev" || sources["business_days"] != "provider:fx" || sources["file_read"] != "builtin" {
		t.Fatalf("sources = %v", sources)
	}

	invoke := func(id, name string, args map[string]any) *baagentv1.ToolExecutionResult {
		t.Helper()
		p, err := structpb.NewStruct(args)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Invoke(ctx, &baagentv1.InvokeRequest{Request: &baagentv1.ToolInvocationRequest{
			ToolCallId: id, ToolName: name, Parameters: p, CallerId: "agent", Tenant: "acme", ConversationId: "conv-1",
		}})
		if err != nil {
			t.Fatalf("Invoke %s: %v", name, err)
		}
		if resp.GetResult().GetToolCallId() != id {
			t.Fatalf("tool_call_id %q, want %q", resp.GetResult().GetToolCallId(), id)
		}
		return resp.GetResult()
	}

	r := invoke("call_sum", "mcp__ev__get-sum", map[string]any{"a": 19, "b": 23})
	if !r.GetSuccess() || !strings.Contains(r.GetObservation(), "42") {
		t.Fatalf("get-sum: %v", r)
	}
	r = invoke("call_fx", "convert_currency", map[string]any{"amount": 100, "from": "EUR", "to": "GBP"})
	if !r.GetSuccess() || !strings.Contains(r.GetObservation(), "83") {
		t.Fatalf("convert_currency: %v", r)
	}
	// The pipeline validates arguments against the MCP tool's inputSchema.
	r = invoke("call_bad", "mcp__ev__echo", map[string]any{"msg": "x"})
	if r.GetSuccess() || r.GetErrorType() == baagentv1.ToolErrorType_TOOL_ERROR_TYPE_UNSPECIFIED || r.GetRetryCount() != 0 {
		t.Fatalf("echo without message: %v", r)
	}
	// A provider's typed error reaches the caller as the standard error
	// observation.
	r = invoke("call_cur", "convert_currency", map[string]any{"amount": 1, "from": "EUR", "to": "XAU"})
	if r.GetSuccess() || r.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND || r.GetErrorCode() != "UNKNOWN_CURRENCY" {
		t.Fatalf("unknown currency: %v", r)
	}
}
