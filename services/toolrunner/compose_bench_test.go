package toolrunner

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcserver"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// BenchmarkComposition compares a 2-step sequential composition (step 2
// fed from step 1's data by a selector) with the same two tools invoked
// as two separate calls, in process and over gRPC on loopback.
func BenchmarkComposition(b *testing.B) {
	first := &funcTool{spec: objSpec("first"), fn: ok(map[string]any{"rows": []any{"a", "b"}})}
	second := &funcTool{spec: objSpec("second"), fn: func(_ context.Context, c tool.Call) (tool.Result, error) {
		return tool.Result{Data: c.Args["row"]}, nil
	}}
	s, _ := composeServer(b, `
compositions:
  - name: pair
    description: first then second
    kind: sequential
    steps:
      - {tool: first, args: {q: "$input.q"}}
      - {tool: second, args: {row: "$steps[0].data.rows[1]"}}
`, first, second)

	gs := grpcserver.New(grpcserver.Options{Name: "toolrunner", Addr: "127.0.0.1:0"})
	s.Register(gs.GRPC())
	if err := gs.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	conn, err := grpc.NewClient(gs.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := baagentv1.NewToolRunnerServiceClient(conn)

	type invoker func(*baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error)
	direct := func(r *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) { return s.Invoke(ctx, r) }
	remote := func(r *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) { return client.Invoke(ctx, r) }
	call := func(b *testing.B, inv invoker, r *baagentv1.ToolInvocationRequest) {
		resp, err := inv(&baagentv1.InvokeRequest{Request: r})
		if err != nil || !resp.GetResult().GetSuccess() {
			b.Fatalf("%v %v", err, resp.GetResult().GetObservation())
		}
	}
	for _, tr := range []struct {
		name string
		inv  invoker
	}{{"inprocess", direct}, {"grpc", remote}} {
		call(b, tr.inv, req("pair", map[string]any{"q": "x"})) // warm up: the workspace
		b.Run(tr.name+"/composition", func(b *testing.B) {
			r := req("pair", map[string]any{"q": "x"})
			for b.Loop() {
				call(b, tr.inv, r)
			}
		})
		b.Run(tr.name+"/separate", func(b *testing.B) {
			r1, r2 := req("first", map[string]any{"q": "x"}), req("second", map[string]any{"row": "b"})
			r1.CachePolicy = baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_NO_CACHE
			r2.CachePolicy = baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_NO_CACHE
			for b.Loop() {
				call(b, tr.inv, r1)
				call(b, tr.inv, r2)
			}
		})
	}
}
