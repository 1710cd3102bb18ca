package grpcinproc

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// windowEcho answers BuildWindow with the request's system messages and a
// history of twenty messages: the size of a mid-run window.
type windowEcho struct {
	baagentv1.UnimplementedContextServiceServer
	history []*baagentv1.WindowMessage
}

func (w *windowEcho) BuildWindow(_ context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	resp := &baagentv1.BuildWindowResponse{ContextUsage: 0.2}
	for _, m := range req.GetSystemMessages() {
		resp.Messages = append(resp.Messages, &baagentv1.WindowMessage{Message: m})
	}
	resp.Messages = append(resp.Messages, w.history...)
	return resp, nil
}

// BenchmarkUnaryCall compares one BuildWindow-sized call in-process with
// the same call over loopback gRPC (what -target=all did before).
func BenchmarkUnaryCall(b *testing.B) {
	echo := &windowEcho{}
	for i := range 20 {
		echo.history = append(echo.history, &baagentv1.WindowMessage{Message: &baagentv1.ChatMessage{
			Id: fmt.Sprintf("m%d", i), Role: baagentv1.Role_ROLE_TOOL, Content: fmt.Sprintf("row %d: category=Software revenue=%d", i, 1000*i),
		}})
	}
	req := &baagentv1.BuildWindowRequest{
		Tenant: "t", ConversationId: "c", Model: "scripted",
		SystemMessages: []*baagentv1.ChatMessage{{Role: baagentv1.Role_ROLE_SYSTEM, Content: "You are a business analyst. Use the tools."}},
	}

	ch := New(Options{})
	baagentv1.RegisterContextServiceServer(ch, echo)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterContextServiceServer(gs, echo)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()

	for _, v := range []struct {
		name string
		conn grpc.ClientConnInterface
	}{{"inproc", ch}, {"loopback", conn}} {
		b.Run(v.name, func(b *testing.B) {
			client := baagentv1.NewContextServiceClient(v.conn)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.BuildWindow(ctx, req)
				if err != nil || len(resp.GetMessages()) != 21 {
					b.Fatalf("BuildWindow: %d messages, %v", len(resp.GetMessages()), err)
				}
			}
		})
	}
}
