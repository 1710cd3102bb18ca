package external

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/mcpws"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// noopProvider serves one tool, `noop`, that returns its arguments.
type noopProvider struct {
	baagentv1.UnimplementedToolProviderServiceServer
}

func (noopProvider) DescribeTools(context.Context, *baagentv1.DescribeToolsRequest) (*baagentv1.DescribeToolsResponse, error) {
	return &baagentv1.DescribeToolsResponse{Tools: []*baagentv1.ToolDefinition{{
		Schema:   &baagentv1.ToolSchema{Name: "noop", Description: "Returns its arguments."},
		ReadOnly: true,
	}}}, nil
}

func (noopProvider) ExecuteTool(_ context.Context, req *baagentv1.ExecuteToolRequest) (*baagentv1.ExecuteToolResponse, error) {
	return &baagentv1.ExecuteToolResponse{Outcome: &baagentv1.ExecuteToolResponse_Data{Data: structpb.NewStructValue(req.GetParameters())}}, nil
}

// BenchmarkProviderExecute measures one ExecuteTool round trip through a
// provider tool over gRPC on loopback: the external-tool share of an Invoke.
func BenchmarkProviderExecute(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterToolProviderServiceServer(gs, noopProvider{})
	go gs.Serve(lis)
	defer gs.Stop()

	m, err := New(Config{Providers: []ProviderConfig{{Name: "bench", Address: lis.Addr().String()}}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	src := m.Sources()[0]
	testkit.Eventually(b, 10*time.Second, "the provider up", func() bool { return len(src.Tools()) > 0 })
	noop := src.Tools()[0]
	call := tool.Call{ToolCallID: "call_1", Args: map[string]any{"region": "EMEA", "limit": 10.0}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := noop.Execute(actx, call); err != nil {
			b.Fatal(err)
		}
		acancel()
	}
}

// BenchmarkMCPCall measures one tool call (the `echo` tool of an in-process
// SDK server on loopback) through the toolrunner's MCP client over each
// network transport.
func BenchmarkMCPCall(b *testing.B) {
	server := sdkServer()
	get := func(*http.Request) *mcp.Server { return server }
	for _, tc := range []struct {
		transport Transport
		handler   http.Handler
		path      string
	}{
		{TransportStreamable, mcp.NewStreamableHTTPHandler(get, nil), "/mcp"},
		{TransportSSE, mcp.NewSSEHandler(get, nil), "/sse"},
		{TransportWebSocket, &mcpws.Handler{GetServer: get}, "/mcp"},
	} {
		b.Run(string(tc.transport), func(b *testing.B) {
			hs := httptest.NewServer(tc.handler)
			defer hs.Close()
			cfg := Config{MCPServers: []MCPServerConfig{{Name: "bench", Transport: tc.transport, HTTP: &HTTPConfig{URL: hs.URL + tc.path}}}}
			m, err := New(cfg, Options{KeepAlive: -1})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- m.Run(ctx) }()
			defer func() { cancel(); <-done }()
			src := m.Sources()[0]
			testkit.Eventually(b, 10*time.Second, "the server up", func() bool { return toolNamed(src, "mcp__bench__echo") != nil })
			echo := toolNamed(src, "mcp__bench__echo")
			call := tool.Call{ToolCallID: "call_1", Args: map[string]any{"message": "hello"}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				if _, err := echo.Execute(actx, call); err != nil {
					b.Fatal(err)
				}
				acancel()
			}
		})
	}
}
