package tokens

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

type (
	countTokensReq   = baagentv1.CountTokensRequest
	countMessagesReq = baagentv1.CountMessagesRequest
	encodeReq        = baagentv1.EncodeRequest
	decodeReq        = baagentv1.DecodeRequest
)

var (
	validCountTokens = &countTokensReq{Model: "gpt-4o", Text: "hello world"}
	validCountMsgs   = &countMessagesReq{
		Model: "claude-sonnet-4-5",
		Messages: []*baagentv1.ChatMessage{
			{Role: baagentv1.Role_ROLE_SYSTEM, Content: "You are helpful."},
			{Role: baagentv1.Role_ROLE_USER, Content: "Read a.csv"},
			{Role: baagentv1.Role_ROLE_ASSISTANT, ToolCalls: []*baagentv1.ToolCall{{Id: "call_1", Name: "file_read", Arguments: `{"path":"a.csv"}`}}},
			{Role: baagentv1.Role_ROLE_TOOL, ToolCallId: "call_1", ToolName: "file_read", Content: "a,b\n1,2"},
		},
		Tools: []*baagentv1.ToolSchema{{Name: "file_read", Description: "Reads a file.", Parameters: vt.MustStruct(map[string]any{"type": "object"})}},
	}
	validEncodeModel    = &encodeReq{Encoder: &baagentv1.EncodeRequest_Model{Model: "gpt-4o"}, Text: "hi"}
	validEncodeEncoding = &encodeReq{Encoder: &baagentv1.EncodeRequest_EncodingName{EncodingName: "cl100k_base"}, Text: "hi"}
	validDecode         = &decodeReq{Encoder: &baagentv1.DecodeRequest_EncodingName{EncodingName: "o200k_base"}, Tokens: []uint32{15339, 1917}}
	validModelInfo      = &baagentv1.GetModelInfoRequest{Model: "qwen-max"}
)

func TestServiceName(t *testing.T) {
	t.Parallel()

	if ServiceName != baagentv1.TokensService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName = %q, generated %q", ServiceName, baagentv1.TokensService_ServiceDesc.ServiceName)
	}
}

// newTestServer builds a Server, failing the test on error.
func newTestServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runCases runs edge cases: a case with a Field must be InvalidArgument naming
// it, one without must succeed.
func runCases(t *testing.T, cases []vt.Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Call(t.Context())
			if c.Field == "" {
				if err != nil {
					t.Fatalf("valid request failed: %v", err)
				}
				return
			}
			vt.WantInvalid(t, err, c.Field)
		})
	}
}

func TestRPCs(t *testing.T) {
	t.Parallel()

	srv := newTestServer(t, Options{MaxTextBytes: 64, MaxMessages: 8, MaxTokenIDs: 4})
	c := baagentv1.NewTokensServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	long := strings.Repeat("x", 65)

	runCases(t, []vt.Case{
		{Name: "CountTokens/valid", Call: vt.Call(c.CountTokens, validCountTokens)},
		{Name: "CountTokens/empty text is valid", Call: vt.Call(c.CountTokens, vt.With(validCountTokens, func(r *countTokensReq) { r.Text = "" }))},
		{Name: "CountTokens/empty request", Call: vt.Call(c.CountTokens, &countTokensReq{}), Field: "model"},
		{Name: "CountTokens/model with space", Call: vt.Call(c.CountTokens, vt.With(validCountTokens, func(r *countTokensReq) { r.Model = "gpt 4o" })), Field: "model"},
		{Name: "CountTokens/text too long", Call: vt.Call(c.CountTokens, vt.With(validCountTokens, func(r *countTokensReq) { r.Text = long })), Field: "text"},

		{Name: "CountMessages/valid", Call: vt.Call(c.CountMessages, validCountMsgs)},
		{Name: "CountMessages/no model", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Model = "" })), Field: "model"},
		{Name: "CountMessages/role unset", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Messages[1].Role = 0 })), Field: "messages[1].role"},
		{Name: "CountMessages/role unknown", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Messages[1].Role = 42 })), Field: "messages[1].role"},
		{Name: "CountMessages/tool message without tool_call_id", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Messages[3].ToolCallId = "" })), Field: "messages[3].tool_call_id"},
		{Name: "CountMessages/tool call without id", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Messages[2].ToolCalls[0].Id = "" })), Field: "messages[2].tool_calls[0].id"},
		{Name: "CountMessages/tool call without name", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Messages[2].ToolCalls[0].Name = "" })), Field: "messages[2].tool_calls[0].name"},
		{Name: "CountMessages/content too long", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Messages[0].Content = long })), Field: "messages[0].content"},
		{Name: "CountMessages/too many messages", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) {
			for range 5 {
				r.Messages = append(r.Messages, &baagentv1.ChatMessage{Role: baagentv1.Role_ROLE_USER, Content: "more"})
			}
		})), Field: "messages"},
		{Name: "CountMessages/bad tool name", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Tools[0].Name = "file.read" })), Field: "tools[0].name"},
		{Name: "CountMessages/duplicate tool", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) { r.Tools = append(r.Tools, r.Tools[0]) })), Field: "tools[1].name"},
		{Name: "CountMessages/tool parameters not an object", Call: vt.Call(c.CountMessages, vt.With(validCountMsgs, func(r *countMessagesReq) {
			r.Tools[0].Parameters = vt.MustStruct(map[string]any{"type": "array"})
		})), Field: "tools[0].parameters.type"},

		{Name: "Encode/valid model", Call: vt.Call(c.Encode, validEncodeModel)},
		{Name: "Encode/valid encoding", Call: vt.Call(c.Encode, validEncodeEncoding)},
		{Name: "Encode/no encoder", Call: vt.Call(c.Encode, &encodeReq{Text: "hi"}), Field: "encoder"},
		{Name: "Encode/empty model", Call: vt.Call(c.Encode, &encodeReq{Encoder: &baagentv1.EncodeRequest_Model{}}), Field: "model"},
		{Name: "Encode/bad encoding name", Call: vt.Call(c.Encode, &encodeReq{Encoder: &baagentv1.EncodeRequest_EncodingName{EncodingName: "../cl100k"}}), Field: "encoding_name"},
		{Name: "Encode/unknown encoding", Call: vt.Call(c.Encode, &encodeReq{Encoder: &baagentv1.EncodeRequest_EncodingName{EncodingName: "p50k_edit"}}), Field: "encoding_name"},
		{Name: "Encode/text too long", Call: vt.Call(c.Encode, vt.With(validEncodeModel, func(r *encodeReq) { r.Text = long })), Field: "text"},

		{Name: "Decode/valid", Call: vt.Call(c.Decode, validDecode)},
		{Name: "Decode/valid model", Call: vt.Call(c.Decode, &decodeReq{Encoder: &baagentv1.DecodeRequest_Model{Model: "gpt-4"}})},
		{Name: "Decode/no encoder", Call: vt.Call(c.Decode, &decodeReq{Tokens: []uint32{1}}), Field: "encoder"},
		{Name: "Decode/empty encoding name", Call: vt.Call(c.Decode, &decodeReq{Encoder: &baagentv1.DecodeRequest_EncodingName{}}), Field: "encoding_name"},
		{Name: "Decode/unknown token id", Call: vt.Call(c.Decode, vt.With(validDecode, func(r *decodeReq) { r.Tokens = []uint32{1, 4_000_000} })), Field: "tokens"},
		{Name: "Decode/too many tokens", Call: vt.Call(c.Decode, vt.With(validDecode, func(r *decodeReq) { r.Tokens = []uint32{1, 2, 3, 4, 5} })), Field: "tokens"},

		{Name: "GetModelInfo/valid", Call: vt.Call(c.GetModelInfo, validModelInfo)},
		{Name: "GetModelInfo/no model", Call: vt.Call(c.GetModelInfo, &baagentv1.GetModelInfoRequest{}), Field: "model"},
		{Name: "GetModelInfo/control character", Call: vt.Call(c.GetModelInfo, &baagentv1.GetModelInfoRequest{Model: "gpt\x00"}), Field: "model"},

		{Name: "ListModels/valid", Call: vt.Call(c.ListModels, &baagentv1.ListModelsRequest{})},
	})
}

// TestNilRequests calls every handler directly with a nil request: no panic,
// and the required fields are reported.
func TestNilRequests(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, Options{})
	ctx := t.Context()
	_, err := s.CountTokens(ctx, nil)
	vt.WantInvalid(t, err, "model")
	_, err = s.CountMessages(ctx, nil)
	vt.WantInvalid(t, err, "model")
	_, err = s.Encode(ctx, nil)
	vt.WantInvalid(t, err, "encoder")
	_, err = s.Decode(ctx, nil)
	vt.WantInvalid(t, err, "encoder")
	_, err = s.GetModelInfo(ctx, nil)
	vt.WantInvalid(t, err, "model")
	if resp, err := s.ListModels(ctx, nil); err != nil || len(resp.GetModels()) == 0 {
		t.Fatalf("ListModels(nil) = %v, %v", resp, err)
	}
	// A oneof wrapper holding a nil pointer (possible only in Go) is "unset".
	_, err = s.Encode(ctx, &encodeReq{Encoder: (*baagentv1.EncodeRequest_Model)(nil)})
	vt.WantInvalid(t, err, "encoder")
}

// TestInvalidUTF8 calls the handlers directly: a gRPC client refuses to
// marshal invalid UTF-8, but other clients and proxies need not.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, Options{})
	ctx := t.Context()
	_, err := s.CountTokens(ctx, &countTokensReq{Model: "gpt-4o", Text: "a\xff"})
	vt.WantInvalid(t, err, "text")
	_, err = s.Encode(ctx, &encodeReq{Encoder: &baagentv1.EncodeRequest_Model{Model: "gpt-4o"}, Text: "\xe2\x82"})
	vt.WantInvalid(t, err, "text")
	_, err = s.CountMessages(ctx, &countMessagesReq{Model: "gpt-4o", Messages: []*baagentv1.ChatMessage{{Role: baagentv1.Role_ROLE_USER, Content: "\xff"}}})
	vt.WantInvalid(t, err, "messages[0].content")
	_, err = s.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: "gpt\xff"})
	vt.WantInvalid(t, err, "model")
}

func TestDefaults(t *testing.T) {
	t.Parallel()

	o := newTestServer(t, Options{}).opts
	if o.MaxTextBytes != 16<<20 || o.MaxMessages != DefaultMaxMessages || o.MaxTokenIDs != DefaultMaxTokenIDs ||
		o.Logger == nil || o.CacheEntries != DefaultCacheEntries || o.ExactCounter == nil {
		t.Fatalf("defaults not applied: %+v", o)
	}
}

// FuzzHandlers feeds arbitrary bytes, decoded as each request type, to the
// handlers: never a panic, and either an answer or InvalidArgument naming
// fields (never Internal).
func FuzzHandlers(f *testing.F) {
	s := newTestServer(f, Options{})
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.CountTokens),
		vt.Handler(s.CountMessages),
		vt.Handler(s.Encode),
		vt.Handler(s.Decode),
		vt.Handler(s.GetModelInfo),
		vt.Handler(s.ListModels),
	}
	f.Add(uint8(0), vt.Marshal(f, validCountTokens))
	f.Add(uint8(1), vt.Marshal(f, validCountMsgs))
	f.Add(uint8(2), vt.Marshal(f, validEncodeModel))
	f.Add(uint8(2), vt.Marshal(f, validEncodeEncoding))
	f.Add(uint8(3), vt.Marshal(f, validDecode))
	f.Add(uint8(4), vt.Marshal(f, validModelInfo))
	f.Add(uint8(5), []byte{})
	f.Add(uint8(1), []byte{0x12, 0x02, 0x10, 0x09})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		ok, err := handlers[int(which)%len(handlers)](t.Context(), data)
		if !ok || err == nil {
			return
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("want an answer or InvalidArgument, got %v", err)
		}
		if cerr := vt.CheckEdge(err); cerr != nil {
			t.Fatal(cerr)
		}
	})
}
