package gateway

import (
	"context"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

type (
	startReq  = baagentv1.StartRunRequest
	listReq   = baagentv1.ListRunsRequest
	cancelReq = baagentv1.CancelRunRequest
	submitReq = baagentv1.SubmitInputRequest
	streamReq = baagentv1.StreamRunEventsRequest
	startSReq = baagentv1.StartRunStreamRequest
	skillReq  = baagentv1.GatewayServiceGetSkillRequest
	invokeReq = baagentv1.InvokeToolRequest
	countReq  = baagentv1.GatewayServiceCountTokensRequest
	putReq    = baagentv1.GatewayServicePutSkillRequest
	delReq    = baagentv1.GatewayServiceDeleteSkillRequest
	stateReq  = baagentv1.GatewayServiceSetSystemSkillStateRequest
	lsReq     = baagentv1.GatewayServiceListSkillsRequest

	convListReq = baagentv1.GatewayServiceListConversationsRequest
	convMsgReq  = baagentv1.GatewayServiceGetConversationMessagesRequest
)

var (
	validStart  = &startReq{Spec: &baagentv1.RunSpec{Input: "Which region grew fastest?", Model: "gpt-4o", MaxSteps: 10}}
	validGet    = &baagentv1.GetRunRequest{RunId: "run-1"}
	validList   = &listReq{ConversationId: "conv-1", States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_COMPLETED}, PageSize: 20, PageToken: "tok"}
	validCancel = &cancelReq{RunId: "run-1", Reason: "no longer needed"}
	validSubmit = &submitReq{RunId: "run-1", Input: &baagentv1.RunInput{InputId: "q1", SelectedOptions: []string{"Europe", "Asia"}}}
	validStream = &streamReq{RunId: "run-1", After: "earliest"}
	validSkills = &baagentv1.GatewayServiceListSkillsRequest{Project: "q3", IncludeInvalid: true}
	validSkill  = &skillReq{Project: "q3", Name: "data-analysis", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES}
	validInvoke = &invokeReq{
		ToolName:       "file_read",
		Parameters:     vt.MustStruct(map[string]any{"path": "sales.csv", "limit": 10}),
		ConversationId: "conv-1",
		OutputLevel:    baagentv1.OutputLevel_OUTPUT_LEVEL_BRIEF,
		ToolCallId:     "cli-1",
	}
	validCount = &countReq{Model: "gpt-4o", Text: "hello"}
	validPut   = &putReq{Project: "q3", Name: "board-brief", Content: []byte("---\nname: board-brief\n---\n"), Format: baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD, IfMatch: "12"}
	validDel   = &delReq{Project: "q3", Name: "board-brief", IfMatch: "12"}
	validState = &stateReq{Project: "q3", Name: "sales-analysis", Disabled: true}
)

// streamCall opens the event stream and returns the error of the first
// receive, which carries the handler's status.
func streamCall(c baagentv1.GatewayServiceClient, req *streamReq) func(context.Context) error {
	return func(ctx context.Context) error {
		st, err := c.StreamRunEvents(ctx, req)
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
}

// startStreamCall opens StartRunStream and returns the error of the first
// receive, which carries the handler's status.
func startStreamCall(c baagentv1.GatewayServiceClient, req *startSReq) func(context.Context) error {
	return func(ctx context.Context) error {
		st, err := c.StartRunStream(ctx, req)
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
}

func TestServiceName(t *testing.T) {
	if ServiceName != baagentv1.GatewayService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName = %q, generated %q", ServiceName, baagentv1.GatewayService_ServiceDesc.ServiceName)
	}
}

// unimplementedPeers returns Options whose peers are a gRPC server with no
// services (every call answers Unimplemented) and a real JetStream.
func unimplementedPeers(tb testing.TB, opts Options) Options {
	conn := vt.Serve(tb, func(grpc.ServiceRegistrar) {})
	opts.Orchestrator = baagentv1.NewOrchestratorServiceClient(conn)
	opts.Skills = baagentv1.NewSkillsServiceClient(conn)
	opts.ToolRunner = baagentv1.NewToolRunnerServiceClient(conn)
	opts.Tokens = baagentv1.NewTokensServiceClient(conn)
	opts.JetStream, _ = natstest.JetStream(tb)
	opts.Logger = slog.New(slog.DiscardHandler)
	return opts
}

// loopback is the context of a call from a loopback client.
func loopback(ctx context.Context) context.Context {
	return peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}})
}

// fakeStream is a server stream for calling StreamRunEvents directly.
type fakeStream struct {
	grpc.ServerStreamingServer[baagentv1.StreamRunEventsResponse]
	ctx context.Context
}

func (f fakeStream) Context() context.Context                      { return f.ctx }
func (f fakeStream) Send(*baagentv1.StreamRunEventsResponse) error { return nil }

// fakeStartStream is a server stream for calling StartRunStream directly.
type fakeStartStream struct {
	grpc.ServerStreamingServer[baagentv1.StartRunStreamResponse]
	ctx context.Context
}

func (f fakeStartStream) Context() context.Context                     { return f.ctx }
func (f fakeStartStream) Send(*baagentv1.StartRunStreamResponse) error { return nil }

// TestRPCs checks edge validation on every RPC and that a valid request
// reaching a peer that answers Unimplemented gets Unimplemented naming it.
func TestRPCs(t *testing.T) {
	srv := New(unimplementedPeers(t, Options{MaxTextBytes: 16, MaxSkillBytes: 64}))
	c := baagentv1.NewGatewayServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	_, err := c.GetRun(t.Context(), validGet)
	if !strings.Contains(status.Convert(err).Message(), "orchestrator service does not implement GetRun") {
		t.Errorf("Unimplemented peer error does not name it: %v", err)
	}

	vt.Run(t, []vt.Case{
		{Name: "StartRun/valid", Call: vt.Call(c.StartRun, validStart)},
		{Name: "StartRun/no spec", Call: vt.Call(c.StartRun, &startReq{}), Field: "spec"},
		{Name: "StartRun/no input", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) { r.Spec.Input = "" })), Field: "spec.input"},
		{Name: "StartRun/max_steps too large", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) { r.Spec.MaxSteps = 1000 })), Field: "spec.max_steps"},
		{Name: "StartRun/too many labels", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) {
			r.Spec.Labels = map[string]string{}
			for i := range 65 {
				r.Spec.Labels[strings.Repeat("k", i+1)] = "v"
			}
		})), Field: "spec.labels"},

		{Name: "GetRun/valid", Call: vt.Call(c.GetRun, validGet)},
		{Name: "GetRun/no run_id", Call: vt.Call(c.GetRun, &baagentv1.GetRunRequest{}), Field: "run_id"},
		{Name: "GetRun/run_id too long", Call: vt.Call(c.GetRun, &baagentv1.GetRunRequest{RunId: strings.Repeat("r", 129)}), Field: "run_id"},

		{Name: "ListRuns/valid", Call: vt.Call(c.ListRuns, validList)},
		{Name: "ListRuns/empty is valid", Call: vt.Call(c.ListRuns, &listReq{})},
		{Name: "ListRuns/bad conversation_id", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.ConversationId = "." })), Field: "conversation_id"},
		{Name: "ListRuns/unknown state", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.States = []baagentv1.RunState{-1} })), Field: "states[0]"},
		{Name: "ListRuns/page_size too large", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.PageSize = 100000 })), Field: "page_size"},
		{Name: "ListRuns/page_token too long", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.PageToken = strings.Repeat("t", 1025) })), Field: "page_token"},

		{Name: "CancelRun/valid", Call: vt.Call(c.CancelRun, validCancel)},
		{Name: "CancelRun/no run_id", Call: vt.Call(c.CancelRun, vt.With(validCancel, func(r *cancelReq) { r.RunId = "" })), Field: "run_id"},
		{Name: "CancelRun/reason too long", Call: vt.Call(c.CancelRun, vt.With(validCancel, func(r *cancelReq) { r.Reason = strings.Repeat("x", 5000) })), Field: "reason"},

		{Name: "SubmitInput/valid", Call: vt.Call(c.SubmitInput, validSubmit)},
		{Name: "SubmitInput/no run_id", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.RunId = "" })), Field: "run_id"},
		{Name: "SubmitInput/no input", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input = nil })), Field: "input"},
		{Name: "SubmitInput/bad input_id", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input.InputId = "q 1" })), Field: "input.input_id"},
		{Name: "SubmitInput/too many options", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) {
			r.Input.SelectedOptions = make([]string, 65)
			for i := range r.Input.SelectedOptions {
				r.Input.SelectedOptions[i] = "opt"
			}
		})), Field: "input.selected_options"},

		{Name: "StartRunStream/valid", Call: startStreamCall(c, &startSReq{Spec: validStart.Spec})},
		{Name: "StartRunStream/no spec", Call: startStreamCall(c, &startSReq{}), Field: "spec"},
		{Name: "StartRunStream/no input", Call: startStreamCall(c, &startSReq{Spec: &baagentv1.RunSpec{Model: "gpt-4o"}}), Field: "spec.input"},
		{Name: "StartRunStream/max_steps too large", Call: startStreamCall(c, &startSReq{Spec: &baagentv1.RunSpec{Input: "q", MaxSteps: 1000}}), Field: "spec.max_steps"},

		{Name: "StreamRunEvents/valid earliest", Call: streamCall(c, validStream)},
		{Name: "StreamRunEvents/valid live", Call: streamCall(c, &streamReq{RunId: "run-1"})},
		{Name: "StreamRunEvents/no run_id", Call: streamCall(c, &streamReq{After: "earliest"}), Field: "run_id"},
		{Name: "StreamRunEvents/bad cursor", Call: streamCall(c, &streamReq{RunId: "run-1", After: "a b"}), Field: "after"},

		{Name: "ListSkills/valid", Call: vt.Call(c.ListSkills, validSkills)},
		{Name: "ListSkills/bad project", Call: vt.Call(c.ListSkills, &baagentv1.GatewayServiceListSkillsRequest{Project: "a/b"}), Field: "project"},

		{Name: "ListSkills/unknown scope", Call: vt.Call(c.ListSkills, &lsReq{Scope: 9}), Field: "scope"},
		{Name: "ListSkills/project scope without project", Call: vt.Call(c.ListSkills, &lsReq{Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT}), Field: "project"},
		{Name: "ListSkills/all", Call: vt.Call(c.ListSkills, &lsReq{Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL})},

		{Name: "PutSkill/valid", Call: vt.Call(c.PutSkill, validPut)},
		{Name: "PutSkill/create only", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.IfMatch, r.IfNoneMatch = "", true }))},
		{Name: "PutSkill/no name", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.Name = "" })), Field: "name"},
		{Name: "PutSkill/bad name", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.Name = "a--b" })), Field: "name"},
		{Name: "PutSkill/project not a token", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.Project = "a.b" })), Field: "project"},
		{Name: "PutSkill/no content", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.Content = nil })), Field: "content"},
		{Name: "PutSkill/content too large", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.Content = make([]byte, 65) })), Field: "content"},
		{Name: "PutSkill/unknown format", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.Format = 9 })), Field: "format"},
		{Name: "PutSkill/if_match with a space", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.IfMatch = "1 2" })), Field: "if_match"},
		{Name: "PutSkill/both preconditions", Call: vt.Call(c.PutSkill, vt.With(validPut, func(r *putReq) { r.IfNoneMatch = true })), Field: "if_none_match"},

		{Name: "DeleteSkill/valid", Call: vt.Call(c.DeleteSkill, validDel)},
		{Name: "DeleteSkill/no name", Call: vt.Call(c.DeleteSkill, vt.With(validDel, func(r *delReq) { r.Name = "" })), Field: "name"},
		{Name: "DeleteSkill/project not a token", Call: vt.Call(c.DeleteSkill, vt.With(validDel, func(r *delReq) { r.Project = "p/1" })), Field: "project"},
		{Name: "DeleteSkill/bad if_match", Call: vt.Call(c.DeleteSkill, vt.With(validDel, func(r *delReq) { r.IfMatch = "a\nb" })), Field: "if_match"},

		{Name: "SetSystemSkillState/valid", Call: vt.Call(c.SetSystemSkillState, validState)},
		{Name: "SetSystemSkillState/no name", Call: vt.Call(c.SetSystemSkillState, vt.With(validState, func(r *stateReq) { r.Name = "" })), Field: "name"},
		{Name: "SetSystemSkillState/project not a token", Call: vt.Call(c.SetSystemSkillState, vt.With(validState, func(r *stateReq) { r.Project = ".." })), Field: "project"},

		{Name: "GetSkill/valid", Call: vt.Call(c.GetSkill, validSkill)},
		{Name: "GetSkill/no name", Call: vt.Call(c.GetSkill, vt.With(validSkill, func(r *skillReq) { r.Name = "" })), Field: "name"},
		{Name: "GetSkill/uppercase name", Call: vt.Call(c.GetSkill, vt.With(validSkill, func(r *skillReq) { r.Name = "Data-Analysis" })), Field: "name"},
		{Name: "GetSkill/level 4", Call: vt.Call(c.GetSkill, vt.With(validSkill, func(r *skillReq) { r.Level = 4 })), Field: "level"},
		{Name: "GetSkill/bad project", Call: vt.Call(c.GetSkill, vt.With(validSkill, func(r *skillReq) { r.Project = ".." })), Field: "project"},

		{Name: "ListTools/valid", Call: vt.Call(c.ListTools, &baagentv1.GatewayServiceListToolsRequest{})},

		{Name: "InvokeTool/valid", Call: vt.Call(c.InvokeTool, validInvoke)},
		{Name: "InvokeTool/no tool_name", Call: vt.Call(c.InvokeTool, vt.With(validInvoke, func(r *invokeReq) { r.ToolName = "" })), Field: "tool_name"},
		{Name: "InvokeTool/no tool_call_id", Call: vt.Call(c.InvokeTool, vt.With(validInvoke, func(r *invokeReq) { r.ToolCallId = "" })), Field: "tool_call_id"},
		{Name: "InvokeTool/bad conversation_id", Call: vt.Call(c.InvokeTool, vt.With(validInvoke, func(r *invokeReq) { r.ConversationId = "/abs" })), Field: "conversation_id"},
		{Name: "InvokeTool/unknown output_level", Call: vt.Call(c.InvokeTool, vt.With(validInvoke, func(r *invokeReq) { r.OutputLevel = 7 })), Field: "output_level"},
		{Name: "InvokeTool/NaN parameter", Call: vt.Call(c.InvokeTool, vt.With(validInvoke, func(r *invokeReq) {
			r.Parameters.Fields["limit"] = structpb.NewNumberValue(math.NaN())
		})), Field: "parameters.limit"},
		{Name: "InvokeTool/unset parameter value", Call: vt.Call(c.InvokeTool, vt.With(validInvoke, func(r *invokeReq) {
			r.Parameters.Fields["x y"] = &structpb.Value{}
		})), Field: `parameters["x y"]`},

		{Name: "CountTokens/valid", Call: vt.Call(c.CountTokens, validCount)},
		{Name: "CountTokens/no model", Call: vt.Call(c.CountTokens, &countReq{Text: "hi"}), Field: "model"},
		{Name: "CountTokens/text too long", Call: vt.Call(c.CountTokens, vt.With(validCount, func(r *countReq) { r.Text = strings.Repeat("x", 17) })), Field: "text"},

		{Name: "ListConversations/valid", Call: vt.Call(c.ListConversations, &convListReq{PageSize: 500})},
		{Name: "ListConversations/page_size too large", Call: vt.Call(c.ListConversations, &convListReq{PageSize: 501}), Field: "page_size"},
		{Name: "ListConversations/negative page_size", Call: vt.Call(c.ListConversations, &convListReq{PageSize: -1}), Field: "page_size"},
		{Name: "ListConversations/page_token too long", Call: vt.Call(c.ListConversations, &convListReq{PageToken: strings.Repeat("t", 1025)}), Field: "page_token"},
		{Name: "GetConversation/valid", Call: vt.Call(c.GetConversation, &baagentv1.GatewayServiceGetConversationRequest{ConversationId: "conv-1"})},
		{Name: "GetConversation/no id", Call: vt.Call(c.GetConversation, &baagentv1.GatewayServiceGetConversationRequest{}), Field: "conversation_id"},
		{Name: "GetConversationMessages/valid", Call: vt.Call(c.GetConversationMessages, &convMsgReq{ConversationId: "conv-1", PageSize: 1000})},
		{Name: "GetConversationMessages/bad id", Call: vt.Call(c.GetConversationMessages, &convMsgReq{ConversationId: "../x"}), Field: "conversation_id"},
		{Name: "GetConversationMessages/page_size too large", Call: vt.Call(c.GetConversationMessages, &convMsgReq{ConversationId: "conv-1", PageSize: 1001}), Field: "page_size"},
		{Name: "EndConversation/valid", Call: vt.Call(c.EndConversation, &baagentv1.GatewayServiceEndConversationRequest{ConversationId: "conv-1"})},
		{Name: "EndConversation/no id", Call: vt.Call(c.EndConversation, &baagentv1.GatewayServiceEndConversationRequest{}), Field: "conversation_id"},
		{Name: "DeleteConversation/valid", Call: vt.Call(c.DeleteConversation, &baagentv1.GatewayServiceDeleteConversationRequest{ConversationId: "conv-1"})},
		{Name: "DeleteConversation/bad id", Call: vt.Call(c.DeleteConversation, &baagentv1.GatewayServiceDeleteConversationRequest{ConversationId: ".hidden"}), Field: "conversation_id"},
	})
}

func TestNilRequests(t *testing.T) {
	s := New(unimplementedPeers(t, Options{}))
	ctx := loopback(t.Context())
	_, err := s.StartRun(ctx, nil)
	vt.WantInvalid(t, err, "spec")
	_, err = s.GetRun(ctx, nil)
	vt.WantInvalid(t, err, "run_id")
	_, err = s.ListRuns(ctx, nil)
	vt.WantUnimplemented(t, err)
	_, err = s.CancelRun(ctx, nil)
	vt.WantInvalid(t, err, "run_id")
	_, err = s.SubmitInput(ctx, nil)
	vt.WantInvalid(t, err, "input")
	vt.WantInvalid(t, s.StreamRunEvents(nil, fakeStream{ctx: ctx}), "run_id")
	vt.WantInvalid(t, s.StartRunStream(nil, fakeStartStream{ctx: ctx}), "spec")
	_, err = s.ListSkills(ctx, nil)
	vt.WantUnimplemented(t, err)
	_, err = s.GetSkill(ctx, nil)
	vt.WantInvalid(t, err, "name")
	_, err = s.ListTools(ctx, nil)
	vt.WantUnimplemented(t, err)
	_, err = s.InvokeTool(ctx, nil)
	vt.WantInvalid(t, err, "tool_call_id")
	_, err = s.CountTokens(ctx, nil)
	vt.WantInvalid(t, err, "model")
	_, err = s.PutSkill(ctx, nil)
	vt.WantInvalid(t, err, "name")
	_, err = s.DeleteSkill(ctx, nil)
	vt.WantInvalid(t, err, "name")
	_, err = s.SetSystemSkillState(ctx, nil)
	vt.WantInvalid(t, err, "name")
	_, err = s.ListConversations(ctx, nil)
	vt.WantUnimplemented(t, err)
	_, err = s.GetConversation(ctx, nil)
	vt.WantInvalid(t, err, "conversation_id")
	_, err = s.GetConversationMessages(ctx, nil)
	vt.WantInvalid(t, err, "conversation_id")
	_, err = s.EndConversation(ctx, nil)
	vt.WantInvalid(t, err, "conversation_id")
	_, err = s.DeleteConversation(ctx, nil)
	vt.WantInvalid(t, err, "conversation_id")
}

// FuzzHandlers feeds arbitrary bytes, decoded as each request type, to the
// handlers: never a panic, always InvalidArgument or Unimplemented.
func FuzzHandlers(f *testing.F) {
	s := New(unimplementedPeers(f, Options{}))
	stream := func(ctx context.Context, req *streamReq) (struct{}, error) {
		return struct{}{}, s.StreamRunEvents(req, fakeStream{ctx: ctx})
	}
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.StartRun),
		vt.Handler(s.GetRun),
		vt.Handler(s.ListRuns),
		vt.Handler(s.CancelRun),
		vt.Handler(s.SubmitInput),
		vt.Handler(stream),
		vt.Handler(s.ListSkills),
		vt.Handler(s.GetSkill),
		vt.Handler(s.ListTools),
		vt.Handler(s.InvokeTool),
		vt.Handler(s.CountTokens),
		vt.Handler(s.PutSkill),
		vt.Handler(s.DeleteSkill),
		vt.Handler(s.SetSystemSkillState),
		vt.Handler(s.ListConversations),
		vt.Handler(s.GetConversation),
		vt.Handler(s.GetConversationMessages),
		vt.Handler(s.EndConversation),
		vt.Handler(s.DeleteConversation),
	}
	seeds := []proto.Message{validStart, validGet, validList, validCancel, validSubmit, validStream,
		validSkills, validSkill, &baagentv1.GatewayServiceListToolsRequest{}, validInvoke, validCount,
		validPut, validDel, validState,
		&convListReq{PageSize: 10}, &baagentv1.GatewayServiceGetConversationRequest{ConversationId: "c"}, &convMsgReq{ConversationId: "c"},
		&baagentv1.GatewayServiceEndConversationRequest{ConversationId: "c"}, &baagentv1.GatewayServiceDeleteConversationRequest{ConversationId: "c"}}
	for i, m := range seeds {
		f.Add(uint8(i), vt.Marshal(f, m))
	}
	for i, h := range handlers {
		handlers[i] = func(ctx context.Context, data []byte) (bool, error) { return h(loopback(ctx), data) }
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		vt.Fuzz(t, handlers, which, data)
	})
}
