package toolrunner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/external"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// objSpec is a read-only test tool accepting any object.
func objSpec(name string) tool.Spec {
	return tool.Spec{Name: name, Description: "test tool", Version: "1", ReadOnly: true, Source: "test",
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

// composeServer writes yaml as the tools file and starts a server whose
// source offers tools.
func composeServer(t testing.TB, yaml string, tools ...tool.Tool) (*Server, *testEnv) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s, env := newTestServer(t, func(o *Options) { o.ConfigFile = file })
	env.source.set(tools...)
	return s, env
}

func failing(code string) func(context.Context, tool.Call) (tool.Result, error) {
	return func(context.Context, tool.Call) (tool.Result, error) {
		return tool.Result{}, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, code, "it broke")
	}
}

func innerNames(r *baagentv1.ToolExecutionResult) []string {
	var out []string
	for _, c := range r.GetInnerCalls() {
		out = append(out, c.GetToolName()+"="+c.GetToolCallId())
	}
	return out
}

const seqYAML = `
compositions:
  - name: lookup_then_fetch
    description: Look a key up, then fetch its rows.
    input_schema:
      type: object
      properties: {key: {type: string}}
      required: [key]
    kind: sequential
    steps:
      - tool: lookup
        args: {key: "$input.key", note: "$$literal"}
      - tool: fetch
        args: {id: "$steps[0].data.ids[1]", all: "$steps[0].data", ok: "$steps[0].success"}
`

func TestCompositionSequential(t *testing.T) {
	var mu sync.Mutex
	var fetched map[string]any
	var lookedUp map[string]any
	lookup := &funcTool{spec: objSpec("lookup"), fn: func(_ context.Context, c tool.Call) (tool.Result, error) {
		mu.Lock()
		lookedUp = c.Args
		mu.Unlock()
		return tool.Result{Data: map[string]any{"ids": []any{"a", "b"}}}, nil
	}}
	fetch := &funcTool{spec: objSpec("fetch"), fn: func(_ context.Context, c tool.Call) (tool.Result, error) {
		mu.Lock()
		fetched = c.Args
		mu.Unlock()
		return tool.Result{Data: "rows of " + c.Args["id"].(string)}, nil
	}}
	s, env := composeServer(t, seqYAML, lookup, fetch)

	res := mustInvoke(t, s, req("lookup_then_fetch", map[string]any{"key": "k1"}))
	if !res.GetSuccess() {
		t.Fatalf("composition failed: %s", res.GetObservation())
	}
	if lookedUp["key"] != "k1" || lookedUp["note"] != "$literal" {
		t.Errorf("step 1 args %v", lookedUp)
	}
	if fetched["id"] != "b" || fetched["ok"] != true {
		t.Errorf("step 2 args %v", fetched)
	}
	if all, _ := fetched["all"].(map[string]any); all == nil || len(all["ids"].([]any)) != 2 {
		t.Errorf("step 2 all = %v", fetched["all"])
	}
	if got := strings.Join(innerNames(res), ","); got != "lookup=call_1/s0,fetch=call_1/s1" {
		t.Errorf("inner calls %s", got)
	}
	if ic := res.GetInnerCalls()[1]; ic.GetArguments().GetFields()["id"].GetStringValue() != "b" || !ic.GetResult().GetSuccess() {
		t.Errorf("inner call 2 = %v", ic)
	}
	for _, want := range []string{"Step 1 of 2: lookup (ok)", "Step 2 of 2: fetch (ok)", "rows of b"} {
		if !strings.Contains(res.GetObservation(), want) {
			t.Errorf("observation lacks %q:\n%s", want, res.GetObservation())
		}
	}
	if n := testutil.ToFloat64(s.metrics.compositions.WithLabelValues("lookup_then_fetch", "success")); n != 1 {
		t.Errorf("success count %v", n)
	}
	_ = env

	// The composition's own schema is checked before anything runs.
	bad := mustInvoke(t, s, req("lookup_then_fetch", map[string]any{}))
	if bad.GetSuccess() || bad.GetErrorCode() != "INVALID_ARGUMENTS" || len(bad.GetInnerCalls()) != 0 {
		t.Errorf("missing key: %v %s", bad.GetErrorCode(), bad.GetObservation())
	}
	if lookup.calls.Load() != 1 {
		t.Errorf("lookup ran %d times", lookup.calls.Load())
	}

	// ListTools offers it with its schema, read-only as its tools are.
	lt, err := s.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var def *baagentv1.ToolDefinition
	for _, d := range lt.GetTools() {
		if d.GetSchema().GetName() == "lookup_then_fetch" {
			def = d
		}
	}
	if def == nil || def.GetSource() != "composition" || !def.GetReadOnly() ||
		def.GetSchema().GetParameters().GetFields()["required"].GetListValue().GetValues()[0].GetStringValue() != "key" {
		t.Errorf("definition %v", def)
	}
}

func TestCompositionMappingError(t *testing.T) {
	lookup := &funcTool{spec: objSpec("lookup"), fn: ok(map[string]any{"ids": []any{"only"}})}
	fetch := &funcTool{spec: objSpec("fetch"), fn: ok("x")}
	s, _ := composeServer(t, seqYAML, lookup, fetch)
	res := mustInvoke(t, s, req("lookup_then_fetch", map[string]any{"key": "k"}))
	if res.GetSuccess() || res.GetErrorCode() != "COMPOSITION_MAPPING_FAILED" {
		t.Fatalf("result %v: %s", res.GetErrorCode(), res.GetObservation())
	}
	if !strings.Contains(res.GetErrorMessage(), "$steps[0].data.ids has 1 items, no index 1") || fetch.calls.Load() != 0 {
		t.Errorf("message %q, fetch ran %d", res.GetErrorMessage(), fetch.calls.Load())
	}
	if len(res.GetInnerCalls()) != 1 {
		t.Errorf("inner calls %v", innerNames(res))
	}
	if n := testutil.ToFloat64(s.metrics.compositions.WithLabelValues("lookup_then_fetch", "error")); n != 1 {
		t.Errorf("error count %v", n)
	}
}

func TestCompositionParallel(t *testing.T) {
	// Both tools wait for each other: they only finish if run at once.
	var started sync.WaitGroup
	started.Add(2)
	both := func(name string) *funcTool {
		return &funcTool{spec: objSpec(name), fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			started.Done()
			done := make(chan struct{})
			go func() { started.Wait(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			}
			return tool.Result{Data: name + ":" + c.Args["q"].(string)}, nil
		}}
	}
	s, _ := composeServer(t, `
compositions:
  - name: fan_out
    description: Ask both.
    kind: parallel
    steps:
      - {tool: left, args: {q: "$input.q"}}
      - {tool: right, args: {q: "$input.q"}}
`, both("left"), both("right"))
	res := mustInvoke(t, s, req("fan_out", map[string]any{"q": "hi"}))
	if !res.GetSuccess() {
		t.Fatalf("failed: %s", res.GetObservation())
	}
	for _, want := range []string{"Step 1 of 2: left (ok)\nleft:hi", "Step 2 of 2: right (ok)\nright:hi"} {
		if !strings.Contains(res.GetObservation(), want) {
			t.Errorf("observation lacks %q:\n%s", want, res.GetObservation())
		}
	}
	if got := strings.Join(innerNames(res), ","); got != "left=call_1/s0,right=call_1/s1" {
		t.Errorf("inner calls %s", got)
	}
}

func TestCompositionConditional(t *testing.T) {
	check := &funcTool{spec: objSpec("check"), fn: func(_ context.Context, c tool.Call) (tool.Result, error) {
		return tool.Result{Data: map[string]any{"status": c.Args["s"]}}, nil
	}}
	onOK := &funcTool{spec: objSpec("on_ok"), fn: ok("went ok")}
	other := &funcTool{spec: objSpec("otherwise"), fn: ok("went other")}
	s, _ := composeServer(t, `
compositions:
  - name: branch
    description: Check, then act on the status.
    kind: conditional
    steps:
      - {tool: check, args: {s: "$input.s"}}
      - tool: on_ok
        when: {path: "$.data.status", equals: "ok"}
        args: {was: "$steps[0].data.status"}
      - tool: otherwise
`, check, onOK, other)
	res := mustInvoke(t, s, req("branch", map[string]any{"s": "ok"}))
	if !res.GetSuccess() || strings.Join(innerNames(res), ",") != "check=call_1/s0,on_ok=call_1/s1" {
		t.Fatalf("ok branch: %v %s", innerNames(res), res.GetObservation())
	}
	res = mustInvoke(t, s, req("branch", map[string]any{"s": "bad"}))
	if !res.GetSuccess() || strings.Join(innerNames(res), ",") != "check=call_1/s0,otherwise=call_1/s2" {
		t.Fatalf("default branch: %v %s", innerNames(res), res.GetObservation())
	}
	if onOK.calls.Load() != 1 || other.calls.Load() != 1 {
		t.Errorf("branches ran %d/%d", onOK.calls.Load(), other.calls.Load())
	}
}

func TestCompositionFallback(t *testing.T) {
	yaml := `
compositions:
  - name: robust
    description: Primary, else backup.
    kind: sequential
    steps:
      - {tool: primary, fallback: [backup], args: {q: "$input.q"}}
      - {tool: after, args: {got: "$steps[0].data"}}
  - name: fragile
    description: Primary only.
    kind: sequential
    steps:
      - {tool: primary}
      - {tool: after}
`
	primary := &funcTool{spec: objSpec("primary"), fn: failing("PRIMARY_DOWN")}
	backup := &funcTool{spec: objSpec("backup"), fn: ok("from backup")}
	var got any
	after := &funcTool{spec: objSpec("after"), fn: func(_ context.Context, c tool.Call) (tool.Result, error) {
		got = c.Args["got"]
		return tool.Result{Data: "done"}, nil
	}}
	s, _ := composeServer(t, yaml, primary, backup, after)

	res := mustInvoke(t, s, req("robust", map[string]any{"q": "x"}))
	if !res.GetSuccess() || got != "from backup" {
		t.Fatalf("with fallback: %v, got %v: %s", res.GetSuccess(), got, res.GetObservation())
	}
	if n := strings.Join(innerNames(res), ","); n != "primary=call_1/s0,backup=call_1/s0/f1,after=call_1/s1" {
		t.Errorf("inner calls %s", n)
	}
	if ic := res.GetInnerCalls()[0]; ic.GetResult().GetSuccess() || ic.GetResult().GetErrorCode() != "PRIMARY_DOWN" {
		t.Errorf("failed inner call %v", ic.GetResult())
	}

	res = mustInvoke(t, s, req("fragile", nil))
	if res.GetSuccess() || res.GetErrorCode() != "COMPOSITION_STEP_FAILED" ||
		res.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR {
		t.Fatalf("without fallback: %v %v", res.GetErrorCode(), res.GetErrorType())
	}
	if !strings.Contains(res.GetErrorMessage(), "step 1 (primary) failed with PRIMARY_DOWN") || len(res.GetInnerCalls()) != 1 {
		t.Errorf("message %q, inner %v", res.GetErrorMessage(), innerNames(res))
	}
	if after.calls.Load() != 1 {
		t.Errorf("after ran %d times; a failed step must stop the sequence", after.calls.Load())
	}
}

func TestCompositionInnerPermissions(t *testing.T) {
	yaml := `
policies:
  tools:
    secret: {permission: deny}
compositions:
  - name: via_secret
    description: Uses a denied tool.
    kind: sequential
    steps:
      - {tool: open}
      - {tool: secret}
  - name: via_open
    description: Uses only open tools.
    kind: sequential
    steps:
      - {tool: open}
`
	open := &funcTool{spec: objSpec("open"), fn: ok("fine")}
	secret := &funcTool{spec: objSpec("secret"), fn: ok("leaked")}
	s, _ := composeServer(t, yaml, open, secret)

	res := mustInvoke(t, s, req("via_secret", nil))
	if res.GetSuccess() || res.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED ||
		!strings.Contains(res.GetErrorMessage(), "step 2 (secret) failed with TOOL_DENIED") || secret.calls.Load() != 0 {
		t.Fatalf("denied inner tool: %v %q, secret ran %d", res.GetErrorType(), res.GetErrorMessage(), secret.calls.Load())
	}

	// The caller's allow list applies to the inner calls too.
	r := req("via_open", nil)
	r.AllowedTools = &baagentv1.ToolAllowList{Names: []string{"via_open"}}
	res = mustInvoke(t, s, r)
	if res.GetSuccess() || !strings.Contains(res.GetErrorMessage(), "failed with TOOL_NOT_ALLOWED") {
		t.Fatalf("allow list: %v %q", res.GetSuccess(), res.GetErrorMessage())
	}
	r.AllowedTools = &baagentv1.ToolAllowList{Names: []string{"via_open", "open"}}
	if res = mustInvoke(t, s, r); !res.GetSuccess() {
		t.Fatalf("allowed: %s", res.GetObservation())
	}
	r.AllowedTools = &baagentv1.ToolAllowList{Names: []string{"open"}}
	if res = mustInvoke(t, s, r); res.GetErrorCode() != "TOOL_NOT_ALLOWED" || len(res.GetInnerCalls()) != 0 {
		t.Fatalf("composition itself not allowed: %v", res.GetErrorCode())
	}
}

func TestCompositionIdempotentInnerCalls(t *testing.T) {
	write := &funcTool{spec: tool.Spec{Name: "write", Description: "w", Parameters: json.RawMessage(`{"type":"object"}`)}, fn: ok("written")}
	s, _ := composeServer(t, `
compositions:
  - name: write_twice
    description: Two writes.
    kind: sequential
    steps:
      - {tool: write, args: {n: 1}}
      - {tool: write, args: {n: 2}}
`, write)
	r := req("write_twice", nil)
	r.IdempotencyKey = "k-1"
	first := mustInvoke(t, s, r)
	again := mustInvoke(t, s, r)
	if !first.GetSuccess() || !again.GetSuccess() || write.calls.Load() != 2 {
		t.Fatalf("writes ran %d times, want 2 (the redelivery is replayed)", write.calls.Load())
	}
	if !again.GetInnerCalls()[0].GetResult().GetReplayed() || again.GetInnerCalls()[1].GetResult().GetIdempotencyKey() != "k-1/s1" {
		t.Errorf("redelivery inner results %v", again.GetInnerCalls())
	}
}

func TestCompositionConfigErrors(t *testing.T) {
	six := "compositions:\n  - name: big\n    description: d\n    kind: sequential\n    steps:\n" + strings.Repeat("      - {tool: a}\n", 6)
	cases := []struct{ name, yaml, want string }{
		{"too many steps", six, "compositions[0] (big).steps: at most 5 steps, got 6"},
		{"bad kind", "compositions:\n  - {name: c, description: d, kind: loop, steps: [{tool: a}]}", `compositions[0] (c).kind: must be one of sequential, parallel, conditional, got "loop"`},
		{"no description", "compositions:\n  - {name: c, kind: parallel, steps: [{tool: a}]}", "compositions[0] (c).description: required"},
		{"bad selector", "compositions:\n  - {name: c, description: d, kind: sequential, steps: [{tool: a, args: {x: \"$input..y\"}}]}", "compositions[0] (c).steps[0].args.x: $input..y: empty key"},
		{"forward reference", "compositions:\n  - {name: c, description: d, kind: sequential, steps: [{tool: a, args: {x: \"$steps[1].data\"}}, {tool: b}]}", "step 0 can only use the results of the steps before it"},
		{"parallel reference", "compositions:\n  - {name: c, description: d, kind: parallel, steps: [{tool: a}, {tool: b, args: {x: \"$steps[0].data\"}}]}", "parallel steps run at once"},
		{"nested", "compositions:\n  - {name: c, description: d, kind: sequential, steps: [{tool: c}]}", `"c" is a composition; compositions do not nest`},
		{"when outside conditional", "compositions:\n  - {name: c, description: d, kind: sequential, steps: [{tool: a}, {tool: b, when: {path: \"$.success\", equals: true}}]}", "steps[1].when: only the branches"},
		{"duplicate", "compositions:\n  - {name: c, description: d, kind: sequential, steps: [{tool: a}]}\n  - {name: c, description: d, kind: sequential, steps: [{tool: a}]}", `"c" is defined twice`},
		{"unknown key", "compositions:\n  - {name: c, description: d, kind: sequential, stepz: []}", "field stepz not found"},
		{"too many fallbacks", "compositions:\n  - {name: c, description: d, kind: sequential, steps: [{tool: a, fallback: [b, c1, d, e]}]}", "at most 3 fallback tools, got 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCompositions([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if c, err := ParseCompositions([]byte(strings.Replace(six, "      - {tool: a}\n", "", 1))); err != nil || len(c[0].Steps) != 5 {
		t.Fatalf("5 steps: %v", err)
	}
	// A built-in's name is refused when the server starts.
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte("compositions:\n  - {name: file_read, description: d, kind: sequential, steps: [{tool: a}]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := Options{WorkspaceDir: filepath.Join(t.TempDir(), "w"), ArtifactDir: filepath.Join(t.TempDir(), "a"), ConfigFile: file}
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), "composition file_read") {
		t.Fatalf("New: %v", err)
	}
}

func TestCompositionCallerLeaves(t *testing.T) {
	slow := &funcTool{spec: objSpec("slow"), fn: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}}
	s, _ := composeServer(t, "compositions:\n  - {name: c, description: d, kind: parallel, steps: [{tool: slow}, {tool: slow}]}", slow)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Invoke(ctx, &baagentv1.InvokeRequest{Request: req("c", nil)}); err == nil {
		t.Fatal("a caller that left got a result")
	}
}

// TestExampleToolsFileCompositions: the example tools file's compositions
// load, and the external tool loader accepts the section.
func TestExampleToolsFileCompositions(t *testing.T) {
	file := filepath.Join("..", "..", "examples", "config", "tools.yaml")
	cs, err := LoadCompositions(file)
	if err != nil || len(cs) == 0 {
		t.Fatalf("compositions %v: %v", cs, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := external.Parse(b, nil); err != nil {
		t.Fatalf("external loader: %v", err)
	}
	// And it runs over the sample data.
	s, _ := newTestServer(t, func(o *Options) {
		o.ConfigFile, o.WorkspaceSeedDir = file, filepath.Join("..", "..", "examples", "data")
	})
	res := mustInvoke(t, s, req("products_overview", nil))
	if !res.GetSuccess() || len(res.GetInnerCalls()) != 2 || !strings.Contains(res.GetObservation(), "| category | products |") {
		t.Fatalf("products_overview: %s", res.GetObservation())
	}
}

func TestCompositionApprovalAndDeny(t *testing.T) {
	yaml := `
policies:
  tools:
    risky: {permission: ask}
    hidden: {permission: deny}
compositions:
  - name: guarded
    description: Needs approval for its second step.
    kind: sequential
    steps:
      - {tool: open}
      - {tool: risky, fallback: [open]}
  - name: hidden
    description: Denied by policy.
    kind: sequential
    steps:
      - {tool: open}
`
	open := &funcTool{spec: objSpec("open"), fn: ok("fine")}
	risky := &funcTool{spec: objSpec("risky"), fn: ok("did it")}
	s, _ := composeServer(t, yaml, open, risky)

	res := mustInvoke(t, s, req("guarded", nil))
	if res.GetSuccess() || !res.GetApprovalRequired() || risky.calls.Load() != 0 {
		t.Fatalf("unapproved: success %v approval %v risky ran %d", res.GetSuccess(), res.GetApprovalRequired(), risky.calls.Load())
	}
	if n := strings.Join(innerNames(res), ","); n != "open=call_1/s0,risky=call_1/s1" {
		t.Errorf("a step awaiting approval tried its fallback: %s", n)
	}
	if n := testutil.ToFloat64(s.metrics.compositions.WithLabelValues("guarded", "approval_required")); n != 1 {
		t.Errorf("approval_required count %v", n)
	}
	r := req("guarded", nil)
	r.Approved = true
	if res = mustInvoke(t, s, r); !res.GetSuccess() || risky.calls.Load() != 1 {
		t.Fatalf("approved: %s", res.GetObservation())
	}

	if res = mustInvoke(t, s, req("hidden", nil)); res.GetErrorCode() != "TOOL_DENIED" || open.calls.Load() != 2 {
		t.Fatalf("denied composition: %v, open ran %d", res.GetErrorCode(), open.calls.Load())
	}
	lt, err := s.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range lt.GetTools() {
		names = append(names, d.GetSchema().GetName())
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "guarded") || strings.Contains(got, "hidden") {
		t.Errorf("listed %s", got)
	}
}

func TestCompositionParallelPartialFailureAndNumericPredicate(t *testing.T) {
	count := &funcTool{spec: objSpec("count"), fn: ok(map[string]any{"n": 3})}
	broken := &funcTool{spec: objSpec("broken"), fn: failing("BROKEN")}
	three := &funcTool{spec: objSpec("three"), fn: ok("was three")}
	s, _ := composeServer(t, `
compositions:
  - name: both
    description: d
    kind: parallel
    steps: [{tool: count}, {tool: broken}]
  - name: by_count
    description: d
    kind: conditional
    steps:
      - {tool: count}
      - {tool: three, when: {path: "$.data.n", equals: 3}}
`, count, broken, three)
	res := mustInvoke(t, s, req("both", nil))
	if res.GetSuccess() || !strings.Contains(res.GetErrorMessage(), "step 2 (broken) failed with BROKEN") {
		t.Fatalf("parallel with a failure: %v %q", res.GetSuccess(), res.GetErrorMessage())
	}
	for _, want := range []string{"Step 1 of 2: count (ok)", "Step 2 of 2: broken (failed)"} {
		if !strings.Contains(res.GetObservation(), want) {
			t.Errorf("observation lacks %q:\n%s", want, res.GetObservation())
		}
	}
	// An int in the tool's data equals the YAML's 3.
	if res = mustInvoke(t, s, req("by_count", nil)); !res.GetSuccess() || three.calls.Load() != 1 {
		t.Fatalf("numeric predicate: %v", innerNames(res))
	}
}
