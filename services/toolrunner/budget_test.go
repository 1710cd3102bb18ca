package toolrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/builtin"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// trackedTool is a built-in tool offered under another name that counts
// its executions in flight, so that a test sees its goroutines end.
type trackedTool struct {
	tool.Tool
	name    string
	running atomic.Int32
	started atomic.Int32
}

func (t *trackedTool) Spec() tool.Spec {
	s := t.Tool.Spec()
	s.Name = t.name
	return s
}

func (t *trackedTool) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	t.started.Add(1)
	t.running.Add(1)
	defer t.running.Add(-1)
	return t.Tool.Execute(ctx, c)
}

// trackedBuiltins returns the built-in tools built with opts as
// "tracked_<name>" tools.
func trackedBuiltins(opts builtin.Options) map[string]*trackedTool {
	out := map[string]*trackedTool{}
	for _, tl := range builtin.Tools(opts) {
		n := tl.Spec().Name
		out[n] = &trackedTool{Tool: tl, name: "tracked_" + n}
	}
	return out
}

// costlySeed is a workspace seed on which the search tools have a lot of
// work: a file 300 folders deep (glob patterns with several `**` used to
// cost the fourth power of the depth) and 8 MB of 8,000-byte lines (a
// slow regular expression costs about 0.2 s a line).
func costlySeed(t *testing.T) string {
	t.Helper()
	seed := t.TempDir()
	deep := filepath.Join(seed, strings.Repeat("a/", 300))
	if err := os.MkdirAll(deep, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "f"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A wide tree as well, so that walking it surely outlasts a 1 ms
	// deadline: a deep one alone is walked in under a millisecond when the
	// machine is idle.
	for i := range 500 {
		if err := os.MkdirAll(filepath.Join(seed, "wide", strconv.Itoa(i)), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(seed, "big.txt"), []byte(strings.Repeat(costlyLine+"\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	return seed
}

// costlyLine is each line of the seed's big.txt: 8,000 bytes, the most
// of a line grep matches.
var costlyLine = strings.Repeat("abcdefghij", 800)

// Calls that cost more than any budget allows.
var (
	runawayQuery = map[string]any{"query": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"}
	costlyGlob   = map[string]any{"pattern": "**/?/**/?/**/?/**/?/z"}
	costlyGrep   = map[string]any{"pattern": "(?:.{0,50}){1,20}z", "path": "big.txt"}
)

// TestBudgetExhaustedIsNotRetried: a failure the tool marks as a spent
// budget is final, whatever its type; the same failure without the mark
// is retried as before.
func TestBudgetExhaustedIsNotRetried(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	mk := func(name string, exhausted bool) *funcTool {
		return &funcTool{spec: echoSpec(name), fn: func(context.Context, tool.Call) (tool.Result, error) {
			e := tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR, "BUDGET", "spent")
			e.BudgetExhausted = exhausted
			return tool.Result{}, e
		}}
	}
	spent, busy := mk("spent", true), mk("busy", false)
	env.source.set(spent, busy)
	if res := mustInvoke(t, s, req("spent", nil)); res.GetRetryCount() != 0 || spent.calls.Load() != 1 || res.GetErrorCode() != "BUDGET" {
		t.Errorf("budget exhausted: retry_count %d, %d calls (%s)", res.GetRetryCount(), spent.calls.Load(), res.GetErrorCode())
	}
	if res := mustInvoke(t, s, req("busy", nil)); res.GetRetryCount() != DefaultMaxRetries || busy.calls.Load() != DefaultMaxRetries+1 {
		t.Errorf("plain RESOURCE_ERROR: retry_count %d, %d calls", res.GetRetryCount(), busy.calls.Load())
	}
}

// TestBuiltinTimeoutIsNotRetried: sql_query that runs into its own time
// budget fails once, with a TIMEOUT that says to narrow the query; it is
// not run again with the same arguments (each retry spent the whole
// budget again: 4 × 30 s of a slot and a core).
func TestBuiltinTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()

	s, _ := newTestServer(t, func(o *Options) { o.QueryTimeout = 100 * time.Millisecond })
	r := req("sql_query", runawayQuery)
	r.TimeoutMs = 60_000
	res := mustInvoke(t, s, r)
	if res.GetSuccess() || res.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT || res.GetErrorCode() != "QUERY_TIMEOUT" {
		t.Fatalf("runaway query: %v", res)
	}
	if res.GetRetryCount() != 0 {
		t.Errorf("runaway query retried %d times: %s", res.GetRetryCount(), res.GetErrorMessage())
	}
	if !strings.Contains(res.GetErrorMessage(), "narrow") {
		t.Errorf("message does not tell the model what to do: %s", res.GetErrorMessage())
	}
}

// TestSearchTimeoutIsNotRetried: glob and grep that run into their own
// time budget fail once, with a TIMEOUT that says to narrow the search.
func TestSearchTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()

	tools := trackedBuiltins(builtin.Options{SearchTimeout: 100 * time.Millisecond})
	s, env := newTestServer(t, func(o *Options) { o.WorkspaceSeedDir = costlySeed(t) })
	env.source.set(tools["grep"])
	r := req(tools["grep"].name, costlyGrep)
	r.TimeoutMs = 60_000
	res := mustInvoke(t, s, r)
	if res.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT || res.GetErrorCode() != "GREP_TIMEOUT" ||
		!strings.Contains(res.GetErrorMessage(), "narrow") {
		t.Fatalf("slow grep: %v", res)
	}
	if res.GetRetryCount() != 0 || tools["grep"].started.Load() != 1 {
		t.Errorf("slow grep ran %d times (retry_count %d)", tools["grep"].started.Load(), res.GetRetryCount())
	}
}

// TestTimedOutToolsStop: when the pipeline's deadline cuts an attempt of
// glob, grep or sql_query short, the tool's goroutine ends soon after:
// the tools watch their context inside their loops. (The pipeline does
// not wait for them; before, a retried glob left one busy goroutine per
// attempt, each for minutes.)
func TestTimedOutToolsStop(t *testing.T) {
	t.Parallel()

	tools := trackedBuiltins(builtin.Options{})
	seed := costlySeed(t)
	s, env := newTestServer(t, func(o *Options) { o.WorkspaceSeedDir = seed })
	src := make([]tool.Tool, 0, len(tools))
	for _, tl := range tools {
		src = append(src, tl)
	}
	env.source.set(src...)
	for name, tc := range map[string]struct {
		args      map[string]any
		timeoutMs int64
	}{
		// glob is fast now: a 1 ms deadline cuts its walk down the deep
		// tree short.
		"glob":      {costlyGlob, 1},
		"grep":      {costlyGrep, 200},
		"sql_query": {runawayQuery, 200},
	} {
		t.Run(name, func(t *testing.T) {
			tl := tools[name]
			r := req(tl.name, tc.args)
			r.TimeoutMs = tc.timeoutMs
			r.RetryPolicy = &baagentv1.ToolRetryPolicy{MaxRetries: new(int32)}
			*r.RetryPolicy.MaxRetries = 1
			res := mustInvoke(t, s, r)
			if res.GetSuccess() || res.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT {
				t.Fatalf("%s: %v", name, res)
			}
			// grep looks at its deadline between lines: allow a few lines'
			// matching, as slow as this machine is now.
			wait := testkit.LineMatchGrace(costlyGrep["pattern"].(string), costlyLine, 10*time.Second)
			testkit.Eventually(t, wait, fmt.Sprintf("%d timed-out %s attempts to stop", tl.running.Load(), name), func() bool {
				return tl.running.Load() == 0
			})
		})
	}
}
