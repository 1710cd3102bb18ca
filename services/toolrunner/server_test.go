package toolrunner

import (
	"context"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

type (
	invokeReq  = baagentv1.InvokeRequest
	listReq    = baagentv1.ListToolsRequest
	readReq    = baagentv1.ReadArtifactRequest
	releaseReq = baagentv1.ReleaseConversationRequest
	invocation = baagentv1.ToolInvocationRequest
	policy     = baagentv1.ToolRetryPolicy
)

var (
	validInvoke = &invokeReq{Request: &invocation{
		ToolCallId:      "call_abc123",
		ToolName:        "sql_query",
		ToolVersion:     "1.0.0",
		Parameters:      vt.MustStruct(map[string]any{"query": "select 1", "params": []any{1, "a", nil, true}}),
		OutputLevel:     baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD,
		TimeoutMs:       300_000,
		RetryOnTimeout:  proto.Bool(true),
		StorageDir:      "conv-1/reports",
		CallerId:        "agent:main",
		PermissionLevel: "default",
		IdempotencyKey:  "k-1",
		CachePolicy:     baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_SHORT,
		Tenant:          "acme",
		ConversationId:  "conv-1",
		RunId:           "run-1",
		ContextUsage:    0.85,
		AllowedTools:    &baagentv1.ToolAllowList{Names: []string{"sql_query", "file_*"}},
		RetryPolicy: &policy{
			MaxRetries:        proto.Int32(3),
			RetryOn:           []baagentv1.ToolErrorType{baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT},
			BackoffMultiplier: 1.5,
			InitialDelayMs:    1000,
			MaxDelayMs:        10_000,
			TimeoutMultiplier: 2,
			MaxTimeoutMs:      300_000,
		},
		Approved: true,
	}}
	minimalInvoke = &invokeReq{Request: &invocation{ToolCallId: "call_1", ToolName: "glob", CallerId: "agent", Tenant: "t", ConversationId: "c"}}
	validList     = &listReq{Tenant: "acme", AllowedTools: &baagentv1.ToolAllowList{}}
	validRead     = &readReq{Tenant: "acme", ConversationId: "conv-1", ArtifactId: "artifact_0123abcd", Offset: 2000, Limit: 5000, Pattern: `(?i)^error:\s+\w+`}
	validRelease  = &releaseReq{Tenant: "acme", ConversationId: "conv-1"}
)

func TestServiceName(t *testing.T) {
	t.Parallel()

	if ServiceName != baagentv1.ToolRunnerService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName = %q, generated %q", ServiceName, baagentv1.ToolRunnerService_ServiceDesc.ServiceName)
	}
}

// TestRPCs checks edge validation over real gRPC: bad requests get
// InvalidArgument naming the field; valid ones pass the edge (their
// outcome is tested elsewhere).
func TestRPCs(t *testing.T) {
	t.Parallel()

	srv, _ := newTestServer(t, nil)
	c := baagentv1.NewToolRunnerServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	inv := func(f func(*invocation)) *invokeReq {
		return vt.With(validInvoke, func(r *invokeReq) { f(r.Request) })
	}
	retry := func(f func(*policy)) *invokeReq {
		return vt.With(validInvoke, func(r *invokeReq) { f(r.Request.RetryPolicy) })
	}

	runEdgeCases(t, []vt.Case{
		{Name: "Invoke/valid", Call: vt.Call(c.Invoke, validInvoke)},
		{Name: "Invoke/minimal", Call: vt.Call(c.Invoke, minimalInvoke)},
		{Name: "Invoke/no request", Call: vt.Call(c.Invoke, &invokeReq{}), Field: "request"},
		{Name: "Invoke/no tool_call_id", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ToolCallId = "" })), Field: "request.tool_call_id"},
		{Name: "Invoke/tool_call_id with space", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ToolCallId = "call 1" })), Field: "request.tool_call_id"},
		{Name: "Invoke/no tool_name", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ToolName = "" })), Field: "request.tool_name"},
		{Name: "Invoke/tool_name with newline", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ToolName = "a\nb" })), Field: "request.tool_name"},
		{Name: "Invoke/bad tool_version", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ToolVersion = "1 0" })), Field: "request.tool_version"},
		{Name: "Invoke/infinite parameter", Call: vt.Call(c.Invoke, inv(func(r *invocation) {
			r.Parameters.Fields["params"].GetListValue().Values[0] = structpb.NewNumberValue(math.Inf(1))
		})), Field: "request.parameters.params[0]"},
		{Name: "Invoke/unknown output_level", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.OutputLevel = 4 })), Field: "request.output_level"},
		{Name: "Invoke/negative timeout", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.TimeoutMs = -1 })), Field: "request.timeout_ms"},
		{Name: "Invoke/timeout over 5 min", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.TimeoutMs = 300_001 })), Field: "request.timeout_ms"},
		{Name: "Invoke/absolute storage_dir", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.StorageDir = "/etc" })), Field: "request.storage_dir"},
		{Name: "Invoke/storage_dir escapes", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.StorageDir = "a/../../b" })), Field: "request.storage_dir"},
		{Name: "Invoke/storage_dir backslash", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.StorageDir = `a\b` })), Field: "request.storage_dir"},
		{Name: "Invoke/no caller_id", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.CallerId = "" })), Field: "request.caller_id"},
		{Name: "Invoke/bad permission_level", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.PermissionLevel = "root user" })), Field: "request.permission_level"},
		{Name: "Invoke/bad idempotency_key", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.IdempotencyKey = strings.Repeat("k", 257) })), Field: "request.idempotency_key"},
		{Name: "Invoke/unknown cache_policy", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.CachePolicy = 6 })), Field: "request.cache_policy"},
		{Name: "Invoke/no tenant", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.Tenant = "" })), Field: "request.tenant"},
		{Name: "Invoke/no conversation_id", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ConversationId = "" })), Field: "request.conversation_id"},
		{Name: "Invoke/bad run_id", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.RunId = "a.b" })), Field: "request.run_id"},
		{Name: "Invoke/context_usage above 1", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ContextUsage = 1.01 })), Field: "request.context_usage"},
		{Name: "Invoke/context_usage negative", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ContextUsage = -0.1 })), Field: "request.context_usage"},
		{Name: "Invoke/context_usage NaN", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.ContextUsage = math.NaN() })), Field: "request.context_usage"},
		{Name: "Invoke/bad allowed tool", Call: vt.Call(c.Invoke, inv(func(r *invocation) { r.AllowedTools.Names = []string{"a/b"} })), Field: "request.allowed_tools.names[0]"},
		{Name: "Invoke/too many retries", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.MaxRetries = proto.Int32(11) })), Field: "request.retry_policy.max_retries"},
		{Name: "Invoke/negative retries", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.MaxRetries = proto.Int32(-1) })), Field: "request.retry_policy.max_retries"},
		{Name: "Invoke/retry on permanent error", Call: vt.Call(c.Invoke, retry(func(p *policy) {
			p.RetryOn = append(p.RetryOn, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED)
		})), Field: "request.retry_policy.retry_on[2]"},
		{Name: "Invoke/retry on unspecified", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.RetryOn = []baagentv1.ToolErrorType{0} })), Field: "request.retry_policy.retry_on[0]"},
		{Name: "Invoke/retry on unknown", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.RetryOn = []baagentv1.ToolErrorType{77} })), Field: "request.retry_policy.retry_on[0]"},
		{Name: "Invoke/backoff below 1", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.BackoffMultiplier = 0.5 })), Field: "request.retry_policy.backoff_multiplier"},
		{Name: "Invoke/negative initial delay", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.InitialDelayMs = -5 })), Field: "request.retry_policy.initial_delay_ms"},
		{Name: "Invoke/max delay below initial", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.MaxDelayMs = 500 })), Field: "request.retry_policy.max_delay_ms"},
		{Name: "Invoke/timeout multiplier infinite", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.TimeoutMultiplier = math.Inf(1) })), Field: "request.retry_policy.timeout_multiplier"},
		{Name: "Invoke/max timeout over 5 min", Call: vt.Call(c.Invoke, retry(func(p *policy) { p.MaxTimeoutMs = 300_001 })), Field: "request.retry_policy.max_timeout_ms"},

		{Name: "ListTools/valid", Call: vt.Call(c.ListTools, validList)},
		{Name: "ListTools/no tenant", Call: vt.Call(c.ListTools, &listReq{}), Field: "tenant"},
		{Name: "ListTools/bad pattern", Call: vt.Call(c.ListTools, vt.With(validList, func(r *listReq) { r.AllowedTools.Names = []string{""} })), Field: "allowed_tools.names[0]"},

		{Name: "ReadArtifact/valid", Call: vt.Call(c.ReadArtifact, validRead)},
		{Name: "ReadArtifact/no tenant", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "ReadArtifact/no conversation_id", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.ConversationId = "" })), Field: "conversation_id"},
		{Name: "ReadArtifact/no artifact_id", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.ArtifactId = "" })), Field: "artifact_id"},
		{Name: "ReadArtifact/artifact path", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.ArtifactId = "artifact_../../etc/passwd" })), Field: "artifact_id"},
		{Name: "ReadArtifact/artifact without prefix", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.ArtifactId = "0123abcd" })), Field: "artifact_id"},
		{Name: "ReadArtifact/negative offset", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.Offset = -1 })), Field: "offset"},
		{Name: "ReadArtifact/negative limit", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.Limit = -1 })), Field: "limit"},
		{Name: "ReadArtifact/bad regexp", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.Pattern = "(unclosed" })), Field: "pattern"},
		{Name: "ReadArtifact/regexp too long", Call: vt.Call(c.ReadArtifact, vt.With(validRead, func(r *readReq) { r.Pattern = strings.Repeat("a", 1025) })), Field: "pattern"},

		{Name: "ReleaseConversation/valid", Call: vt.Call(c.ReleaseConversation, validRelease)},
		{Name: "ReleaseConversation/no tenant", Call: vt.Call(c.ReleaseConversation, vt.With(validRelease, func(r *releaseReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "ReleaseConversation/no conversation_id", Call: vt.Call(c.ReleaseConversation, vt.With(validRelease, func(r *releaseReq) { r.ConversationId = "" })), Field: "conversation_id"},
	})
}

// runEdgeCases is vt.Run for implemented RPCs: a case without Field must
// not be refused at the edge.
func runEdgeCases(t *testing.T, cases []vt.Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Call(t.Context())
			if c.Field == "" {
				if code := status.Code(err); code == codes.InvalidArgument || code == codes.Unimplemented {
					t.Fatalf("valid request refused: %v", err)
				}
				return
			}
			vt.WantInvalid(t, err, c.Field)
		})
	}
}

func TestNilRequests(t *testing.T) {
	t.Parallel()

	s, _ := newTestServer(t, nil)
	ctx := t.Context()
	_, err := s.Invoke(ctx, nil)
	vt.WantInvalid(t, err, "request")
	_, err = s.ListTools(ctx, nil)
	vt.WantInvalid(t, err, "tenant")
	_, err = s.ReadArtifact(ctx, nil)
	vt.WantInvalid(t, err, "artifact_id")
	_, err = s.ReleaseConversation(ctx, nil)
	vt.WantInvalid(t, err, "conversation_id")
}

// FuzzHandlers feeds arbitrary bytes, decoded as each request type, to the
// handlers (argument validation included): never a panic; an RPC error is
// only InvalidArgument with the field named, or NotFound for an artifact.
func FuzzHandlers(f *testing.F) {
	s, _ := newTestServer(f, nil)
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.Invoke),
		vt.Handler(s.ListTools),
		vt.Handler(s.ReadArtifact),
		vt.Handler(s.ReleaseConversation),
	}
	f.Add(uint8(0), vt.Marshal(f, validInvoke))
	f.Add(uint8(0), vt.Marshal(f, minimalInvoke))
	f.Add(uint8(1), vt.Marshal(f, validList))
	f.Add(uint8(2), vt.Marshal(f, validRead))
	f.Add(uint8(3), vt.Marshal(f, validRelease))
	f.Add(uint8(0), vt.Marshal(f, &invokeReq{Request: &invocation{ToolCallId: "c", ToolName: "file_read", CallerId: "a", Tenant: "t", ConversationId: "c",
		Parameters: vt.MustStruct(map[string]any{"path": "../x", "offset": -1.5, "limit": 1e9})}}))
	f.Add(uint8(0), vt.Marshal(f, &invokeReq{Request: &invocation{ToolCallId: "c", ToolName: "artifact_read", CallerId: "a", Tenant: "t", ConversationId: "c",
		Parameters: vt.MustStruct(map[string]any{"artifact_id": "artifact_../../etc", "pattern": "("})}}))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		ok, err := handlers[int(which)%len(handlers)](t.Context(), data)
		if !ok || err == nil || status.Code(err) == codes.NotFound {
			return
		}
		if cerr := vt.CheckEdge(err); cerr != nil || status.Code(err) == codes.Unimplemented {
			t.Fatalf("unexpected error: %v", err)
		}
	})
}
