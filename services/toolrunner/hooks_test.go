package toolrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// TestMain lets the test binary serve as a command hook: a hook entry
// runs `<test binary> hook-helper <mode>` (see hookHelper).
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "hook-helper" {
		os.Exit(hookHelper(os.Args[2]))
	}
	os.Exit(m.Run())
}

// hookHelper is a command hook: it reads the call on stdin and answers
// as mode says.
func hookHelper(mode string) int {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return 2
	}
	var call commandHookInput
	if err := json.Unmarshal(in, &call); err != nil {
		fmt.Fprintln(os.Stderr, "bad input:", err)
		return 2
	}
	switch mode {
	case "allow":
		fmt.Print(`{"decision":"allow"}`)
	case "deny":
		fmt.Printf(`{"decision":"deny","reason":"no %s for tenant %s"}`, call.ToolName, call.Tenant)
	case "rewrite":
		fmt.Print(`{"decision":"rewrite","reason":"normalised","arguments":{"x":"rewritten"}}`)
	case "rewrite-invalid":
		fmt.Print(`{"decision":"rewrite","arguments":{"y":1}}`)
	case "redact":
		if call.Phase != HookPost || call.Data == nil {
			return 3
		}
		fmt.Print(`{"redactions":["s3cr3t"],"annotation":"checked by dlp"}`)
	case "replace":
		fmt.Print(`{"data":{"replaced":true}}`)
	case "sleep":
		// A hook that never answers: it waits until the toolrunner
		// kills its process group at the hook's timeout.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
		return 5
	case "fail":
		fmt.Fprint(os.Stderr, "policy store unreachable")
		return 3
	case "garbage":
		fmt.Print(`{"decision":"allow","typo":1}`)
	case "flood":
		chunk := strings.Repeat("x", 64<<10)
		for range (maxHookOutputBytes / len(chunk)) + 2 {
			fmt.Print(chunk)
		}
	default:
		return 4
	}
	return 0
}

// hookServer is a ToolHookService whose answers the test sets.
type hookServer struct {
	baagentv1.UnimplementedToolHookServiceServer
	preFn  func(context.Context, *baagentv1.PreToolCallRequest) (*baagentv1.PreToolCallResponse, error)
	postFn func(context.Context, *baagentv1.PostToolCallRequest) (*baagentv1.PostToolCallResponse, error)

	mu    sync.Mutex
	calls []string // phase:tool
}

func (h *hookServer) PreToolCall(ctx context.Context, r *baagentv1.PreToolCallRequest) (*baagentv1.PreToolCallResponse, error) {
	h.mu.Lock()
	h.calls = append(h.calls, "pre:"+r.GetCall().GetToolName())
	h.mu.Unlock()
	if h.preFn == nil {
		return &baagentv1.PreToolCallResponse{Decision: baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_ALLOW}, nil
	}
	return h.preFn(ctx, r)
}

func (h *hookServer) PostToolCall(ctx context.Context, r *baagentv1.PostToolCallRequest) (*baagentv1.PostToolCallResponse, error) {
	h.mu.Lock()
	h.calls = append(h.calls, "post:"+r.GetCall().GetToolName())
	h.mu.Unlock()
	if h.postFn == nil {
		return &baagentv1.PostToolCallResponse{}, nil
	}
	return h.postFn(ctx, r)
}

func (h *hookServer) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// startHookServer serves h on a loopback port and returns its address.
func startHookServer(tb testing.TB, h *hookServer) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer()
	baagentv1.RegisterToolHookServiceServer(srv, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	tb.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// hookedServer builds a Server whose tools file is yaml, with an echo
// tool `echo` (and `write_file`) returning {"x": <x>, "note": "token s3cr3t"}.
func hookedServer(tb testing.TB, yaml string) (*Server, *testEnv, *funcTool) {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		tb.Fatal(err)
	}
	s, env := newTestServer(tb, func(o *Options) { o.ConfigFile = file })
	fn := func(_ context.Context, c tool.Call) (tool.Result, error) {
		return tool.Result{Data: map[string]any{"x": c.Args["x"], "note": "token s3cr3t"}}, nil
	}
	echo := &funcTool{spec: echoSpec("echo"), fn: fn}
	write := &funcTool{spec: echoSpec("write_file"), fn: fn}
	env.source.set(echo, write)
	return s, env, echo
}

// helperCommand is the argv of the test binary as a command hook.
func helperCommand(mode string) string {
	b, _ := json.Marshal([]string{os.Args[0], "hook-helper", mode})
	return string(b)
}

// testHookTimeout keeps hooks that should answer from timing out on a
// busy machine (a command hook starts the race-built test binary).
const testHookTimeout = "    timeout: 25s\n"

func grpcHookYAML(name, phase, tools, addr, extra string) string {
	if !strings.Contains(extra, "timeout:") {
		extra += testHookTimeout
	}
	return fmt.Sprintf("  - name: %s\n    phase: %s\n    tools: %s\n    grpc: {address: %q}\n%s", name, phase, tools, addr, extra)
}

func cmdHookYAML(name, phase, tools, mode, extra string) string {
	if !strings.Contains(extra, "timeout:") {
		extra += testHookTimeout
	}
	return fmt.Sprintf("  - name: %s\n    phase: %s\n    tools: %s\n    command: %s\n%s", name, phase, tools, helperCommand(mode), extra)
}

func wantFailure(tb testing.TB, res *baagentv1.ToolExecutionResult, typ baagentv1.ToolErrorType, code string, contains ...string) {
	tb.Helper()
	if res.GetSuccess() || res.GetErrorType() != typ || res.GetErrorCode() != code {
		tb.Fatalf("result success=%v type=%v code=%q (%s), want failure %v %s", res.GetSuccess(), res.GetErrorType(), res.GetErrorCode(), res.GetErrorMessage(), typ, code)
	}
	for _, c := range contains {
		if !strings.Contains(res.GetErrorMessage(), c) {
			tb.Errorf("error message %q does not contain %q", res.GetErrorMessage(), c)
		}
	}
}

func TestHookGRPCPreDeny(t *testing.T) {
	h := &hookServer{preFn: func(_ context.Context, r *baagentv1.PreToolCallRequest) (*baagentv1.PreToolCallResponse, error) {
		if r.GetCall().GetHook() != "guard" || r.GetCall().GetTenant() != "acme" || r.GetParameters().AsMap()["x"] != "a" {
			return nil, fmt.Errorf("unexpected request %v", r)
		}
		return &baagentv1.PreToolCallResponse{Decision: baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_DENY, Reason: "writes are frozen"}, nil
	}}
	s, _, echo := hookedServer(t, "hooks:\n"+grpcHookYAML("guard", "pre", `["ech*"]`, startHookServer(t, h), ""))
	res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codeHookDenied, "guard", "writes are frozen")
	if echo.calls.Load() != 0 {
		t.Fatal("a denied call ran")
	}
	if got := testutil.ToFloat64(s.metrics.hookCalls.WithLabelValues("guard", "pre", "deny")); got != 1 {
		t.Fatalf("hook_calls_total{outcome=deny} = %v, want 1", got)
	}
	// write_file does not match ech*: the hook is not asked.
	if res := mustInvoke(t, s, req("write_file", map[string]any{"x": "a"})); !res.GetSuccess() {
		t.Fatalf("write_file: %s", res.GetErrorMessage())
	}
	if got := h.seen(); len(got) != 1 || got[0] != "pre:echo" {
		t.Fatalf("hook saw %v, want [pre:echo]", got)
	}
}

func TestHookGRPCPreRewrite(t *testing.T) {
	h := &hookServer{preFn: func(_ context.Context, r *baagentv1.PreToolCallRequest) (*baagentv1.PreToolCallResponse, error) {
		x := r.GetParameters().AsMap()["x"]
		if x == "bad" {
			p, _ := structpb.NewStruct(map[string]any{"y": 1.0}) // not in the schema
			return &baagentv1.PreToolCallResponse{Decision: baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE, Parameters: p}, nil
		}
		p, _ := structpb.NewStruct(map[string]any{"x": strings.ToUpper(x.(string))})
		return &baagentv1.PreToolCallResponse{Decision: baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE, Parameters: p}, nil
	}}
	s, _, echo := hookedServer(t, "hooks:\n"+grpcHookYAML("upper", "pre", `["*"]`, startHookServer(t, h), ""))

	r := req("echo", map[string]any{"x": "abc"})
	res := mustInvoke(t, s, r)
	if !res.GetSuccess() || !strings.Contains(res.GetObservation(), "ABC") {
		t.Fatalf("rewritten call: success=%v observation %q", res.GetSuccess(), res.GetObservation())
	}
	spec := echoSpec("echo")
	if want := derivedKey(r, spec, map[string]any{"x": "ABC"}); res.GetIdempotencyKey() != want {
		t.Fatalf("idempotency key %s, want the key of the rewritten arguments %s", res.GetIdempotencyKey(), want)
	}

	res = mustInvoke(t, s, req("echo", map[string]any{"x": "bad"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed, `"upper"`, "schema")
	if echo.calls.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1 (the schema-invalid rewrite must not run)", echo.calls.Load())
	}
	if got := testutil.ToFloat64(s.metrics.hookFailures.WithLabelValues("upper", "error")); got != 1 {
		t.Fatalf("hook_failures_total = %v, want 1", got)
	}
}

func TestHookGRPCPostRedactReplaceAnnotate(t *testing.T) {
	h := &hookServer{postFn: func(_ context.Context, r *baagentv1.PostToolCallRequest) (*baagentv1.PostToolCallResponse, error) {
		data := r.GetData().GetStructValue().AsMap()
		switch data["x"] {
		case "replace":
			v, _ := structpb.NewValue(map[string]any{"summary": "withheld s3cr3t"})
			return &baagentv1.PostToolCallResponse{Data: v, Redactions: []string{"s3cr3t"}}, nil
		default:
			return &baagentv1.PostToolCallResponse{Redactions: []string{"s3cr3t", ""}, Annotation: "scanned by dlp"}, nil
		}
	}}
	s, _, _ := hookedServer(t, "hooks:\n"+grpcHookYAML("dlp", "post", `["echo"]`, startHookServer(t, h), ""))

	res := mustInvoke(t, s, req("echo", map[string]any{"x": "plain"}))
	if !res.GetSuccess() {
		t.Fatal(res.GetErrorMessage())
	}
	if strings.Contains(res.GetObservation(), "s3cr3t") || !strings.Contains(res.GetObservation(), redactedText) {
		t.Fatalf("observation not redacted: %q", res.GetObservation())
	}
	if !strings.HasSuffix(res.GetObservation(), "(Note: scanned by dlp)") || len(res.GetHookAnnotations()) != 1 || res.GetHookAnnotations()[0] != "scanned by dlp" {
		t.Fatalf("annotation missing: observation %q, hook_annotations %v", res.GetObservation(), res.GetHookAnnotations())
	}

	res = mustInvoke(t, s, req("echo", map[string]any{"x": "replace"}))
	if !res.GetSuccess() || !strings.Contains(res.GetObservation(), "withheld "+redactedText) || strings.Contains(res.GetObservation(), "token") {
		t.Fatalf("replaced result: %q", res.GetObservation())
	}
	if got := testutil.ToFloat64(s.metrics.hookCalls.WithLabelValues("dlp", "post", "modified")); got != 2 {
		t.Fatalf("hook_calls_total{outcome=modified} = %v, want 2", got)
	}
}

func TestHookGRPCTimeoutAndOnError(t *testing.T) {
	block := func(ctx context.Context, _ *baagentv1.PreToolCallRequest) (*baagentv1.PreToolCallResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	slow := startHookServer(t, &hookServer{preFn: block})
	// The unreachable hook: a port with no listener.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()

	s, _, echo := hookedServer(t, "hooks:\n"+
		grpcHookYAML("slow", "pre", `["echo"]`, slow, "    timeout: 50ms\n")+
		grpcHookYAML("dead", "pre", `["write_*"]`, dead, "    on_error: allow\n    timeout: 5s\n"))

	res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed, `"slow"`, "50ms")
	if echo.calls.Load() != 0 {
		t.Fatal("call ran although its deny-on-error hook timed out")
	}
	if got := testutil.ToFloat64(s.metrics.hookFailures.WithLabelValues("slow", "timeout")); got != 1 {
		t.Fatalf("hook_failures_total{reason=timeout} = %v, want 1", got)
	}

	res = mustInvoke(t, s, req("write_file", map[string]any{"x": "a"}))
	if !res.GetSuccess() {
		t.Fatalf("on_error: allow hook failed the call: %s", res.GetErrorMessage())
	}
	if got := testutil.ToFloat64(s.metrics.hookFailures.WithLabelValues("dead", "error")); got != 1 {
		t.Fatalf("hook_failures_total{hook=dead} = %v, want 1", got)
	}
}

func TestHookCommandPre(t *testing.T) {
	s, _, echo := hookedServer(t, "hooks:\n"+
		cmdHookYAML("deny-writes", "pre", `["write_*"]`, "deny", "")+
		cmdHookYAML("rewrite", "pre", `["echo"]`, "rewrite", "")+
		cmdHookYAML("allow", "pre", `["*"]`, "allow", ""))

	res := mustInvoke(t, s, req("write_file", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codeHookDenied, "no write_file for tenant acme")

	res = mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	if !res.GetSuccess() || !strings.Contains(res.GetObservation(), "rewritten") {
		t.Fatalf("rewrite: success=%v %q %s", res.GetSuccess(), res.GetObservation(), res.GetErrorMessage())
	}
	if echo.calls.Load() != 1 {
		t.Fatalf("echo ran %d times", echo.calls.Load())
	}
	if got := testutil.ToFloat64(s.metrics.hookCalls.WithLabelValues("allow", "pre", "allow")); got != 1 {
		t.Fatalf("allow hook ran %v times after the rewrite, want 1", got)
	}
}

func TestHookCommandRewriteInvalid(t *testing.T) {
	s, _, echo := hookedServer(t, "hooks:\n"+cmdHookYAML("bad", "pre", `["echo"]`, "rewrite-invalid", ""))
	res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed, `"bad"`, "schema")
	if echo.calls.Load() != 0 {
		t.Fatal("schema-invalid rewrite ran")
	}
}

func TestHookCommandPost(t *testing.T) {
	s, _, _ := hookedServer(t, "hooks:\n"+
		cmdHookYAML("dlp", "post", `["echo"]`, "redact", "")+
		cmdHookYAML("swap", "post", `["write_file"]`, "replace", ""))
	res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	if !res.GetSuccess() || strings.Contains(res.GetObservation(), "s3cr3t") || !strings.Contains(res.GetObservation(), "token "+redactedText) {
		t.Fatalf("redaction: %q %s", res.GetObservation(), res.GetErrorMessage())
	}
	if got := res.GetHookAnnotations(); len(got) != 1 || got[0] != "checked by dlp" {
		t.Fatalf("hook_annotations %v", got)
	}
	res = mustInvoke(t, s, req("write_file", map[string]any{"x": "a"}))
	if !res.GetSuccess() || !strings.Contains(res.GetObservation(), "replaced") || strings.Contains(res.GetObservation(), "token") {
		t.Fatalf("replacement: %q %s", res.GetObservation(), res.GetErrorMessage())
	}
}

func TestHookCommandFailures(t *testing.T) {
	s, _, echo := hookedServer(t, "hooks:\n"+
		cmdHookYAML("sleepy", "pre", `["echo"]`, "sleep", "    timeout: 200ms\n")+
		cmdHookYAML("broken", "post", `["write_file"]`, "fail", "")+
		cmdHookYAML("typo", "pre", `["write_file"]`, "garbage", "    on_error: allow\n")+
		cmdHookYAML("flood", "post", `["write_file"]`, "flood", "    on_error: allow\n"))

	start := time.Now()
	res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed, `"sleepy"`, "200ms", "not run")
	if echo.calls.Load() != 0 {
		t.Fatal("call ran after its hook timed out")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("timed-out hook held the call for %s", d)
	}

	// typo (allow on error) passes; broken (deny on error) withholds the result.
	res = mustInvoke(t, s, req("write_file", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed, `"broken"`, "policy store unreachable", "withheld")
	if got := testutil.ToFloat64(s.metrics.hookFailures.WithLabelValues("typo", "error")); got != 1 {
		t.Fatalf("hook_failures_total{hook=typo} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.hookCalls.WithLabelValues("flood", "post", "failed")); got != 0 {
		t.Fatalf("flood ran after broken failed the call: %v", got)
	}
}

func TestHookCommandOutputBounded(t *testing.T) {
	s, _, _ := hookedServer(t, "hooks:\n"+cmdHookYAML("flood", "post", `["echo"]`, "flood", "    on_error: allow\n    timeout: 20s\n"))
	res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"}))
	if !res.GetSuccess() || !strings.Contains(res.GetObservation(), "s3cr3t") {
		t.Fatalf("on_error: allow must pass the result through: %q %s", res.GetObservation(), res.GetErrorMessage())
	}
	if got := testutil.ToFloat64(s.metrics.hookFailures.WithLabelValues("flood", "error")); got != 1 {
		t.Fatalf("oversized output not a failure: %v", got)
	}
}

func TestParseHooks(t *testing.T) {
	good := `
hooks:
  - name: guard
    phase: pre
    tools: ["write_*", bash]
    grpc: {address: "localhost:7070"}
  - name: dlp
    phase: post
    tools: ["*"]
    timeout: 500ms
    on_error: allow
    command: ["/usr/local/bin/dlp", "--strict"]
`
	hs, err := ParseHooks([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].Timeout != DefaultHookTimeout || hs[0].FailOpen || hs[0].Address != "localhost:7070" ||
		hs[1].Timeout != 500*time.Millisecond || !hs[1].FailOpen || len(hs[1].Command) != 2 || hs[1].Phase != HookPost {
		t.Fatalf("parsed %+v", hs)
	}
	if hs, err := ParseHooks([]byte("policies: {}\n")); err != nil || len(hs) != 0 {
		t.Fatalf("no hooks: %v %v", hs, err)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"hooks:\n  - {phase: pre, tools: [a], command: [x]}", "hooks[0].name"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], command: [x]}\n  - {name: a, phase: post, tools: [a], command: [x]}", "hooks[1].name"},
		{"hooks:\n  - {name: a, phase: during, tools: [a], command: [x]}", "hooks[0].phase"},
		{"hooks:\n  - {name: a, phase: pre, command: [x]}", "hooks[0].tools"},
		{"hooks:\n  - {name: a, phase: pre, tools: [\"a b\"], command: [x]}", "hooks[0].tools[0]"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], timeout: 1m, command: [x]}", "hooks[0].timeout"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], on_error: maybe, command: [x]}", "hooks[0].on_error"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a]}", "hooks[0]: set grpc"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], command: [x], grpc: {address: y}}", "not both"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], grpc: {}}", "hooks[0].grpc.address"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], command: [\"\"]}", "hooks[0].command[0]"},
		{"hooks:\n  - {name: a, phase: pre, tools: [a], command: [x], shell: true}", "shell"},
	} {
		_, err := ParseHooks([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n: error %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
	// A command that is not there stops the server from starting.
	missing := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(missing, []byte("hooks:\n  - {name: gone, phase: pre, tools: [a], command: [/nonexistent/hook]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	if _, err := New(Options{WorkspaceDir: filepath.Join(wd, "w"), ArtifactDir: filepath.Join(wd, "a"), ConfigFile: missing}); err == nil || !strings.Contains(err.Error(), `hook "gone"`) {
		t.Fatalf("New with a missing hook command: %v", err)
	}
	// A bad hook entry stops the server from starting.
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte("hooks:\n  - {name: a, phase: pre, tools: [a]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := New(Options{WorkspaceDir: filepath.Join(dir, "w"), ArtifactDir: filepath.Join(dir, "a"), ConfigFile: file}); err == nil || !strings.Contains(err.Error(), "hooks[0]") {
		t.Fatalf("New with a bad hook: %v", err)
	}
}

func TestParseCommandHookOutput(t *testing.T) {
	v, err := parseCommandPre([]byte(`{"decision":"REWRITE","arguments":{"x":"y"}}` + "\n"))
	if err != nil || v.decision != baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE || v.args["x"] != "y" {
		t.Fatalf("rewrite: %+v %v", v, err)
	}
	for _, bad := range []string{``, `{}`, `{"decision":"rewrite"}`, `{"decision":"rewrite","arguments":[1]}`, `{"decision":"allow"} {}`, `{"decision":"allow","x":1}`, `allow`} {
		if _, err := parseCommandPre([]byte(bad)); err == nil {
			t.Errorf("pre %q accepted", bad)
		}
	}
	p, err := parseCommandPost([]byte(`{"data":null,"annotation":"a"}`))
	if err != nil || !p.replace || p.data != nil || p.annotation != "a" {
		t.Fatalf("post null data: %+v %v", p, err)
	}
	p, err = parseCommandPost([]byte(`{}`))
	if err != nil || p.replace {
		t.Fatalf("post empty: %+v %v", p, err)
	}
}

func TestRedactAndAnnotate(t *testing.T) {
	got := redact(map[string]any{"a": []any{"key=abc", 1.0, map[string]any{"b": "abcabc"}}}, []string{"abc", ""})
	b, _ := json.Marshal(got)
	if want := `{"a":["key=[REDACTED]",1,{"b":"[REDACTED][REDACTED]"}]}`; string(b) != want {
		t.Fatalf("redact: %s, want %s", b, want)
	}
	type row struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	got = redact(map[string]any{"rows": []row{{"abc", 1}}}, []string{"abc"})
	if b, _ = json.Marshal(got); string(b) != `{"rows":[{"n":1,"name":"[REDACTED]"}]}` {
		t.Fatalf("typed rows not redacted: %s", b)
	}
	if _, err := structpb.NewValue(hookData(map[string]any{"rows": []row{{"a", 1}}})); err != nil {
		t.Fatalf("typed data not shown to a gRPC hook: %v", err)
	}
	d := redact(tool.Document{Text: "pw hunter2", Brief: "hunter2"}, []string{"hunter2"}).(tool.Document)
	if d.Text != "pw [REDACTED]" || d.Brief != redactedText {
		t.Fatalf("document: %+v", d)
	}
	res := &baagentv1.ToolExecutionResult{Observation: strings.Repeat("é", 100)}
	annotate(res, []string{"n"}, 50)
	if len(res.GetObservation()) > 50 || !strings.HasSuffix(res.GetObservation(), "(Note: n)") || !res.GetTruncated() {
		t.Fatalf("annotate over the bound: %d bytes %q", len(res.GetObservation()), res.GetObservation())
	}
}

func FuzzParseCommandHookOutput(f *testing.F) {
	for _, s := range []string{
		`{"decision":"allow"}`, `{"decision":"deny","reason":"no"}`, `{"decision":"rewrite","arguments":{"x":1}}`,
		`{"data":{"a":[1,2]},"redactions":["x"],"annotation":"n"}`, `{"data":null}`, `[]`, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := parseCommandPre(b); err == nil {
			switch v.decision {
			case baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_ALLOW, baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_DENY:
			case baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE:
				if v.args == nil {
					t.Fatal("rewrite without arguments accepted")
				}
			default:
				t.Fatalf("decision %v accepted", v.decision)
			}
		}
		if v, err := parseCommandPost(b); err == nil {
			out := redact(v.data, v.redactions)
			if _, err := json.Marshal(out); err != nil {
				t.Fatalf("redacted data not JSON: %v", err)
			}
			_ = boundText(v.annotation, maxHookAnnotationBytes)
		}
	})
}

// TestHookCacheAndIdempotency: post hooks run before the cache (a hit is
// the redacted result, and the hook is not asked again), and a keyed
// write is fingerprinted by its rewritten arguments.
func TestHookCacheAndIdempotency(t *testing.T) {
	h := &hookServer{
		preFn: func(_ context.Context, r *baagentv1.PreToolCallRequest) (*baagentv1.PreToolCallResponse, error) {
			p, _ := structpb.NewStruct(map[string]any{"x": strings.ToLower(r.GetParameters().AsMap()["x"].(string))})
			return &baagentv1.PreToolCallResponse{Decision: baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE, Parameters: p}, nil
		},
		postFn: func(context.Context, *baagentv1.PostToolCallRequest) (*baagentv1.PostToolCallResponse, error) {
			return &baagentv1.PostToolCallResponse{Redactions: []string{"s3cr3t"}}, nil
		},
	}
	addr := startHookServer(t, h)
	s, env, _ := hookedServer(t, "hooks:\n"+grpcHookYAML("lower", "pre", `["*"]`, addr, "")+grpcHookYAML("dlp", "post", `["*"]`, addr, ""))
	fn := func(_ context.Context, c tool.Call) (tool.Result, error) {
		return tool.Result{Data: map[string]any{"x": c.Args["x"], "note": "s3cr3t"}}, nil
	}
	readSpec := echoSpec("read")
	readSpec.CachePolicy = baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_SHORT
	read := &funcTool{spec: readSpec, fn: fn}
	writeSpec := echoSpec("write")
	writeSpec.ReadOnly = false
	write := &funcTool{spec: writeSpec, fn: fn}
	env.source.set(read, write)

	a := mustInvoke(t, s, req("read", map[string]any{"x": "Q"}))
	b := mustInvoke(t, s, req("read", map[string]any{"x": "q"})) // rewritten to the same arguments
	if read.calls.Load() != 1 || !b.GetCached() || strings.Contains(b.GetObservation(), "s3cr3t") || !strings.Contains(a.GetObservation(), redactedText) {
		t.Fatalf("cache: calls %d, cached %v, observations %q / %q", read.calls.Load(), b.GetCached(), a.GetObservation(), b.GetObservation())
	}
	if got := testutil.ToFloat64(s.metrics.hookCalls.WithLabelValues("dlp", "post", "modified")); got != 1 {
		t.Fatalf("post hook ran %v times, want 1 (the hit is served from the cache)", got)
	}

	w := req("write", map[string]any{"x": "A"})
	w.IdempotencyKey = "order-1"
	first := mustInvoke(t, s, w)
	w2 := req("write", map[string]any{"x": "a"}) // another spelling, the same call after the rewrite
	w2.IdempotencyKey, w2.ToolCallId = "order-1", "call_2"
	second := mustInvoke(t, s, w2)
	if write.calls.Load() != 1 || !second.GetReplayed() || second.GetObservation() != first.GetObservation() || strings.Contains(first.GetObservation(), "s3cr3t") {
		t.Fatalf("keyed write: calls %d, replayed %v, %q", write.calls.Load(), second.GetReplayed(), second.GetObservation())
	}
}
