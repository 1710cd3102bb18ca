package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// goroutinesCreated is the number of goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestSQLQueryImportsInBatches is the regression test of the load test's
// finding: sql_query imported a CSV one INSERT per row with a cancellable
// context, so the SQLite driver started a goroutine per row (18,000 live
// at once under 1,000 concurrent runs). Rows now go in batches: every row
// arrives (full batches and the remainder, narrow and wide tables), and
// the import starts a handful of goroutines, not one per row.
func TestSQLQueryImportsInBatches(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name       string
		rows, cols int
	}{
		{"one row", 1, 3},
		{"exactly one batch", insertBatchRows, 3},
		{"batches and a remainder", 5*insertBatchRows + 7, 3},
		{"wide table, batch capped by the variable limit", 200, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var b strings.Builder
			for c := range tc.cols {
				if c > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "c%d", c)
			}
			b.WriteByte('\n')
			for r := range tc.rows {
				for c := range tc.cols {
					if c > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, "%d", r*tc.cols+c)
				}
				b.WriteByte('\n')
			}
			e.write("wide.csv", b.String())
			last := tc.cols - 1
			before := goroutinesCreated()
			doc := e.mustCall("sql_query", map[string]any{"query": fmt.Sprintf("SELECT COUNT(*) AS n, SUM(c0) AS s0, SUM(c%d) AS sl FROM wide", last)})
			created := goroutinesCreated() - before
			n := tc.rows
			sum0 := tc.cols * n * (n - 1) / 2 // Σ r*cols
			want := fmt.Sprintf("| %d | %d | %d |", n, sum0, sum0+n*last)
			if !strings.Contains(doc.Text, want) {
				t.Fatalf("got\n%s\nwant the row %s", doc.Text, want)
			}
			if created > 50 {
				t.Errorf("importing %d rows started %d goroutines; the import must not start one per row", tc.rows, created)
			}
		})
	}
}

// BenchmarkSQLQuerySampleData is the load scenario's first query (a join
// and a grouping over the sample orders and products, imported from CSV
// on every call, as sql_query does).
func BenchmarkSQLQuerySampleData(b *testing.B) {
	root, err := os.OpenRoot(filepath.Join("..", "..", "..", "examples", "data"))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	tl := newSQLQuery(Options{}.withDefaults())
	args := map[string]any{"query": `SELECT p.category AS category, ROUND(SUM(o.quantity * o.unit_price), 2) AS revenue
		FROM orders o JOIN products p ON p.product_id = o.product_id
		WHERE o.order_date BETWEEN '2026-07-01' AND '2026-09-30'
		GROUP BY p.category ORDER BY revenue DESC`}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tl.Execute(context.Background(), tool.Call{Workspace: root, Args: args}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSQLQueryWaitsForASlot: with every slot taken, a query waits, and its
// call's deadline bounds the wait (a TIMEOUT the pipeline retries); once a
// slot frees, queries run again.
func TestSQLQueryWaitsForASlot(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	e.write("t.csv", "x\n1\n2\n")
	tl := newSQLQuery(Options{MaxConcurrentQueries: 1}.withDefaults())
	call := tool.Call{Workspace: e.root, Args: map[string]any{"query": "SELECT SUM(x) AS s FROM t"}}

	release, err := tl.slots.acquire(context.Background(), "other") // a query holds the only slot
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = tl.Execute(ctx, call)
	var te *tool.Error
	if !errors.As(err, &te) || te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT {
		t.Fatalf("query with no free slot and a 50 ms deadline: %v, want a TIMEOUT", err)
	}

	release() // the holder finishes
	res, err := tl.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if doc := res.Data.(tool.Document); !strings.Contains(doc.Text, "| 3 |") {
		t.Fatalf("got %s", doc.Text)
	}
	if held, _, _ := tl.slots.stats(); held != 0 {
		t.Fatalf("%d slots still taken after the query", held)
	}
}

// BenchmarkSQLQueryConcurrent runs the sample-data query from 64
// goroutines at once (two parallel calls of 32 runs) with the query slots
// at GOMAXPROCS (the default) and with one slot per caller (unbounded in
// effect), to show what bounding the queries does to throughput.
func BenchmarkSQLQueryConcurrent(b *testing.B) {
	root, err := os.OpenRoot(filepath.Join("..", "..", "..", "examples", "data"))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	args := map[string]any{"query": "SELECT COUNT(*) AS n FROM customers"}
	for _, slots := range []int{0, 64} {
		name := "slots=gomaxprocs"
		if slots > 0 {
			name = fmt.Sprintf("slots=%d", slots)
		}
		b.Run(name, func(b *testing.B) {
			tl := newSQLQuery(Options{MaxConcurrentQueries: slots}.withDefaults())
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tl.Execute(context.Background(), tool.Call{Workspace: root, Args: args}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
