package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// clock is an injected, settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// buckets starts an embedded NATS and returns the provisioned budgets and
// usage buckets.
func buckets(t testing.TB) (budgets, usage jetstream.KeyValue) {
	t.Helper()
	js, _ := natstest.Connect(t, natstest.StartNATS(t).ClientURL(), t.Name())
	ctx := testCtx(t)
	b, err := js.KeyValue(ctx, natsx.BucketBudgets)
	if err != nil {
		t.Fatal(err)
	}
	u, err := js.KeyValue(ctx, natsx.BucketUsage)
	if err != nil {
		t.Fatal(err)
	}
	return b, u
}

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }
func i32(v int32) *int32     { return &v }

var acme = Scope{Tenant: "acme"}

func newTestLedger(t testing.TB, kv jetstream.KeyValue, c *clock, conflicts *atomic.Int64) *Ledger {
	t.Helper()
	o := LedgerOptions{ReservationTTL: 10 * time.Minute, Now: c.now}
	if conflicts != nil {
		o.OnConflict = func() { conflicts.Add(1) }
	}
	return NewLedger(kv, o)
}

func usage(t *testing.T, l *Ledger, s Scope) (day, month *baagentv1.UsageWindow) {
	t.Helper()
	day, month, err := l.Usage(testCtx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	return day, month
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestLedgerReserveSettleCounts(t *testing.T) {
	_, kv := buckets(t)
	c := &clock{t: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	l := newTestLedger(t, kv, c, nil)
	ctx := testCtx(t)
	charges := []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(1), TokensPerDay: i64(100000)}}}

	res, err := l.Reserve(ctx, "run1:s1", charges, 0.25, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Holds() {
		t.Fatal("a reservation under a day limit holds nothing")
	}
	day, month := usage(t, l, acme)
	if !near(day.GetReservedUsd(), 0.25) || day.GetReservedTokens() != 5000 || !near(month.GetReservedUsd(), 0.25) {
		t.Fatalf("reserved day=%v/%d month=%v, want 0.25/5000 and 0.25", day.GetReservedUsd(), day.GetReservedTokens(), month.GetReservedUsd())
	}
	if err := l.Settle(ctx, res, Cost{USD: 0.1, Input: 1000, Output: 200}); err != nil {
		t.Fatal(err)
	}
	day, month = usage(t, l, acme)
	if !near(day.GetCostUsd(), 0.1) || day.GetInputTokens() != 1000 || day.GetOutputTokens() != 200 || day.GetModelCalls() != 1 {
		t.Fatalf("day after settle = %v", day)
	}
	if day.GetReservedUsd() != 0 || day.GetReservedTokens() != 0 || month.GetReservedUsd() != 0 {
		t.Fatalf("reservation left after settle: day %v month %v", day, month)
	}
	if !near(month.GetCostUsd(), 0.1) || day.GetPeriod() != "2026-12-04" || month.GetPeriod() != "2026-12" {
		t.Fatalf("month = %v, day period %q", month, day.GetPeriod())
	}
}

func TestLedgerRefusesWhatDoesNotFit(t *testing.T) {
	_, kv := buckets(t)
	c := &clock{t: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	l := newTestLedger(t, kv, c, nil)
	ctx := testCtx(t)
	cases := []struct {
		name   string
		budget *baagentv1.Budget
		usd    float64
		tokens int64
		limit  string
	}{
		{"usd per day", &baagentv1.Budget{UsdPerDay: f64(1)}, 0.6, 10, LimitUSDPerDay},
		{"usd per month", &baagentv1.Budget{UsdPerMonth: f64(1)}, 0.6, 10, LimitUSDPerMonth},
		{"tokens per day", &baagentv1.Budget{TokensPerDay: i64(1000)}, 0, 600, LimitTokensPerDay},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Scope{Tenant: fmt.Sprintf("t%d", i)}
			ch := []Charge{{Scope: s, Budget: tc.budget}}
			first, err := l.Reserve(ctx, "a", ch, tc.usd, tc.tokens)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Reserve(ctx, "b", ch, tc.usd, tc.tokens)
			ex, ok := AsExceeded(err)
			if !ok || ex.Limit != tc.limit || ex.Scope != s {
				t.Fatalf("second reservation: %v, want the %s limit of %s exceeded", err, tc.limit, s)
			}
			// The refused reservation left nothing behind.
			day, month := usage(t, l, s)
			if got := max(day.GetReservedUsd(), month.GetReservedUsd()); !near(got, tc.usd) {
				t.Fatalf("reserved %v after a refusal, want %v", got, tc.usd)
			}
			if err := l.Settle(ctx, first, Cost{}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Reserve(ctx, "c", ch, tc.usd, tc.tokens); err != nil {
				t.Fatalf("after the first was settled at 0: %v", err)
			}
		})
	}
}

func TestLedgerZeroLimitAllowsNothing(t *testing.T) {
	_, kv := buckets(t)
	l := newTestLedger(t, kv, &clock{t: time.Now()}, nil)
	ch := []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(0)}}}
	// Even an unpriced call (worst cost 0).
	if _, err := l.Reserve(testCtx(t), "a", ch, 0, 10); err == nil {
		t.Fatal("a zero limit allowed a model call")
	}
	if err := l.Check(testCtx(t), ch); err == nil {
		t.Fatal("Check accepted a zero limit")
	}
}

func TestLedgerWithoutLimitsOnlyCounts(t *testing.T) {
	_, kv := buckets(t)
	l := newTestLedger(t, kv, &clock{t: time.Now()}, nil)
	ctx := testCtx(t)
	ch := []Charge{{Scope: acme}}
	res, err := l.Reserve(ctx, "a", ch, 1e6, 1e9)
	if err != nil || res.Holds() {
		t.Fatalf("Reserve without limits = %v, holds %v", err, res.Holds())
	}
	if err := l.Settle(ctx, res, Cost{Input: 30, Output: 12, Unpriced: true}); err != nil {
		t.Fatal(err)
	}
	day, _ := usage(t, l, acme)
	if day.GetUnpricedTokens() != 42 || day.GetCostUsd() != 0 || day.GetModelCalls() != 1 {
		t.Fatalf("day = %v, want 42 unpriced tokens", day)
	}
}

func TestLedgerDayAndMonthRollOver(t *testing.T) {
	_, kv := buckets(t)
	c := &clock{t: time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC)}
	l := newTestLedger(t, kv, c, nil)
	ctx := testCtx(t)
	ch := []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(1), UsdPerMonth: f64(1.5)}}}
	spend := func(usd float64) error {
		res, err := l.Reserve(ctx, fmt.Sprint(c.now().UnixNano()), ch, usd, 0)
		if err != nil {
			return err
		}
		return l.Settle(ctx, res, Cost{USD: usd, Input: 1})
	}
	if err := spend(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(ctx, ch); err == nil || mustExceeded(t, err).Limit != LimitUSDPerDay {
		t.Fatalf("Check at the day's limit = %v", err)
	}
	// A minute later it is another day and another month.
	c.set(time.Date(2026, 2, 1, 0, 0, 30, 0, time.UTC))
	if err := l.Check(ctx, ch); err != nil {
		t.Fatalf("Check on the next day: %v", err)
	}
	day, month := usage(t, l, acme)
	if day.GetCostUsd() != 0 || month.GetCostUsd() != 0 || day.GetPeriod() != "2026-02-01" || month.GetPeriod() != "2026-02" {
		t.Fatalf("new period usage day %v month %v", day, month)
	}
	if err := spend(0.8); err != nil {
		t.Fatal(err)
	}
	// Next day, same month: the day is fresh, the month is not.
	c.set(time.Date(2026, 2, 2, 12, 0, 0, 0, time.UTC))
	if err := spend(0.8); mustExceeded(t, err).Limit != LimitUSDPerMonth {
		t.Fatalf("spend over the month = %v", err)
	}
	if err := spend(0.7); err != nil {
		t.Fatalf("spend within the month: %v", err)
	}
	if err := l.Check(ctx, ch); mustExceeded(t, err).Limit != LimitUSDPerMonth {
		t.Fatalf("Check at the month's limit = %v", err)
	}
}

func mustExceeded(t *testing.T, err error) *Exceeded {
	t.Helper()
	ex, ok := AsExceeded(err)
	if !ok {
		t.Fatalf("err = %v, want *Exceeded", err)
	}
	return ex
}

func TestLedgerReservationExpires(t *testing.T) {
	_, kv := buckets(t)
	c := &clock{t: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	l := newTestLedger(t, kv, c, nil)
	ctx := testCtx(t)
	ch := []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(1)}}}
	if _, err := l.Reserve(ctx, "crashed", ch, 0.9, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, "other", ch, 0.5, 0); err == nil {
		t.Fatal("a live reservation did not count")
	}
	c.set(c.now().Add(10*time.Minute + time.Second))
	day, _ := usage(t, l, acme)
	if day.GetReservedUsd() != 0 {
		t.Fatalf("expired reservation still reported: %v", day.GetReservedUsd())
	}
	res, err := l.Reserve(ctx, "other", ch, 0.5, 0)
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	// The write dropped the expired reservation from the entry.
	e, _, err := l.read(ctx, ledgerKey(acme, periodDay, Day(c.now())))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Res["crashed"]; ok || len(e.Res) != 1 {
		t.Fatalf("reservations in the entry: %v", e.Res)
	}
	// A late settle of the crashed call still counts its cost.
	if err := l.Settle(ctx, &Reservation{id: "crashed", keys: []string{ledgerKey(acme, periodDay, Day(c.now()))}}, Cost{USD: 0.2, Input: 5}); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, res, Cost{USD: 0.3, Input: 5}); err != nil {
		t.Fatal(err)
	}
	day, _ = usage(t, l, acme)
	if !near(day.GetCostUsd(), 0.5) || day.GetReservedUsd() != 0 {
		t.Fatalf("day = %v, want $0.5 and nothing reserved", day)
	}
}

// TestLedgerCASUnderContention has many writers settle into one entry at
// once: every update lands (none lost to a race), through retries.
func TestLedgerCASUnderContention(t *testing.T) {
	_, kv := buckets(t)
	var conflicts atomic.Int64
	c := &clock{t: time.Now()}
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		l := newTestLedger(t, kv, c, &conflicts) // a replica each
		wg.Go(func() {
			for i := range each {
				res, err := l.Reserve(testCtx(t), fmt.Sprintf("w%d-%d", w, i), []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(1000)}}}, 1, 10)
				if err == nil {
					err = l.Settle(testCtx(t), res, Cost{USD: 0.001, Input: 1, Output: 1})
				}
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l := newTestLedger(t, kv, c, nil)
	day, month := usage(t, l, acme)
	if day.GetModelCalls() != writers*each || day.GetInputTokens() != writers*each || !near(day.GetCostUsd(), writers*each*0.001) {
		t.Fatalf("day = %v, want %d calls", day, writers*each)
	}
	if day.GetReservedUsd() != 0 || month.GetReservedUsd() != 0 {
		t.Fatalf("reservations left: %v %v", day.GetReservedUsd(), month.GetReservedUsd())
	}
	t.Logf("%d compare-and-set retries", conflicts.Load())
}

// TestLedgerRacingForTheLastDollar: concurrent reservations against one
// limit never hold more than it allows.
func TestLedgerRacingForTheLastDollar(t *testing.T) {
	_, kv := buckets(t)
	c := &clock{t: time.Now()}
	ch := []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(1)}}}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for w := range 10 {
		l := newTestLedger(t, kv, c, nil)
		wg.Go(func() {
			if _, err := l.Reserve(testCtx(t), fmt.Sprint("w", w), ch, 0.3, 0); err == nil {
				granted.Add(1)
			} else if _, ok := AsExceeded(err); !ok {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if granted.Load() != 3 {
		t.Fatalf("%d reservations of $0.30 granted under $1, want 3", granted.Load())
	}
}

func TestLedgerKeyScopeSeparate(t *testing.T) {
	_, kv := buckets(t)
	l := newTestLedger(t, kv, &clock{t: time.Now()}, nil)
	ctx := testCtx(t)
	key := Scope{Tenant: "acme", KeyID: "0123abcd"}
	ch := []Charge{{Scope: acme}, {Scope: key, Budget: &baagentv1.Budget{UsdPerDay: f64(0.5)}}}
	res, err := l.Reserve(ctx, "a", ch, 0.4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, res, Cost{USD: 0.4, Input: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, "b", ch, 0.4, 0); mustExceeded(t, err).Scope != key {
		t.Fatalf("err = %v, want the key's limit", err)
	}
	td, _ := usage(t, l, acme)
	kd, _ := usage(t, l, key)
	if !near(td.GetCostUsd(), 0.4) || !near(kd.GetCostUsd(), 0.4) || td.GetReservedUsd() != 0 {
		t.Fatalf("tenant %v key %v", td, kd)
	}
}

func TestLedgerUnreadableEntryIsReplaced(t *testing.T) {
	_, kv := buckets(t)
	l := newTestLedger(t, kv, &clock{t: time.Now()}, nil)
	ctx := testCtx(t)
	if _, err := kv.Put(ctx, ledgerKey(acme, periodDay, Day(time.Now())), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	res, err := l.Reserve(ctx, "a", []Charge{{Scope: acme}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, res, Cost{USD: 0.1, Input: 1}); err != nil {
		t.Fatal(err)
	}
	day, _ := usage(t, l, acme)
	if !near(day.GetCostUsd(), 0.1) {
		t.Fatalf("day = %v", day)
	}
}

func TestLedgerCancelledContext(t *testing.T) {
	_, kv := buckets(t)
	l := newTestLedger(t, kv, &clock{t: time.Now()}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Reserve(ctx, "a", []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(1)}}}, 0.1, 0)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve on a cancelled context = %v", err)
	}
}

func TestLedgerHistory(t *testing.T) {
	_, kv := buckets(t)
	c := &clock{}
	l := newTestLedger(t, kv, c, nil)
	ctx := testCtx(t)
	key := Scope{Tenant: "acme", KeyID: "0a1b2c3d"}
	spend := func(at time.Time, s Scope, usd float64, in, out int64) {
		t.Helper()
		c.set(at)
		res, err := l.Reserve(ctx, fmt.Sprintf("run:%d", at.UnixNano()), []Charge{{Scope: s}}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, res, Cost{USD: usd, Input: in, Output: out}); err != nil {
			t.Fatal(err)
		}
	}
	// Across a month's end; 02-26 and 02-28 have no entry.
	spend(time.Date(2026, 2, 27, 23, 59, 0, 0, time.UTC), acme, 0.5, 100, 10)
	spend(time.Date(2026, 3, 1, 0, 0, 1, 0, time.UTC), acme, 0.25, 200, 20)
	spend(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), acme, 0.125, 300, 30)
	spend(time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC), key, 1, 7, 7)
	c.set(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	// A reservation in progress today is reported with today.
	if _, err := l.Reserve(ctx, "live", []Charge{{Scope: acme, Budget: &baagentv1.Budget{UsdPerDay: f64(10)}}}, 0.75, 4000); err != nil {
		t.Fatal(err)
	}

	h, err := l.History(ctx, acme, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		period string
		usd    float64
		in     int64
		out    int64
	}{{"2026-02-26", 0, 0, 0}, {"2026-02-27", 0.5, 100, 10}, {"2026-02-28", 0, 0, 0}, {"2026-03-01", 0.25, 200, 20}, {"2026-03-02", 0.125, 300, 30}}
	if len(h) != len(want) {
		t.Fatalf("history has %d days, want %d: %v", len(h), len(want), h)
	}
	for i, w := range want {
		g := h[i]
		if g.GetPeriod() != w.period || !near(g.GetCostUsd(), w.usd) || g.GetInputTokens() != w.in || g.GetOutputTokens() != w.out {
			t.Errorf("day %d = %v, want %+v", i, g, w)
		}
	}
	if last := h[len(h)-1]; !near(last.GetReservedUsd(), 0.75) || last.GetReservedTokens() != 4000 || last.GetModelCalls() != 1 {
		t.Errorf("today = %v, want the live reservation and one call", last)
	}
	// Today matches Usage's day.
	day, _ := usage(t, l, acme)
	if !proto.Equal(day, h[len(h)-1]) {
		t.Errorf("Usage day %v != history's today %v", day, h[len(h)-1])
	}
	// A key's history is its own.
	kh, err := l.History(ctx, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(kh) != 2 || kh[0].GetCostUsd() != 0 || !near(kh[1].GetCostUsd(), 1) || kh[1].GetPeriod() != "2026-03-02" {
		t.Errorf("key history = %v", kh)
	}
	// The whole range the bucket keeps.
	full, err := l.History(ctx, acme, MaxHistoryDays)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != MaxHistoryDays || full[0].GetPeriod() != "2025-12-31" || full[MaxHistoryDays-1].GetPeriod() != "2026-03-02" {
		t.Fatalf("full history: %d days, %s..%s", len(full), full[0].GetPeriod(), full[len(full)-1].GetPeriod())
	}
	var total float64
	for _, w := range full {
		total += w.GetCostUsd()
	}
	if !near(total, 0.875) {
		t.Errorf("full history sums to %v, want 0.875", total)
	}
	if none, err := l.History(ctx, acme, 0); err != nil || len(none) != 0 {
		t.Errorf("History(0) = %v, %v", none, err)
	}
	for _, bad := range []int{-1, MaxHistoryDays + 1} {
		if _, err := l.History(ctx, acme, bad); err == nil {
			t.Errorf("History(%d) accepted", bad)
		}
	}
}

func TestLedgerHistoryCancelled(t *testing.T) {
	_, kv := buckets(t)
	l := newTestLedger(t, kv, &clock{t: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)}, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, err := l.History(ctx, acme, 30); err == nil {
		t.Fatal("History on a cancelled context succeeded")
	}
}
