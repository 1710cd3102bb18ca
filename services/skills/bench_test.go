package skills

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// benchSkillMD is the SKILL.md of benchmark skill i, shaped like the
// samples: a front matter with the standard's fields and a body of about
// 1.5 KB.
func benchSkillMD(name string, i int) string {
	body := strings.Repeat("Query the table with sql_query, aggregate in SQL and state the period and filters. ", 18)
	return fmt.Sprintf(`---
name: %s
description: Analyse business data set %d with SQL - revenue by period, region and product, growth rates, top and bottom performers. Use when the user asks about it.
version: 1.0.%d
license: Apache-2.0
allowed-tools: sql_query file_read artifact_read
triggers: [sales, revenue, growth]
metadata:
  domain: business-analysis
  owner: analytics-platform
---
# Skill %d

%s
`, name, i, i, i, body)
}

// benchSchemaMD is the references/ file every fourth benchmark skill has.
const benchSchemaMD = "| table | column |\n|---|---|\n| orders | order_id |\n"

// benchRoot writes n system skills shaped like the samples: a front matter
// with the standard's fields, a body of about 1.5 KB, and a references/ file
// for every fourth skill.
func benchRoot(b *testing.B, n int) string {
	b.Helper()
	root := b.TempDir()
	for i := range n {
		name := fmt.Sprintf("skill-%04d", i)
		writeFile(b, root, name+"/SKILL.md", benchSkillMD(name, i))
		if i%4 == 0 {
			writeFile(b, root, name+"/references/schema.md", benchSchemaMD)
		}
	}
	return root
}

// BenchmarkLoad1000 loads a root of 1,000 skills (target: at most 200 ms).
func BenchmarkLoad1000(b *testing.B) {
	root := benchRoot(b, 1000)
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	log := quietLogger()
	cpu := startCPU(b)
	for b.Loop() {
		snap, err := loadSnapshot(r, log)
		if err != nil || len(snap.system.sorted) != 1000 {
			b.Fatalf("loaded %d skills: %v", len(snap.system.sorted), err)
		}
	}
	cpu.report()
}

// BenchmarkListSkills1000 lists 1,000 skills (target: p50 at most 1 ms);
// p50-ns and p99-ns are reported beside the mean.
func BenchmarkListSkills1000(b *testing.B) {
	s := newTestServer(b, benchRoot(b, 1000))
	benchListSkills(b, s, 1000)
}

// benchListSkills lists tenant acme's skills on s in the benchmark loop,
// which must list want, and reports cpu-ns/op and the latency percentiles.
func benchListSkills(b *testing.B, s *Server, want int) {
	b.Helper()
	req := &baagentv1.ListSkillsRequest{Tenant: "acme"}
	ctx := context.Background()
	var times []time.Duration
	cpu := startCPU(b)
	for b.Loop() {
		start := time.Now()
		resp, err := s.ListSkills(ctx, req)
		times = append(times, time.Since(start))
		if err != nil || len(resp.GetSkills()) != want {
			b.Fatalf("listed %d: %v", len(resp.GetSkills()), err)
		}
	}
	cpu.report()
	testkit.ReportPercentiles(b, times)
}

// BenchmarkGetCatalog1000 renders the catalog of 1,000 skills within a
// budget that forces shortening, uncached (each iteration a new budget).
func BenchmarkGetCatalog1000(b *testing.B) {
	s := newTestServer(b, benchRoot(b, 1000))
	ctx := context.Background()
	budget := int64(30000)
	for b.Loop() {
		budget--
		resp, err := s.GetCatalog(ctx, &baagentv1.GetCatalogRequest{Tenant: "acme", TokenBudget: budget})
		if err != nil || resp.GetTokens() > budget {
			b.Fatalf("catalog: %v", err)
		}
	}
}

// BenchmarkPollUnchanged1000 is the cost of one poll of an unchanged root
// of 1,000 skills (a stat per watched path).
func BenchmarkPollUnchanged1000(b *testing.B) {
	root := benchRoot(b, 1000)
	ageTree(b, root, time.Now().Add(-time.Hour))
	s := newTestServer(b, root)
	gen := s.snap.Load().gen
	for b.Loop() {
		s.poll()
	}
	if s.snap.Load().gen != gen {
		b.Fatal("an unchanged root was reloaded")
	}
}

// cpuClock measures the CPU time (user and system, all threads) the process
// spends in a benchmark loop, reported as cpu-ns/op. On a machine shared
// with other work, wall time per op measures the contention as much as the
// code; CPU time does not.
type cpuClock struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuClock { return cpuClock{b: b, start: processCPU(b)} }

func (c cpuClock) report() {
	if c.b.N > 0 {
		c.b.ReportMetric(float64((processCPU(c.b)-c.start).Nanoseconds())/float64(c.b.N), "cpu-ns/op")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMatchTriggers1000 matches a 2 KB user message against the 1,000
// skills' triggers and names (three phrases each), as the orchestrator does
// once per user message.
func BenchmarkMatchTriggers1000(b *testing.B) {
	s := newTestServer(b, benchRoot(b, 1000))
	text := strings.Repeat("Please compare the quarterly figures by region and product line. ", 30) + "/skill-0042 and the growth"
	req := &baagentv1.MatchTriggersRequest{Tenant: "t", Text: text}
	ctx := context.Background()
	for b.Loop() {
		resp, err := s.MatchTriggers(ctx, req)
		if err != nil || len(resp.GetMatches()) != 1000 {
			b.Fatalf("%d matches: %v", len(resp.GetMatches()), err)
		}
	}
}

// BenchmarkActivateSkillSibling activates a skill over a chain of three
// whose instructions do not name it (three bodies scanned, three scopes
// ended).
func BenchmarkActivateSkillSibling(b *testing.B) {
	s := newTestServer(b, benchRoot(b, 10))
	req := &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "skill-0009", ActivationId: "a1", Tenant: "t",
		ActivationChain: []string{"skill-0001", "skill-0002", "skill-0003"},
	}}
	ctx := context.Background()
	for b.Loop() {
		resp, err := s.ActivateSkill(ctx, req)
		if err != nil || len(resp.GetResult().GetEnded()) != 3 {
			b.Fatalf("%v: %v", resp, err)
		}
	}
}
