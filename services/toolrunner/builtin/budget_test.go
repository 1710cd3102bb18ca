package builtin

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// runBounded runs a tool call in a goroutine with a deadline of budget
// and fails the test when the call has not returned within budget plus
// grace: a call must stop soon after its context ends.
func runBounded(t *testing.T, tl tool.Tool, c tool.Call, budget, grace time.Duration) (tool.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		r, err := tl.Execute(ctx, c)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(budget + grace):
		t.Fatalf("%s still running %s after it started, %s after its deadline", tl.Spec().Name, time.Since(start).Round(time.Millisecond), grace)
		return tool.Result{}, nil
	}
}

// TestGlobCostIsBounded is the probe's finding: with several `**`
// segments the old matcher tried every way to split a path among them
// (the fourth power of the depth) and never looked at the context: each
// of these files 120 folders deep cost it about 3 s, beyond any timeout.
func TestGlobCostIsBounded(t *testing.T) {
	e := newEnv(t)
	deep := strings.Repeat("abcdefg/", 120)
	for i := range 20 {
		e.write(deep+"f"+strconv.Itoa(i), "x")
	}
	seg := "?*?*?*?*?*?*?*"
	for _, pattern := range []string{
		"**/" + seg + "/**/" + seg + "/**/" + seg + "/**/" + seg + "/z",
		"**/?/**/?/**/?/**/?/z",
		"**/" + strings.Repeat("?*", 200) + "/**/*a*a*a*a*a*a*a*a*a*a*b/**/?/**/z",
	} {
		res, err := runBounded(t, e.tools["glob"], tool.Call{Workspace: e.root, Args: map[string]any{"pattern": pattern}}, 5*time.Second, 5*time.Second)
		if err != nil {
			t.Fatalf("glob %.40s…: %v", pattern, err)
		}
		if doc := res.Data.(tool.Document); !strings.HasPrefix(doc.Text, "No files match") {
			t.Fatalf("glob %.40s…: %s", pattern, doc.Text)
		}
	}
	// The deep files are found by a pattern that matches them.
	if doc := e.mustCall("glob", map[string]any{"pattern": "**/" + seg + "/**/a*g/f1?"}); !strings.HasSuffix(doc.Text, "abcdefg/f19 (1 byte)") || strings.Count(doc.Text, "\n") != 9 {
		t.Fatalf("deep files: %s", doc.Text)
	}
}

// TestGlobMatchIsCheap: one match costs at most about path segments ×
// pattern segments segment matches, whatever the pattern, even on paths
// deeper than glob walks.
func TestGlobMatchIsCheap(t *testing.T) {
	name := strings.Split(strings.Repeat("a/", 500)+"f", "/")
	long := strings.Split(strings.Repeat(strings.Repeat("a", 200)+"/", 5)+"f", "/")
	for _, tc := range []struct {
		pattern string
		name    []string
	}{
		{"**/?/**/?/**/?/**/?/z", name},
		{"**/*/**/*/**/*/**/*/f", name},
		{"**/" + strings.Repeat("*a", 100) + "b/**/" + strings.Repeat("?*", 100) + "/**/z", long},
		{strings.Repeat("*/", 127) + "*", name},
	} {
		g, terr := compileGlob(tc.pattern)
		if terr != nil {
			t.Fatalf("%.40s…: %v", tc.pattern, terr)
		}
		start := time.Now()
		g.match(tc.name)
		if d := time.Since(start); d > time.Second {
			t.Errorf("%.40s… on a path of %d segments took %s", tc.pattern, len(tc.name), d)
		}
	}
	for _, p := range []string{strings.Repeat("a/", 128) + "a", strings.Repeat("x", 1025)} {
		if _, terr := compileGlob(p); terr == nil || terr.Code != "INVALID_GLOB" {
			t.Errorf("pattern of %d bytes: %v, want INVALID_GLOB", len(p), terr)
		}
	}
}

// TestGrepStopsAtItsDeadline: a slow regular expression (about 20 µs a
// byte) over 8,000-byte lines. grep looked at its context every 1,024
// lines, about 160 s of matching here; it must stop soon after the
// deadline.
func TestGrepStopsAtItsDeadline(t *testing.T) {
	e := newEnv(t)
	line := strings.Repeat("abcdefghij", 800)
	e.write("big.txt", strings.Repeat(line+"\n", 1000))
	const pattern = "(?:.{0,50}){1,20}z"
	_, err := runBounded(t, e.tools["grep"], tool.Call{Workspace: e.root, Args: map[string]any{"pattern": pattern}}, 300*time.Millisecond, testkit.LineMatchGrace(pattern, line, 10*time.Second))
	if te := tool.Classify(err); te == nil || te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT {
		t.Fatalf("grep past its deadline: %v", err)
	}
}

// procStatus returns a field of /proc/self/status in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skipf("no %s in /proc/self/status", field)
	return 0
}

// TestSQLQueryMemoryBomb is the probe's finding: an 80-byte query built
// a 1 GB string (the process grew to 1.7 GB). SQLite allocates through
// its own allocator, outside the Go heap, so the bound is on the
// process's peak resident memory (VmHWM, reset before each query).
func TestSQLQueryMemoryBomb(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	e := newEnv(t)
	// Only the memory limits may end these queries: the group_concat one
	// copies 400 MB through the VM before SQLite reports the value too
	// big, which under -race on a busy machine outlasts a short timeout.
	e.tools["sql_query"] = newSQLQuery(Options{QueryTimeout: 5 * time.Minute}.withDefaults())
	e.write("t.csv", "x\n1\n")
	const bound = 200 << 20
	for _, q := range []string{
		"SELECT length(printf('%.*c', 1000000000, 'x'))",
		"SELECT length(printf('%1000000000d', 1))",
		"SELECT length(zeroblob(1000000000) || x'00')",
		"WITH RECURSIVE r(i, s) AS (SELECT 1, printf('%.*c', 100000, 'x') UNION ALL SELECT i + 1, s FROM r LIMIT 4000) SELECT length(group_concat(s)) FROM r",
	} {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Fatal(err)
		}
		base := procStatus(t, "VmRSS")
		_, err := e.call("sql_query", map[string]any{"query": q})
		peak := procStatus(t, "VmHWM")
		if err == nil || err.Code != "QUERY_TOO_LARGE" || !err.BudgetExhausted {
			t.Errorf("%s: %v, want QUERY_TOO_LARGE, not retryable", q, err)
		} else if !strings.Contains(err.Message, "MiB") {
			t.Errorf("%s: message does not give the limit: %s", q, err.Message)
		}
		if peak-base > bound {
			t.Errorf("%s: peak RSS grew by %d MiB, bound %d MiB", q, (peak-base)>>20, bound>>20)
		}
	}
	// A query within the limits still runs on the same tool.
	if doc := e.mustCall("sql_query", map[string]any{"query": "SELECT length(printf('%.*c', 100000, 'x')) AS n FROM t"}); !strings.Contains(doc.Text, "| 100000 |") {
		t.Fatalf("ordinary query: %s", doc.Text)
	}
}

// sqlCall runs sql_query as tenant in a goroutine; done is closed when it
// returns.
type sqlCall struct {
	err  error
	doc  tool.Document
	done chan struct{}
}

func startSQL(tl sqlQuery, root *os.Root, tenant, query string) *sqlCall {
	c := &sqlCall{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		res, err := tl.Execute(context.Background(), tool.Call{Tenant: tenant, Workspace: root, Args: map[string]any{"query": query}})
		c.err = err
		if err == nil {
			c.doc = res.Data.(tool.Document)
		}
	}()
	return c
}

const runaway = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"

// TestSQLQueryFairAcrossTenants is the probe's finding: tenants a and b
// each run two queries that run until their timeout, on two slots. Before,
// a and b held both slots and their second queries took the slots next
// (first come, first served), so tenant c waited for two timeouts. Now a
// tenant holds at most one of the two slots, and the first slot to free
// goes to c, which has been waiting and holds none: c's query finishes
// while a's and b's second queries still run.
func TestSQLQueryFairAcrossTenants(t *testing.T) {
	e := newEnv(t)
	e.write("t.csv", "x\n1\n2\n")
	tl := newSQLQuery(Options{MaxConcurrentQueries: 2, QueryTimeout: 1500 * time.Millisecond}.withDefaults())
	a1, b1 := startSQL(tl, e.root, "a", runaway), startSQL(tl, e.root, "b", runaway)
	waitStats(t, tl.slots, 2, 0)
	a2 := startSQL(tl, e.root, "a", runaway)
	waitStats(t, tl.slots, 2, 1)
	b2 := startSQL(tl, e.root, "b", runaway)
	waitStats(t, tl.slots, 2, 2)
	c := startSQL(tl, e.root, "c", "SELECT SUM(x) AS s FROM t")
	waitStats(t, tl.slots, 2, 3)

	select {
	case <-c.done:
	case <-a2.done:
		t.Fatal("a's second runaway query ended before c's query")
	case <-b2.done:
		t.Fatal("b's second runaway query ended before c's query")
	case <-time.After(30 * time.Second):
		t.Fatal("c's query still waits after 30 s")
	}
	if c.err != nil || !strings.Contains(c.doc.Text, "| 3 |") {
		t.Fatalf("c's query: %v %s", c.err, c.doc.Text)
	}
	for _, q := range []*sqlCall{a1, b1, a2, b2} {
		<-q.done
		if te := tool.Classify(q.err); te == nil || te.Code != "QUERY_TIMEOUT" || !te.BudgetExhausted {
			t.Errorf("runaway query: %v", q.err)
		}
	}
	if h, w, n := tl.slots.stats(); h != 0 || w != 0 || n != 0 {
		t.Fatalf("after the queries: %d held, %d waiting, %d tenants", h, w, n)
	}
}

// TestSQLQueryTimeoutIsFinal: a query that runs into QueryTimeout stops
// at once (the driver interrupts SQLite, which looks on every loop) with
// a final TIMEOUT; one cut short by the call's own, earlier deadline gets
// a TIMEOUT the pipeline may retry with a longer one.
func TestSQLQueryTimeoutIsFinal(t *testing.T) {
	e := newEnv(t)
	tl := newSQLQuery(Options{QueryTimeout: 100 * time.Millisecond}.withDefaults())
	for _, q := range []string{runaway,
		"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(DISTINCT i) FROM r",
		"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r ORDER BY -i LIMIT 1",
	} {
		// Stopped by QueryTimeout, well before the call's own deadline.
		_, err := runBounded(t, tl, tool.Call{Workspace: e.root, Args: map[string]any{"query": q}}, 10*time.Second, 5*time.Second)
		te := tool.Classify(err)
		if te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT || te.Code != "QUERY_TIMEOUT" || !te.BudgetExhausted || !strings.Contains(te.Message, "narrow") {
			t.Errorf("%s: %v", q, err)
		}
	}
	tl = newSQLQuery(Options{QueryTimeout: time.Minute}.withDefaults())
	_, err := runBounded(t, tl, tool.Call{Workspace: e.root, Args: map[string]any{"query": runaway}}, 100*time.Millisecond, 10*time.Second)
	if te := tool.Classify(err); te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT || te.BudgetExhausted {
		t.Errorf("cut short by the call's deadline: %v (budget exhausted: %v)", err, te.BudgetExhausted)
	}
}

// TestSQLQueryHeapLimit: SQLite's memory is bounded process-wide; a query
// that needs more fails with RESOURCE_LIMIT, final. (SQLite here keeps
// no memory statistics by default, and without them the limit does
// nothing.)
func TestSQLQueryHeapLimit(t *testing.T) {
	if !heapLimitWorks {
		t.Fatal("SQLite's memory statistics could not be turned on")
	}
	e := newEnv(t)
	tl := newSQLQuery(Options{QueryHeapLimit: 32 << 20}.withDefaults())
	t.Cleanup(func() { setHeapLimit(DefaultQueryHeapLimit) })
	cols := strings.TrimSuffix(strings.Repeat("zeroblob(1000000) || x'00', ", 100), ", ")
	_, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{"query": "SELECT " + cols}})
	te := tool.Classify(err)
	if te == nil || te.Code != "RESOURCE_LIMIT" || !te.BudgetExhausted || !strings.Contains(te.Message, "32 MiB") {
		t.Fatalf("100 values of 1 MB under a 32 MiB limit: %v", err)
	}
	// Within the limit, the same kind of query runs.
	cols = strings.TrimSuffix(strings.Repeat("length(zeroblob(1000000) || x'00'), ", 10), ", ")
	if _, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{"query": "SELECT " + cols}}); err != nil {
		t.Fatal(err)
	}
}

// TestSQLQueryValueLimits: the largest value, row, LIKE pattern and
// result; CSV files within MaxCSVBytes still import, whatever their
// shape.
func TestSQLQueryValueLimits(t *testing.T) {
	e := newEnv(t)
	e.write("big.csv", "x\n"+strings.Repeat("a", 1100000)+"\n")
	e.write("ones.csv", "x\n"+strings.Repeat("a\n", 1<<18)) // the worst shape: see TestCSVPageBound
	e.write("text.csv", "a,b\n"+strings.Repeat("hello,world\n", 20000))
	e.wantErr("sql_query", map[string]any{"query": "SELECT count(*) FROM big"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "CSV_TOO_LARGE")
	e.wantErr("sql_query", map[string]any{"query": "SELECT 'x' LIKE '%" + strings.Repeat("a", 300) + "'"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "QUERY_TOO_LARGE")
	tl := newSQLQuery(Options{QueryTimeout: time.Minute}.withDefaults()) // the race detector makes imports slow
	res, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{
		"query": "SELECT (SELECT count(*) FROM ones) AS n, (SELECT count(*) FROM text) AS m",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if doc := res.Data.(tool.Document); !strings.Contains(doc.Text, "| 262144 | 20000 |") {
		t.Fatalf("imports: %s", doc.Text)
	}
	tl = newSQLQuery(Options{QueryMaxBytes: 1000}.withDefaults())
	res, err = tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{
		"query": "SELECT printf('%.*c', 900, 'x') AS v FROM text", "max_rows": 10000,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if doc := res.Data.(tool.Document); !strings.Contains(doc.Text, "(Stopped after 16000 bytes of rows, sql_query's limit; more rows exist.") || strings.Count(doc.Text, "\n") > 30 {
		t.Fatalf("result bound: %d lines, ends %q", strings.Count(doc.Text, "\n"), doc.Text[len(doc.Text)-150:])
	}
}

// TestSearchBudgets: glob and grep stop at SearchTimeout with a final
// TIMEOUT; grep reads at most GrepMaxBytes and says so.
func TestSearchBudgets(t *testing.T) {
	e := newEnv(t)
	e.write("big.txt", strings.Repeat(strings.Repeat("abcdefghij", 800)+"\n", 200))
	e.write("a.txt", strings.Repeat("needle\n", 100))
	e.write("b.txt", strings.Repeat("needle\n", 100))
	ts := map[string]tool.Tool{}
	for _, tl := range Tools(Options{SearchTimeout: 200 * time.Millisecond}) {
		ts[tl.Spec().Name] = tl
	}
	_, err := runBounded(t, ts["grep"], tool.Call{Workspace: e.root, Args: map[string]any{"pattern": "(?:.{0,50}){1,20}z", "path": "big.txt"}}, time.Minute, 0)
	if te := tool.Classify(err); te.Code != "GREP_TIMEOUT" || !te.BudgetExhausted || te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT {
		t.Errorf("slow grep: %v", err)
	}
	for _, tl := range Tools(Options{SearchTimeout: time.Nanosecond}) {
		if tl.Spec().Name == "glob" {
			_, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{"pattern": "**/*.txt"}})
			if te := tool.Classify(err); te.Code != "GLOB_TIMEOUT" || !te.BudgetExhausted {
				t.Errorf("glob past its budget: %v", err)
			}
		}
	}
	for _, tl := range Tools(Options{GrepMaxBytes: 1000}) {
		if tl.Spec().Name != "grep" {
			continue
		}
		res, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{"pattern": "needle", "glob": "[ab].txt"}})
		if err != nil {
			t.Fatal(err)
		}
		doc := res.Data.(tool.Document)
		// 1000 bytes: a.txt's 100 lines of 7 bytes, 42 of b.txt's and the
		// start of the next (its 6 bytes still match).
		if !strings.Contains(doc.Text, "(Stopped after reading 1000 bytes, grep's limit for one call; narrow the path or glob)") ||
			strings.Count(doc.Text, ":needle") != 143 || !strings.Contains(doc.Brief, "stopped after reading 1000 bytes") {
			t.Fatalf("byte budget: %d matches\n%s\n%s", strings.Count(doc.Text, ":needle"), doc.Brief, doc.Text[len(doc.Text)-200:])
		}
	}
}

// TestCSVPageBound: the page limit allows 6 pages' worth of bytes per CSV
// byte; the most a CSV takes in SQLite is about 4.5 (one-character lines).
func TestCSVPageBound(t *testing.T) {
	e := newEnv(t)
	for name, body := range map[string]string{
		"chars":  "x\n" + strings.Repeat("a\n", 1<<15),
		"empty":  "x,y\n" + strings.Repeat(",\n", 1<<15),
		"digits": "x\n" + strings.Repeat("1\n", 1<<15),
		"quoted": "x\n" + strings.Repeat("\"\"\n", 1<<15),
		"text":   "a,b,c\n" + strings.Repeat("hello,world,foo bar baz\n", 5000),
	} {
		e.write(name+".csv", body)
		db, err := sql.Open("sqlite", ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := importCSV(context.Background(), conn, e.root, name+".csv", name, DefaultMaxCSVBytes); err != nil {
			t.Fatal(err)
		}
		var pages, pageSize int64
		if err := conn.QueryRowContext(context.Background(), "SELECT page_count, page_size FROM pragma_page_count, pragma_page_size").Scan(&pages, &pageSize); err != nil {
			t.Fatal(err)
		}
		if ratio := float64(pages*pageSize) / float64(len(body)); ratio > 5 {
			t.Errorf("%s.csv takes %.1f times its size in SQLite", name, ratio)
		}
		conn.Close()
		db.Close()
	}
}
