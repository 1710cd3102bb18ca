package budget

import (
	"context"
	"strconv"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// BenchmarkStepBudget is the budget work of one ReAct step against an
// embedded JetStream: the budget read (cached), then, with limits, the
// step boundary's check, the model call's reservation and its settlement;
// without limits only the settlement (usage is always counted).
func BenchmarkStepBudget(b *testing.B) {
	for _, bc := range []struct {
		name   string
		budget *baagentv1.Budget
	}{
		{"no_limits", nil},
		{"day_and_month_limits", &baagentv1.Budget{UsdPerDay: f64(1e6), UsdPerMonth: f64(1e7), TokensPerDay: i64(1e12)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			budgets, usage := buckets(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			st := NewStore(budgets, nil, DefaultCacheTTL)
			if bc.budget != nil {
				if _, err := st.Set(ctx, acme, bc.budget); err != nil {
					b.Fatal(err)
				}
			}
			l := NewLedger(usage, LedgerOptions{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				bud, err := st.Effective(ctx, acme)
				if err != nil {
					b.Fatal(err)
				}
				ch := []Charge{{Scope: acme, Budget: bud}}
				if Windowed(bud) {
					if err := l.Check(ctx, ch); err != nil {
						b.Fatal(err)
					}
				}
				res, err := l.Reserve(ctx, "run:s"+strconv.Itoa(i), ch, 0.05, 20000)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Settle(ctx, res, Cost{USD: 0.03, Input: 10000, Output: 500}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
