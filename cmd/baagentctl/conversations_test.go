package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// convGateway answers the conversation RPCs for one conversation, conv-1,
// and records the API keys it was called with.
type convGateway struct {
	baagentv1.UnimplementedGatewayServiceServer
	mu      sync.Mutex
	keys    []string
	deleted bool
}

func (g *convGateway) seen(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys = append(g.keys, strings.Join(md.Get("authorization"), ","))
}

var testConversation = &baagentv1.Conversation{
	ConversationId: "conv-1", Title: "Which region grew fastest?", RunCount: 2, LastRunId: "run_2",
	State: baagentv1.ConversationState_CONVERSATION_STATE_ACTIVE, CreatedAt: timestamppb.New(time.Unix(1700000000, 0)), LastActivityAt: timestamppb.New(time.Unix(1700000100, 0)),
}

func (g *convGateway) ListConversations(ctx context.Context, req *baagentv1.GatewayServiceListConversationsRequest) (*baagentv1.GatewayServiceListConversationsResponse, error) {
	g.seen(ctx)
	if req.GetPageSize() > 500 {
		return nil, status.Error(codes.InvalidArgument, "page_size: must be between 0 and 500")
	}
	return &baagentv1.GatewayServiceListConversationsResponse{Conversations: []*baagentv1.Conversation{testConversation}, NextPageToken: "tok2"}, nil
}

func (g *convGateway) GetConversation(ctx context.Context, req *baagentv1.GatewayServiceGetConversationRequest) (*baagentv1.GatewayServiceGetConversationResponse, error) {
	g.seen(ctx)
	if req.GetConversationId() != "conv-1" {
		return nil, status.Errorf(codes.NotFound, "conversation %s not found", req.GetConversationId())
	}
	return &baagentv1.GatewayServiceGetConversationResponse{Conversation: testConversation}, nil
}

func (g *convGateway) GetConversationMessages(ctx context.Context, _ *baagentv1.GatewayServiceGetConversationMessagesRequest) (*baagentv1.GatewayServiceGetConversationMessagesResponse, error) {
	g.seen(ctx)
	return &baagentv1.GatewayServiceGetConversationMessagesResponse{TotalCount: 3, Messages: []*baagentv1.ChatMessage{
		{Role: baagentv1.Role_ROLE_USER, Content: "Which region grew fastest?"},
		{Role: baagentv1.Role_ROLE_ASSISTANT, Content: "Let me query.", ToolCalls: []*baagentv1.ToolCall{{Id: "c1", Name: "sql_query"}}},
		{Role: baagentv1.Role_ROLE_TOOL, ToolCallId: "c1", Content: "| region | growth |"},
	}}, nil
}

func (g *convGateway) EndConversation(ctx context.Context, _ *baagentv1.GatewayServiceEndConversationRequest) (*baagentv1.GatewayServiceEndConversationResponse, error) {
	g.seen(ctx)
	return nil, status.Error(codes.FailedPrecondition, "run run_2 of conversation conv-1 is running; cancel it or wait for it to end")
}

func (g *convGateway) DeleteConversation(ctx context.Context, _ *baagentv1.GatewayServiceDeleteConversationRequest) (*baagentv1.GatewayServiceDeleteConversationResponse, error) {
	g.seen(ctx)
	g.mu.Lock()
	g.deleted = true
	g.mu.Unlock()
	return &baagentv1.GatewayServiceDeleteConversationResponse{RunsDeleted: 2, EventsDeleted: 40, MessagesDeleted: 8, ArtifactsDeleted: 1, BytesFreed: 3 << 20}, nil
}

func TestConversationsCommands(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &convGateway{}
	srv := grpc.NewServer()
	baagentv1.RegisterGatewayServiceServer(srv, g)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	env := map[string]string{"BAAGENT_ADDR": lis.Addr().String(), "BAAGENT_API_KEY": "test-key-0123456789"}
	run := func(args ...string) (int, string, string) { return ctlRun(testCtx(t), env, args[0], args[1:]...) }

	code, out, errOut := run("conversations", "list")
	if code != 0 || !strings.Contains(out, "CONVERSATION_ID") || !strings.Contains(out, "conv-1           active  2") ||
		!strings.Contains(out, "baagentctl conversations list --page-token tok2") {
		t.Errorf("list: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = run("conversations", "list", "-o", "json")
	var list struct {
		Conversations []struct {
			ConversationID string `json:"conversation_id"`
			State          string `json:"state"`
		} `json:"conversations"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Conversations) != 1 || list.Conversations[0].State != "CONVERSATION_STATE_ACTIVE" {
		t.Errorf("list -o json: exit %d\n%s", code, out)
	}
	if code, _, errOut := run("conversations", "list", "--page-size", "501"); code != 1 || !strings.Contains(errOut, "page_size") {
		t.Errorf("list --page-size 501: exit %d, %q", code, errOut)
	}
	code, out, _ = run("conversations", "show", "conv-1")
	if code != 0 || !strings.Contains(out, "Which region grew fastest?") || !strings.Contains(out, "run_2") {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	if code, _, errOut := run("conversations", "show", "conv-x"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("show unknown: exit %d, %q", code, errOut)
	}
	code, out, _ = run("conversations", "history", "conv-1")
	if code != 0 || !strings.Contains(out, "[user] Which region grew fastest?") || !strings.Contains(out, "calls: sql_query") ||
		!strings.Contains(out, "[tool c1] | region | growth |") || !strings.Contains(out, "3 of 3 messages") {
		t.Errorf("history: exit %d\n%s", code, out)
	}
	if code, _, errOut := run("conversations", "end", "conv-1"); code != 1 || !strings.Contains(errOut, "is running") {
		t.Errorf("end refused: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run("conversations", "rm", "conv-1"); code != 2 || !strings.Contains(errOut, "--yes") {
		t.Errorf("rm without --yes: exit %d, %q", code, errOut)
	}
	g.mu.Lock()
	deleted := g.deleted
	g.mu.Unlock()
	if deleted {
		t.Fatal("rm without --yes deleted the conversation")
	}
	code, out, _ = run("conversations", "rm", "conv-1", "--yes")
	if code != 0 || !strings.Contains(out, "2 runs, 40 events, 8 messages, 1 artifacts, 3.0 MiB freed") {
		t.Errorf("rm --yes: exit %d\n%s", code, out)
	}
	if code, _, errOut := run("conversations", "show"); code != 2 || !strings.Contains(errOut, "CONVERSATION_ID") {
		t.Errorf("show without an id: exit %d, %q", code, errOut)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range g.keys {
		if k != "Bearer test-key-0123456789" {
			t.Errorf("called with authorization %q", k)
		}
	}
}
