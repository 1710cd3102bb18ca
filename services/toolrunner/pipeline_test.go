package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

const (
	errTimeout   = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT
	errRate      = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT
	errResource  = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR
	errTransient = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR
	errDenied    = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED
	errInvalid   = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS
	errNotFound  = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND
	errExec      = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR
)

func ok(data any) func(context.Context, tool.Call) (tool.Result, error) {
	return func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{Data: data}, nil }
}

func TestUnknownToolAndErrorObservation(t *testing.T) {
	t.Parallel()

	s, _ := newTestServer(t, nil)
	r := req("no_such_tool", nil)
	r.ToolCallId = "call_xyz"
	res := mustInvoke(t, s, r)
	if res.Success || res.ErrorType != errNotFound || res.ErrorCode != "TOOL_NOT_FOUND" {
		t.Fatalf("result %v", res)
	}
	want := "Operation failed.\n\nError Type: not_found\nError Code: TOOL_NOT_FOUND\nError Message: there is no tool named \"no_such_tool\"; use one of the tools you were given\n\nTool Call ID: call_xyz"
	if res.Observation != want {
		t.Errorf("observation:\n%s\nwant:\n%s", res.Observation, want)
	}
}

func TestArgumentsValidatedAgainstSchema(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	echo := &funcTool{spec: echoSpec("echo"), fn: ok("hi")}
	env.source.set(echo)
	for _, args := range []map[string]any{{"x": 5.0}, {"y": "z"}} {
		res := mustInvoke(t, s, req("echo", args))
		if res.Success || res.ErrorType != errInvalid || res.ErrorCode != "INVALID_ARGUMENTS" {
			t.Fatalf("args %v: %v", args, res)
		}
	}
	if echo.calls.Load() != 0 {
		t.Error("tool ran with invalid arguments")
	}
	res := mustInvoke(t, s, req("file_read", map[string]any{"path": "x", "offset": -1.0}))
	if res.ErrorCode != "INVALID_ARGUMENTS" || !strings.Contains(res.ErrorMessage, "offset") {
		t.Errorf("built-in schema not enforced: %v", res)
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()

	cfg := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(cfg, []byte("policies:\n  tools:\n    danger: {permission: deny}\n    \"ask_*\": {permission: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, env := newTestServer(t, func(o *Options) { o.ConfigFile = cfg })
	danger := &funcTool{spec: echoSpec("danger"), fn: ok("boom")}
	ask := &funcTool{spec: echoSpec("ask_me"), fn: ok("done")}
	free := &funcTool{spec: echoSpec("free"), fn: ok("done")}
	env.source.set(danger, ask, free)

	if res := mustInvoke(t, s, req("danger", nil)); res.Success || res.ErrorType != errDenied || res.ErrorCode != "TOOL_DENIED" {
		t.Errorf("deny: %v", res)
	}
	res := mustInvoke(t, s, req("ask_me", nil))
	if res.Success || !res.ApprovalRequired || res.ErrorCode != "APPROVAL_REQUIRED" {
		t.Errorf("ask without approval: %v", res)
	}
	if danger.calls.Load()+ask.calls.Load() != 0 {
		t.Fatal("a denied or unapproved tool ran")
	}
	r := req("ask_me", nil)
	r.Approved = true
	if res := mustInvoke(t, s, r); !res.Success || ask.calls.Load() != 1 {
		t.Errorf("ask with approval: %v", res)
	}
	// The caller's allowed tools (a skill's context modifier).
	r = req("free", nil)
	r.AllowedTools = &baagentv1.ToolAllowList{Names: []string{"sql_*"}}
	if res := mustInvoke(t, s, r); res.Success || res.ErrorCode != "TOOL_NOT_ALLOWED" {
		t.Errorf("not in allowed tools: %v", res)
	}
	r.AllowedTools = &baagentv1.ToolAllowList{Names: []string{"fr??"}}
	if res := mustInvoke(t, s, r); !res.Success {
		t.Errorf("allowed by glob: %v", res)
	}
	r.AllowedTools = &baagentv1.ToolAllowList{} // present and empty: no tools
	if res := mustInvoke(t, s, r); res.ErrorCode != "TOOL_NOT_ALLOWED" {
		t.Errorf("empty allow list: %v", res)
	}

	list, err := s.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list.Tools {
		names = append(names, d.GetSchema().GetName())
		if d.GetSchema().GetName() == "ask_me" && d.GetPermission() != baagentv1.ToolPermission_TOOL_PERMISSION_ASK {
			t.Errorf("ask_me permission %v", d.GetPermission())
		}
	}
	if got := strings.Join(names, ","); got != "artifact_read,ask_me,file_edit,file_read,file_write,free,glob,grep,sql_query" {
		t.Errorf("ListTools = %s (denied tools hidden, sorted)", got)
	}
	list, _ = s.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: "acme", AllowedTools: &baagentv1.ToolAllowList{Names: []string{"file_*"}}})
	names = names[:0]
	for _, d := range list.Tools {
		names = append(names, d.GetSchema().GetName())
	}
	if got := strings.Join(names, ","); got != "artifact_read,file_edit,file_read,file_write" {
		t.Errorf("filtered ListTools = %s", got)
	}
}

func TestSourceToolsComeAndGo(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	if res := mustInvoke(t, s, req("remote", nil)); res.ErrorCode != "TOOL_NOT_FOUND" {
		t.Fatalf("before: %v", res)
	}
	env.source.set(&funcTool{spec: echoSpec("remote"), fn: ok("here")})
	if res := mustInvoke(t, s, req("remote", nil)); !res.Success || res.Observation != "here" {
		t.Fatalf("while offered: %v", res)
	}
	// A source cannot shadow a built-in.
	env.source.set(&funcTool{spec: echoSpec("file_read"), fn: ok("shadow")})
	if res := mustInvoke(t, s, req("file_read", map[string]any{"path": "missing"})); res.ErrorCode != "FILE_NOT_FOUND" {
		t.Fatalf("built-in shadowed: %v", res)
	}
	env.source.set()
	if res := mustInvoke(t, s, req("remote", nil)); res.ErrorCode != "TOOL_NOT_FOUND" {
		t.Fatalf("after: %v", res)
	}
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	var mu sync.Mutex
	var timeouts []time.Duration
	failures := map[string][]error{}
	flaky := func(name string, errs ...error) *funcTool {
		failures[name] = errs
		return &funcTool{spec: echoSpec(name), fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			if dl, ok := ctx.Deadline(); ok {
				timeouts = append(timeouts, time.Until(dl).Round(time.Second))
			}
			if c.Attempt < len(failures[name]) {
				return tool.Result{}, failures[name][c.Attempt]
			}
			return tool.Result{Data: "ok"}, nil
		}}
	}
	transient := flaky("transient",
		tool.Errorf(errRate, "RATE", "slow down"),
		tool.Errorf(errResource, "BUSY", "busy"),
		tool.Errorf(errTransient, "BLIP", "blip"))
	permanent := flaky("permanent", tool.Errorf(errInvalid, "BAD", "bad input"))
	plain := flaky("plain", errors.New("boom"))
	always := flaky("always", tool.Errorf(errRate, "RATE", "1"), tool.Errorf(errRate, "RATE", "2"),
		tool.Errorf(errRate, "RATE", "3"), tool.Errorf(errRate, "RATE", "4"))
	env.source.set(transient, permanent, plain, always)

	res := mustInvoke(t, s, req("transient", nil))
	if !res.Success || res.RetryCount != 3 || res.LastError != "blip" {
		t.Fatalf("retryable errors: %v", res)
	}
	// Backoff: 1 s × 1.5^n, capped at 10 s.
	if got := env.clock.Sleeps(); len(got) != 3 || got[0] != time.Second || got[1] != 1500*time.Millisecond || got[2] != 2250*time.Millisecond {
		t.Errorf("delays %v", got)
	}
	// Timeout doubles per retry: 120 s, 240 s, then capped at 300 s.
	if len(timeouts) != 4 || timeouts[0] != 120*time.Second || timeouts[1] != 240*time.Second || timeouts[2] != 300*time.Second || timeouts[3] != 300*time.Second {
		t.Errorf("attempt timeouts %v", timeouts)
	}

	res = mustInvoke(t, s, req("permanent", nil))
	if res.Success || res.RetryCount != 0 || res.ErrorType != errInvalid || permanent.calls.Load() != 1 {
		t.Errorf("permanent error retried: %v", res)
	}
	res = mustInvoke(t, s, req("plain", nil))
	if res.Success || res.ErrorType != errExec || res.ErrorCode != "EXECUTION_ERROR" || plain.calls.Load() != 1 {
		t.Errorf("untyped error: %v", res)
	}
	res = mustInvoke(t, s, req("always", nil))
	if res.Success || res.RetryCount != 3 || res.LastError != "4" || always.calls.Load() != 4 || res.ErrorType != errRate {
		t.Errorf("retries exhausted: %v (calls %d)", res, always.calls.Load())
	}

	// Per-call override: one retry, and only TRANSIENT_ERROR.
	r := req("transient", nil)
	r.RetryPolicy = &baagentv1.ToolRetryPolicy{MaxRetries: proto.Int32(1), RetryOn: []baagentv1.ToolErrorType{errTransient}}
	transient.calls.Store(0)
	if res := mustInvoke(t, s, r); res.Success || res.RetryCount != 0 || res.ErrorType != errRate {
		t.Errorf("override retry_on: %v", res)
	}
}

func TestRetryPolicyMath(t *testing.T) {
	t.Parallel()

	p := DefaultRetryPolicy()
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3375 * time.Millisecond, 5062500 * time.Microsecond, 7593750 * time.Microsecond, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := p.Delay(i); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i, got, w)
		}
	}
	if got := p.Timeout(time.Minute, 0); got != time.Minute {
		t.Errorf("Timeout(1m, 0) = %v", got)
	}
	if got := p.Timeout(time.Minute, 2); got != 4*time.Minute {
		t.Errorf("Timeout(1m, 2) = %v", got)
	}
	if got := p.Timeout(time.Minute, 3); got != 5*time.Minute {
		t.Errorf("Timeout(1m, 3) = %v (cap)", got)
	}
	for _, typ := range []baagentv1.ToolErrorType{errTimeout, errRate, errResource, errTransient} {
		if !p.ShouldRetry(typ, 0) || !p.ShouldRetry(typ, 2) || p.ShouldRetry(typ, 3) {
			t.Errorf("%v: retryable up to 3 retries", typ)
		}
	}
	for typ := baagentv1.ToolErrorType(5); typ <= 11; typ++ {
		if p.ShouldRetry(typ, 0) {
			t.Errorf("%v retried", typ)
		}
	}
	// A policy naming a permanent type still never retries it.
	p = p.overlay(&baagentv1.ToolRetryPolicy{RetryOn: []baagentv1.ToolErrorType{errInvalid, errTimeout}})
	if p.ShouldRetry(errInvalid, 0) || !p.ShouldRetry(errTimeout, 0) {
		t.Error("overlay kept a permanent type")
	}
}

func TestTimeoutAndRetryOnTimeout(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	slow := &funcTool{spec: echoSpec("slow"), fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}}
	stubborn := &funcTool{spec: echoSpec("stubborn"), fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{}, errors.New("gave up") // not a typed error: the deadline still makes it a TIMEOUT
	}}
	env.source.set(slow, stubborn)
	r := req("slow", nil)
	r.TimeoutMs = 20
	r.RetryOnTimeout = proto.Bool(false)
	res := mustInvoke(t, s, r)
	if res.Success || res.ErrorType != errTimeout || res.ErrorCode != "TIMEOUT" || res.RetryCount != 0 || slow.calls.Load() != 1 {
		t.Fatalf("timeout without retry: %v", res)
	}
	r = req("stubborn", nil)
	r.TimeoutMs = 10
	r.RetryPolicy = &baagentv1.ToolRetryPolicy{MaxRetries: proto.Int32(1)}
	res = mustInvoke(t, s, r)
	if res.ErrorType != errTimeout || res.RetryCount != 1 || stubborn.calls.Load() != 2 || !strings.Contains(res.ErrorMessage, "20ms") {
		t.Fatalf("timeout retried with a doubled timeout: %v", res)
	}
}

func TestPanickingToolIsInternalError(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	env.source.set(&funcTool{spec: echoSpec("panics"), fn: func(context.Context, tool.Call) (tool.Result, error) { panic("bug") }})
	res := mustInvoke(t, s, req("panics", nil))
	if res.Success || res.ErrorType != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR || res.ErrorCode != "TOOL_PANIC" {
		t.Fatalf("%v", res)
	}
}

func TestIdempotencyAndCache(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	counter := 0
	var mu sync.Mutex
	count := func(context.Context, tool.Call) (tool.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		counter++
		return tool.Result{Data: map[string]any{"run": float64(counter)}}, nil
	}
	writeSpec := echoSpec("write")
	writeSpec.ReadOnly = false
	writeSpec.CachePolicy = baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_LONG // ignored: writes are never cached
	write := &funcTool{spec: writeSpec, fn: count}
	readSpec := echoSpec("read")
	readSpec.CachePolicy = baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_SHORT
	read := &funcTool{spec: readSpec, fn: count}
	nocache := &funcTool{spec: echoSpec("nocache"), fn: count}
	env.source.set(write, read, nocache)

	// A write with an explicit idempotency key runs once; the retry is
	// answered from its record.
	r := req("write", map[string]any{"x": "a"})
	r.IdempotencyKey = "order-42"
	first := mustInvoke(t, s, r)
	r2 := proto.Clone(r).(*baagentv1.ToolInvocationRequest)
	r2.ToolCallId = "call_2"
	second := mustInvoke(t, s, r2)
	if write.calls.Load() != 1 || !second.Replayed || second.Cached || second.ToolCallId != "call_2" || second.Observation != first.Observation || second.IdempotencyKey != "order-42" {
		t.Fatalf("second identical write ran or lost its id: calls %d, %v", write.calls.Load(), second)
	}
	r3 := proto.Clone(r2).(*baagentv1.ToolInvocationRequest)
	r3.Parameters.Fields["x"] = structValue("b")
	if res := mustInvoke(t, s, r3); res.ErrorCode != "IDEMPOTENCY_KEY_REUSED" || write.calls.Load() != 1 {
		t.Fatalf("key reused with other arguments: %v", res)
	}
	// Without a key, writes are never cached.
	mustInvoke(t, s, req("write", map[string]any{"x": "a"}))
	mustInvoke(t, s, req("write", map[string]any{"x": "a"}))
	if write.calls.Load() != 3 {
		t.Fatalf("write cached: %d calls", write.calls.Load())
	}

	// A read-only tool with TTL_SHORT: cached for 5 minutes, keyed without
	// tool_call_id, with the new call's id on the hit.
	a := mustInvoke(t, s, req("read", map[string]any{"x": "q"}))
	rb := req("read", map[string]any{"x": "q"})
	rb.ToolCallId = "call_other"
	b := mustInvoke(t, s, rb)
	if read.calls.Load() != 1 || !b.Cached || b.ToolCallId != "call_other" || a.IdempotencyKey != b.IdempotencyKey || a.IdempotencyKey == "" {
		t.Fatalf("cache miss within TTL: %v", b)
	}
	if !strings.HasPrefix(b.Observation, a.Observation) || !strings.Contains(b.Observation, "Cached result from 0s ago") {
		t.Fatalf("cached observation does not say so: %q", b.Observation)
	}
	// Each call of a run carries its own idempotency key: the cache
	// follows the derived key all the same.
	rk := req("read", map[string]any{"x": "q"})
	rk.IdempotencyKey = "run-1:s3:c0"
	if res := mustInvoke(t, s, rk); !res.Cached || read.calls.Load() != 1 || res.IdempotencyKey != "run-1:s3:c0" {
		t.Fatalf("a keyed read-only call is not served from the cache: %v", res)
	}
	// Another caller or permission level is another key.
	rc := req("read", map[string]any{"x": "q"})
	rc.CallerId = "skill:other"
	if res := mustInvoke(t, s, rc); res.Cached {
		t.Error("cache shared across callers")
	}
	rc = req("read", map[string]any{"x": "q"})
	rc.PermissionLevel = "admin"
	if res := mustInvoke(t, s, rc); res.Cached {
		t.Error("cache shared across permission levels")
	}
	env.clock.Advance(5*time.Minute - time.Second)
	if res := mustInvoke(t, s, req("read", map[string]any{"x": "q"})); !res.Cached {
		t.Error("expired before 5 minutes")
	}
	env.clock.Advance(time.Second)
	if res := mustInvoke(t, s, req("read", map[string]any{"x": "q"})); res.Cached {
		t.Error("still cached after 5 minutes")
	}

	// The request's policy overrides; NO_CACHE is the default.
	for _, tc := range []struct {
		policy baagentv1.ToolCachePolicy
		ttl    time.Duration
	}{
		{baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_CACHEABLE, time.Hour},
		{baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_MEDIUM, time.Hour},
		{baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_LONG, 24 * time.Hour},
	} {
		arg := map[string]any{"x": tc.policy.String()}
		rq := req("nocache", arg)
		rq.CachePolicy = tc.policy
		mustInvoke(t, s, rq)
		env.clock.Advance(tc.ttl - time.Second)
		if res := mustInvoke(t, s, rq); !res.Cached {
			t.Errorf("%v: expired early", tc.policy)
		}
		env.clock.Advance(time.Second)
		if res := mustInvoke(t, s, rq); res.Cached {
			t.Errorf("%v: kept past %v", tc.policy, tc.ttl)
		}
	}
	before := nocache.calls.Load()
	mustInvoke(t, s, req("nocache", nil))
	mustInvoke(t, s, req("nocache", nil))
	if nocache.calls.Load() != before+2 {
		t.Error("NO_CACHE default cached")
	}
	if got := testutil.ToFloat64(s.metrics.cacheHits.WithLabelValues("read")); got != 3 {
		t.Errorf("cache hit metric = %v", got)
	}
}

func TestConcurrentDuplicateRunsOnce(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	release := make(chan struct{})
	spec := echoSpec("slow_write")
	spec.ReadOnly = false
	w := &funcTool{spec: spec, fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		<-release
		return tool.Result{Data: "written"}, nil
	}}
	env.source.set(w)
	var wg sync.WaitGroup
	results := make([]*baagentv1.ToolExecutionResult, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req("slow_write", nil)
			r.IdempotencyKey = "same"
			results[i] = mustInvoke(t, s, r)
		}()
	}
	testkit.Eventually(t, 5*time.Second, "the first call to run", func() bool { return w.calls.Load() > 0 })
	close(release)
	wg.Wait()
	cached := 0
	for _, r := range results {
		if !r.Success {
			t.Fatalf("%v", r)
		}
		if r.Replayed {
			cached++
		}
	}
	if w.calls.Load() != 1 || cached != 3 {
		t.Fatalf("calls %d, cached %d", w.calls.Load(), cached)
	}
}

func TestOutputLevelDecisionChain(t *testing.T) {
	t.Parallel()

	const (
		unset    = baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED
		brief    = baagentv1.OutputLevel_OUTPUT_LEVEL_BRIEF
		standard = baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD
		full     = baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	)
	for _, tc := range []struct {
		name              string
		explicit, toolDef baagentv1.OutputLevel
		usage             float64
		global, want      baagentv1.OutputLevel
	}{
		{"explicit wins over everything", full, brief, 0.95, standard, full},
		{"tool default wins over context usage", unset, full, 0.95, standard, full},
		{"context usage above 0.8 forces BRIEF", unset, unset, 0.81, standard, brief},
		{"context usage at 0.8 does not", unset, unset, 0.8, standard, standard},
		{"global default", unset, unset, 0, standard, standard},
		{"configured global default", unset, unset, 0, brief, brief},
		{"no global default is STANDARD", unset, unset, 0, unset, standard},
	} {
		if got := outputLevel(tc.explicit, tc.toolDef, tc.usage, tc.global); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Through the pipeline, with the level reported in the result.
	s, env := newTestServer(t, nil)
	items := []any{map[string]any{"id": 1.0, "name": "Alice"}, map[string]any{"id": 2.0, "name": "Bob"}, map[string]any{"id": 3.0}, map[string]any{"id": 4.0}}
	env.source.set(&funcTool{spec: echoSpec("list"), fn: ok(items)})
	r := req("list", nil)
	r.ContextUsage = 0.9
	res := mustInvoke(t, s, r)
	if res.OutputLevel != brief || !strings.HasPrefix(res.Observation, "Found 4 items\n\n(Preview only. The complete data is artifact_") || !res.Truncated {
		t.Fatalf("BRIEF: %v", res)
	}
	res = mustInvoke(t, s, req("list", nil))
	wantStd := "Found 4 items:\n  - {\"id\":1,\"name\":\"Alice\"}\n  - {\"id\":2,\"name\":\"Bob\"}\n  - {\"id\":3}\n  ... and 1 more"
	if res.OutputLevel != standard || !strings.HasPrefix(res.Observation, wantStd) {
		t.Fatalf("STANDARD: %q", res.Observation)
	}
}

func TestArtifactsThresholdAndFull(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, func(o *Options) { o.LargeDataBytes = 1000 })
	small := &funcTool{spec: echoSpec("small"), fn: ok("just a little text")}
	big := &funcTool{spec: echoSpec("big"), fn: ok(strings.Repeat("0123456789\n", 100))} // 1100 bytes
	env.source.set(small, big)

	res := mustInvoke(t, s, req("small", nil))
	if res.ArtifactId != "" || res.Observation != "just a little text" || res.DataSizeBytes != 18 || len(res.DataHash) != 16 {
		t.Fatalf("small STANDARD: %v", res)
	}
	r := req("small", nil)
	r.OutputLevel = baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	res = mustInvoke(t, s, r)
	if res.ArtifactId == "" || !strings.HasPrefix(res.Observation, "Data stored as artifact: "+res.ArtifactId) ||
		!strings.HasSuffix(res.Observation, "Data summary: just a little text") || res.DataSummary != "just a little text" {
		t.Fatalf("FULL: %v", res)
	}
	res = mustInvoke(t, s, req("big", nil))
	if res.ArtifactId == "" || !strings.Contains(res.Observation, "Data stored as artifact: "+res.ArtifactId) || res.DataSizeBytes != 1100 {
		t.Fatalf("over the threshold: %v", res)
	}
	// Never a path: not the artifact dir, not the workspace dir.
	for _, dir := range []string{env.opts.ArtifactDir, env.opts.WorkspaceDir, "/"} {
		if strings.Contains(res.Observation, dir) {
			t.Fatalf("observation names a path: %q", res.Observation)
		}
	}
	// The artifact reads back through artifact_read and ReadArtifact, in
	// this conversation only.
	ar := mustInvoke(t, s, req("artifact_read", map[string]any{"artifact_id": res.ArtifactId, "limit": 2.0}))
	if !ar.Success || !strings.HasPrefix(ar.Observation, "     1\t0123456789\n     2\t0123456789\n") {
		t.Fatalf("artifact_read: %v", ar)
	}
	page, err := s.ReadArtifact(context.Background(), &baagentv1.ReadArtifactRequest{Tenant: "acme", ConversationId: "conv-1", ArtifactId: res.ArtifactId, Offset: 98})
	if err != nil || page.TotalLines != 100 || page.Content != "0123456789\n0123456789" || page.NextOffset != -1 || page.SizeBytes != 1100 {
		t.Fatalf("ReadArtifact: %v %v", page, err)
	}
	other := req("artifact_read", map[string]any{"artifact_id": res.ArtifactId})
	other.ConversationId = "conv-2"
	if res := mustInvoke(t, s, other); res.ErrorCode != "ARTIFACT_NOT_FOUND" {
		t.Fatalf("another conversation read it: %v", res)
	}
	if _, err := s.ReadArtifact(context.Background(), &baagentv1.ReadArtifactRequest{Tenant: "acme", ConversationId: "conv-2", ArtifactId: res.ArtifactId}); err == nil {
		t.Fatal("ReadArtifact across conversations")
	}
	if got := testutil.ToFloat64(s.metrics.artifactBytes); got != 18+1100 {
		t.Errorf("artifact bytes metric %v", got)
	}
}

func TestTruncationAt50KiB(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	doc := tool.Document{Text: strings.Repeat("日本語テキスト", 5000), Brief: "long"} // 105 000 bytes, < 1 MiB
	env.source.set(&funcTool{spec: echoSpec("long"), fn: ok(doc)})
	res := mustInvoke(t, s, req("long", nil))
	if !res.Truncated || res.ArtifactId == "" || len(res.Observation) > 50*1024 {
		t.Fatalf("truncated %v, artifact %q, %d bytes", res.Truncated, res.ArtifactId, len(res.Observation))
	}
	if !strings.HasSuffix(res.Observation, "(Output truncated at 51200 bytes. The complete output is "+res.ArtifactId+"; read it with artifact_read using offset, limit or pattern.)") {
		t.Errorf("hint: %q", res.Observation[len(res.Observation)-200:])
	}
	if !json.Valid([]byte(`"`+strings.ReplaceAll(res.Observation, "\n", `\n`)+`"`)) || strings.ContainsRune(res.Observation, '\uFFFD') {
		t.Error("observation cut inside a character")
	}
}

func TestReleaseConversation(t *testing.T) {
	t.Parallel()

	seed := t.TempDir()
	if err := os.WriteFile(filepath.Join(seed, "orders.csv"), []byte("id\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, env := newTestServer(t, func(o *Options) { o.WorkspaceSeedDir = seed })
	res := mustInvoke(t, s, req("file_read", map[string]any{"path": "orders.csv"}))
	if !strings.Contains(res.Observation, "     2\t1") {
		t.Fatalf("seeded workspace: %v", res)
	}
	mustInvoke(t, s, req("file_write", map[string]any{"path": "out.txt", "content": "hello"}))
	r := req("file_read", map[string]any{"path": "out.txt"})
	r.OutputLevel = baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	full := mustInvoke(t, s, r)
	ws := filepath.Join(env.opts.WorkspaceDir, "acme", "conv-1")
	if _, err := os.Stat(filepath.Join(ws, "out.txt")); err != nil {
		t.Fatal(err)
	}
	rel, err := s.ReleaseConversation(context.Background(), &baagentv1.ReleaseConversationRequest{Tenant: "acme", ConversationId: "conv-1"})
	if err != nil {
		t.Fatal(err)
	}
	if rel.ArtifactsDeleted != 1 || rel.BytesFreed < 5+5 {
		t.Errorf("release: %v", rel)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Error("workspace survived")
	}
	if res := mustInvoke(t, s, req("artifact_read", map[string]any{"artifact_id": full.ArtifactId})); res.ErrorCode != "ARTIFACT_NOT_FOUND" {
		t.Errorf("artifact survived: %v", res)
	}
	// The next call starts a fresh, seeded workspace.
	if res := mustInvoke(t, s, req("file_read", map[string]any{"path": "out.txt"})); res.ErrorCode != "FILE_NOT_FOUND" {
		t.Errorf("old file visible: %v", res)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	base := Options{WorkspaceDir: filepath.Join(dir, "ws"), ArtifactDir: filepath.Join(dir, "art")}
	for name, mutate := range map[string]func(*Options){
		"missing seed dir": func(o *Options) { o.WorkspaceSeedDir = filepath.Join(dir, "nope") },
		"missing config":   func(o *Options) { o.ConfigFile = filepath.Join(dir, "nope.yaml") },
		"no artifact dir":  func(o *Options) { o.ArtifactDir = "" },
		"no workspace dir": func(o *Options) { o.WorkspaceDir = "" },
	} {
		o := base
		mutate(&o)
		if s, err := New(o); err == nil {
			s.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func structValue(s string) *structpb.Value { return structpb.NewStringValue(s) }

func TestConcurrentFirstCallsShareOneWorkspace(t *testing.T) {
	t.Parallel()

	for _, seeded := range []bool{false, true} {
		seed := ""
		if seeded {
			seed = t.TempDir()
			if err := os.WriteFile(filepath.Join(seed, "s.csv"), []byte("a\n1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := newTestServer(t, func(o *Options) { o.WorkspaceSeedDir = seed })
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := "f" + string(rune('a'+i)) + ".txt"
				if res := mustInvoke(t, s, req("file_write", map[string]any{"path": name, "content": "x"})); !res.Success {
					t.Errorf("%v", res)
				}
			}()
		}
		wg.Wait()
		res := mustInvoke(t, s, req("glob", map[string]any{"pattern": "*"}))
		want := 8
		if seeded {
			want = 9
		}
		if got := strings.Count(res.Observation, "\n") + 1; got != want {
			t.Fatalf("seeded=%v: %d files survived, want %d:\n%s", seeded, got, want, res.Observation)
		}
	}
}

func TestMetricsAndLogsNamePaths(t *testing.T) {
	t.Parallel()

	var logs strings.Builder
	var mu sync.Mutex
	s, env := newTestServer(t, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(syncWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.LargeDataBytes = 10
	})
	env.source.set(&funcTool{spec: echoSpec("big"), fn: ok(strings.Repeat("x", 100))},
		&funcTool{spec: echoSpec("flaky"), fn: func(_ context.Context, c tool.Call) (tool.Result, error) {
			if c.Attempt == 0 {
				return tool.Result{}, tool.Errorf(errTransient, "BLIP", "blip")
			}
			return tool.Result{}, tool.Errorf(errInvalid, "BAD", "bad")
		}})
	mustInvoke(t, s, req("big", nil))
	mustInvoke(t, s, req("flaky", nil))
	mustInvoke(t, s, req("nope", nil))
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(s.metrics.calls.WithLabelValues("big", "success")), 1, "calls big"},
		{testutil.ToFloat64(s.metrics.calls.WithLabelValues("flaky", "error")), 1, "calls flaky"},
		{testutil.ToFloat64(s.metrics.calls.WithLabelValues(unknownTool, "error")), 1, "calls unknown"},
		{testutil.ToFloat64(s.metrics.errors.WithLabelValues("flaky", "invalid_parameters")), 1, "errors by type"},
		{testutil.ToFloat64(s.metrics.retries.WithLabelValues("flaky")), 1, "retries"},
		{testutil.ToFloat64(s.metrics.artifactBytes), 100, "artifact bytes"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(env.reg, "baagent_toolrunner_call_duration_seconds"); err != nil || n != 3 {
		t.Errorf("duration histograms: %d %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), `"artifact_id":"artifact_`) {
		t.Errorf("the artifact is not logged by id: %s", logs.String())
	}
	for _, dir := range []string{env.opts.ArtifactDir, env.opts.WorkspaceDir} {
		if strings.Contains(logs.String(), dir) {
			t.Fatalf("logs name a path: %s", logs.String())
		}
	}
}

type syncWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
