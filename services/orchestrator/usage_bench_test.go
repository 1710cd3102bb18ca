package orchestrator

import (
	"context"
	"fmt"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/budget"
)

// BenchmarkGetUsage is OrchestratorService.GetUsage over loopback gRPC
// against an embedded JetStream, for a tenant with a budget and usage on
// each of the last 30 days: today and this month only (days=0), and with
// 30 and 62 days of history (one usage-ledger read a day, 8 at once).
func BenchmarkGetUsage(b *testing.B) {
	h := newHarness(b, spender, harnessOptions{mutate: func(o *Options) { o.BudgetCacheTTL = -1 }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := h.client.SetBudget(ctx, &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: testTenant, Budget: &baagentv1.Budget{UsdPerDay: pf(10), TokensPerDay: pi64(1e6)}}); err != nil {
		b.Fatal(err)
	}
	kv, err := h.js.KeyValue(ctx, natsx.BucketUsage)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range 30 {
		day := now.AddDate(0, 0, -i)
		l := budget.NewLedger(kv, budget.LedgerOptions{Now: func() time.Time { return day }})
		res, err := l.Reserve(ctx, fmt.Sprintf("r%d", i), []budget.Charge{{Scope: budget.Scope{Tenant: testTenant}}}, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Settle(ctx, res, budget.Cost{USD: 0.03, Input: 10000, Output: 500}); err != nil {
			b.Fatal(err)
		}
	}
	for _, days := range []int32{0, 30, 62} {
		b.Run(fmt.Sprintf("days=%d", days), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := h.client.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: testTenant, HistoryDays: days})
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.GetUsage().GetHistory()) != int(days) {
					b.Fatalf("history of %d days, want %d", len(resp.GetUsage().GetHistory()), days)
				}
			}
		})
	}
}
