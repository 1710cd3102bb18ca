package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baagent/baagent/services/toolrunner/tool"
)

// benchTool returns the built-in tool name with default options.
func benchTool(b *testing.B, name string) tool.Tool {
	b.Helper()
	for _, tl := range Tools(Options{}) {
		if tl.Spec().Name == name {
			return tl
		}
	}
	b.Fatalf("no tool %s", name)
	return nil
}

// BenchmarkSQLQuery measures one sql_query call: a constant query (the
// per-call cost of a fresh database and its limits) and an aggregate over
// a 5,000-row CSV imported on the call (the import dominates).
func BenchmarkSQLQuery(b *testing.B) {
	dir := b.TempDir()
	var csv strings.Builder
	csv.WriteString("id,region,amount,note\n")
	for i := range 5000 {
		fmt.Fprintf(&csv, "%d,%s,%d.%02d,note %d\n", i, []string{"north", "south", "east", "west"}[i%4], i%997, i%100, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "sales.csv"), []byte(csv.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	tl := benchTool(b, "sql_query")
	for _, q := range []struct{ name, query string }{
		{"constant", "SELECT 1 AS one"},
		{"csv5000", "SELECT region, COUNT(*) AS n, ROUND(SUM(amount), 2) AS total FROM sales GROUP BY region ORDER BY region"},
	} {
		b.Run(q.name, func(b *testing.B) {
			call := tool.Call{Tenant: "acme", Workspace: root, Args: map[string]any{"query": q.query}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tl.Execute(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGlob measures glob over a workspace of 2,000 files in nested
// folders, with a `**` pattern and a pattern of sets and stars.
func BenchmarkGlob(b *testing.B) {
	dir := b.TempDir()
	for i := range 2000 {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%10), fmt.Sprintf("e%d", i%7), fmt.Sprintf("f%d", i%3))
		if err := os.MkdirAll(p, 0o750); err != nil {
			b.Fatal(err)
		}
		ext := []string{".csv", ".txt", ".md", ".json"}[i%4]
		if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("report_%04d%s", i, ext)), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	tl := benchTool(b, "glob")
	for _, p := range []struct{ name, pattern string }{
		{"doublestar", "**/*.csv"},
		{"segments", "d[1-3]/e*/f?/report_*[05].csv"},
		{"middlestar", "d1/**/report_1*.md"},
	} {
		b.Run(p.name, func(b *testing.B) {
			call := tool.Call{Tenant: "acme", Workspace: root, Args: map[string]any{"pattern": p.pattern}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tl.Execute(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSQLQueryTenants runs the sample-data query from 64 goroutines
// at once, as BenchmarkSQLQueryConcurrent does, from one tenant or from
// four, with the default per-tenant cap (one slot fewer than the total)
// and without one: what the cap costs a tenant alone on the machine.
func BenchmarkSQLQueryTenants(b *testing.B) {
	root, err := os.OpenRoot(filepath.Join("..", "..", "..", "examples", "data"))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	args := map[string]any{"query": "SELECT COUNT(*) AS n FROM customers"}
	for _, tc := range []struct {
		name      string
		tenants   int
		perTenant int
	}{
		{"tenants=1/cap=default", 1, 0},
		{"tenants=1/cap=slots", 1, 1 << 20},
		{"tenants=4/cap=default", 4, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tl := newSQLQuery(Options{MaxQueriesPerTenant: tc.perTenant}.withDefaults())
			var n atomic.Int32
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				tenant := fmt.Sprintf("t%d", int(n.Add(1))%tc.tenants)
				for pb.Next() {
					if _, err := tl.Execute(context.Background(), tool.Call{Tenant: tenant, Workspace: root, Args: args}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
