package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// DefaultReservationTTL is how long a reservation counts when it is never
// settled (its replica crashed during the model call).
const DefaultReservationTTL = 15 * time.Minute

// maxReservations bounds the reservations one ledger entry holds: one per
// model call in progress for the tenant (or key) at once. Expired ones
// are dropped on every write, so only a burst of that many concurrent
// model calls meets the bound; the call beyond it is refused.
const maxReservations = 4096

// maxCASAttempts bounds the compare-and-set retries of one entry update;
// each retry follows another writer's success, so it is only reached
// under extreme contention.
const maxCASAttempts = 64

// ErrBusy is a ledger entry that could not be updated: too many writers
// at once, or too many reservations in progress.
var ErrBusy = errors.New("usage ledger busy")

// nano converts USD to the ledger's integer nano-dollars (exact sums):
// clamped to ±MaxUSD·10, NaN as 0.
func nano(usd float64) int64 {
	switch {
	case math.IsNaN(usd):
		return 0
	case usd > MaxUSD*10:
		usd = MaxUSD * 10
	case usd < -MaxUSD*10:
		usd = -MaxUSD * 10
	}
	return int64(math.Round(usd * 1e9))
}

func fromNano(n int64) float64 { return float64(n) / 1e9 }

// entry is the value of a ledger key: the settled usage of one scope and
// period, and the reservations of model calls in progress.
type entry struct {
	CostNano int64                  `json:"cost_nano,omitempty"`
	Input    int64                  `json:"input,omitempty"`
	Output   int64                  `json:"output,omitempty"`
	Calls    int64                  `json:"calls,omitempty"`
	Unpriced int64                  `json:"unpriced,omitempty"`
	Res      map[string]reservation `json:"res,omitempty"`
}

type reservation struct {
	CostNano int64 `json:"c,omitempty"`
	Tokens   int64 `json:"t,omitempty"`
	Expires  int64 `json:"e"` // unix nanoseconds
}

// prune drops the reservations expired at now.
func (e *entry) prune(now time.Time) {
	for id, r := range e.Res {
		if r.Expires <= now.UnixNano() {
			delete(e.Res, id)
		}
	}
}

// reserved sums the reservations live at now.
func (e *entry) reserved(now time.Time) (costNano, tokens int64) {
	for _, r := range e.Res {
		if r.Expires > now.UnixNano() {
			costNano += r.CostNano
			tokens += r.Tokens
		}
	}
	return costNano, tokens
}

func (e *entry) tokens() int64 { return e.Input + e.Output }

// Period kinds of ledger keys.
const (
	periodDay   = "d"
	periodMonth = "m"
)

// Day and Month name the UTC period of t in ledger keys and reports.
func Day(t time.Time) string   { return t.UTC().Format("2006-01-02") }
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// ledgerKey is the key of a scope's usage in one period:
// "<tenant>.d.<day>", "<tenant>.m.<month>", "<tenant>.k.<key id>.d.<day>".
func ledgerKey(s Scope, kind, period string) string {
	if s.KeyID == "" {
		return s.Tenant + "." + kind + "." + period
	}
	return s.Tenant + ".k." + s.KeyID + "." + kind + "." + period
}

// Charge is one scope a model call is counted against, with the limits
// that apply to it (nil or empty: counted, not limited).
type Charge struct {
	Scope  Scope
	Budget *baagentv1.Budget
}

// Cost is what a model call used.
type Cost struct {
	USD    float64
	Input  int64
	Output int64
	// Unpriced: the model's price is unknown, USD is 0 and the tokens
	// are counted as unpriced too.
	Unpriced bool
}

// Reservation is a model call's hold on the ledger, released by Settle.
type Reservation struct {
	id   string
	keys []string        // every entry the call is counted in
	held map[string]bool // entries holding a reservation
}

// Holds reports whether the reservation holds anything (some charge had
// limits over days or months).
func (r *Reservation) Holds() bool { return r != nil && len(r.held) > 0 }

// Ledger is the shared usage ledger (natsx.BucketUsage).
type Ledger struct {
	kv         jetstream.KeyValue
	ttl        time.Duration
	now        func() time.Time
	onConflict func()
}

// LedgerOptions configures a [Ledger]. Zero values take the defaults.
type LedgerOptions struct {
	// ReservationTTL is how long an unsettled reservation counts
	// (default DefaultReservationTTL).
	ReservationTTL time.Duration
	// Now is the clock (default time.Now); tests inject one.
	Now func() time.Time
	// OnConflict is called for every compare-and-set retry (metrics).
	OnConflict func()
}

// NewLedger returns the ledger kept in kv.
func NewLedger(kv jetstream.KeyValue, o LedgerOptions) *Ledger {
	l := &Ledger{kv: kv, ttl: o.ReservationTTL, now: o.Now, onConflict: o.OnConflict}
	if l.ttl <= 0 {
		l.ttl = DefaultReservationTTL
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.onConflict == nil {
		l.onConflict = func() {}
	}
	return l
}

// read returns the entry at key and its revision (0: none).
func (l *Ledger) read(ctx context.Context, key string) (*entry, uint64, error) {
	kve, err := l.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &entry{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read usage %s: %w", key, err)
	}
	var e entry
	if err := json.Unmarshal(kve.Value(), &e); err != nil {
		// An unreadable entry would block its tenant for the period;
		// it is overwritten instead (its usage is lost, and logged by
		// the caller through the error of a later read, never here).
		return &entry{}, kve.Revision(), nil
	}
	return &e, kve.Revision(), nil
}

// update applies fn to the entry at key with compare-and-set, retrying
// when another writer got in first. fn may return an error to leave the
// entry unchanged.
func (l *Ledger) update(ctx context.Context, key string, fn func(e *entry, now time.Time) error) error {
	for attempt := 0; ; attempt++ {
		e, rev, err := l.read(ctx, key)
		if err != nil {
			return err
		}
		now := l.now()
		e.prune(now)
		if err := fn(e, now); err != nil {
			return err
		}
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = l.kv.Create(ctx, key, data)
		} else {
			_, err = l.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("write usage %s: %w", key, err)
		}
		l.onConflict()
		if attempt+1 >= maxCASAttempts {
			return fmt.Errorf("%w: %s changed %d times during one update", ErrBusy, key, maxCASAttempts)
		}
		if attempt >= 2 {
			// Spread the writers that keep colliding.
			d := time.Duration(rand.Int64N(int64(min(attempt, 20)) * int64(time.Millisecond)))
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			case <-t.C:
			}
		}
	}
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Reserve holds a model call's worst-case cost (worstUSD; 0 when the
// price is unknown) and tokens in every period of every charge whose
// budget limits days or months, after checking that it fits. It returns
// *Exceeded naming the first limit it would cross (and holds nothing
// then). id names the call (unique per run and step: a step repeated
// after a crash replaces its own reservation).
func (l *Ledger) Reserve(ctx context.Context, id string, charges []Charge, worstUSD float64, worstTokens int64) (*Reservation, error) {
	now := l.now()
	day, month := Day(now), Month(now)
	res := &Reservation{id: id, held: map[string]bool{}}
	worst := reservation{CostNano: max(0, nano(worstUSD)), Tokens: max(0, worstTokens), Expires: now.Add(l.ttl).UnixNano()}
	for _, c := range charges {
		dk, mk := ledgerKey(c.Scope, periodDay, day), ledgerKey(c.Scope, periodMonth, month)
		res.keys = append(res.keys, dk, mk)
		b := c.Budget
		if !windowed(b) {
			continue
		}
		for _, k := range []string{dk, mk} {
			err := l.update(ctx, k, func(e *entry, now time.Time) error {
				cost, tokens := e.reserved(now)
				if _, mine := e.Res[id]; mine {
					// Replaced below: not counted twice.
					cost -= e.Res[id].CostNano
					tokens -= e.Res[id].Tokens
				}
				cost += e.CostNano
				tokens += e.tokens()
				if err := fits(c.Scope, b, k == dk, cost, tokens, worst); err != nil {
					return err
				}
				if _, mine := e.Res[id]; !mine && len(e.Res) >= maxReservations {
					return fmt.Errorf("%w: %d model calls of %s are in progress", ErrBusy, len(e.Res), c.Scope)
				}
				if e.Res == nil {
					e.Res = map[string]reservation{}
				}
				e.Res[id] = worst
				return nil
			})
			if err != nil {
				l.release(ctx, res)
				return nil, err
			}
			res.held[k] = true
		}
	}
	return res, nil
}

// fits checks that a reservation of worst fits the limits of one entry
// (a day's when day, else a month's) holding cost and tokens.
func fits(s Scope, b *baagentv1.Budget, day bool, costNano, tokens int64, worst reservation) error {
	check := func(limit string, used, add, allowed int64, format func(int64) string) error {
		if used+add > allowed || used >= allowed {
			return &Exceeded{Scope: s, Limit: limit, Detail: fmt.Sprintf("%s used or reserved of %s, and the next model call may take up to %s",
				format(used), format(allowed), format(add))}
		}
		return nil
	}
	usd := func(n int64) string { return usdString(fromNano(n)) }
	toks := func(n int64) string { return fmt.Sprintf("%d tokens", n) }
	if day {
		if b.UsdPerDay != nil {
			if err := check(LimitUSDPerDay, costNano, worst.CostNano, nano(b.GetUsdPerDay()), usd); err != nil {
				return err
			}
		}
		if b.TokensPerDay != nil {
			if err := check(LimitTokensPerDay, tokens, worst.Tokens, b.GetTokensPerDay(), toks); err != nil {
				return err
			}
		}
		return nil
	}
	if b.UsdPerMonth != nil {
		return check(LimitUSDPerMonth, costNano, worst.CostNano, nano(b.GetUsdPerMonth()), usd)
	}
	return nil
}

// release drops res's reservations without counting anything; a failure
// leaves them to expire.
func (l *Ledger) release(ctx context.Context, res *Reservation) {
	for k := range res.held {
		_ = l.update(ctx, k, func(e *entry, _ time.Time) error {
			delete(e.Res, res.id)
			return nil
		})
	}
	clear(res.held)
}

// Settle counts a finished model call in every entry of res and drops
// its reservations. A call that failed is settled with a zero Cost. On an
// error some entries may be settled and others not; the unsettled
// reservations expire.
func (l *Ledger) Settle(ctx context.Context, res *Reservation, c Cost) error {
	if res == nil {
		return nil
	}
	var errs []error
	for _, k := range res.keys {
		err := l.update(ctx, k, func(e *entry, _ time.Time) error {
			delete(e.Res, res.id)
			e.CostNano += max(0, nano(c.USD))
			e.Input += max(0, c.Input)
			e.Output += max(0, c.Output)
			if c.Unpriced {
				e.Unpriced += max(0, c.Input) + max(0, c.Output)
			}
			if c.Input > 0 || c.Output > 0 || c.USD > 0 {
				e.Calls++
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(res.held, k)
	}
	return errors.Join(errs...)
}

// Check reports the first day or month limit of charges that the settled
// usage has reached (*Exceeded), for the start of a run and of a step.
func (l *Ledger) Check(ctx context.Context, charges []Charge) error {
	now := l.now()
	for _, c := range charges {
		b := c.Budget
		if !windowed(b) {
			continue
		}
		if b.UsdPerDay != nil || b.TokensPerDay != nil {
			e, _, err := l.read(ctx, ledgerKey(c.Scope, periodDay, Day(now)))
			if err != nil {
				return err
			}
			if b.UsdPerDay != nil && e.CostNano >= nano(b.GetUsdPerDay()) {
				return &Exceeded{Scope: c.Scope, Limit: LimitUSDPerDay, Detail: fmt.Sprintf("%s spent today (UTC) of %s", usdString(fromNano(e.CostNano)), usdString(b.GetUsdPerDay()))}
			}
			if b.TokensPerDay != nil && e.tokens() >= b.GetTokensPerDay() {
				return &Exceeded{Scope: c.Scope, Limit: LimitTokensPerDay, Detail: fmt.Sprintf("%d tokens used today (UTC) of %d", e.tokens(), b.GetTokensPerDay())}
			}
		}
		if b.UsdPerMonth != nil {
			e, _, err := l.read(ctx, ledgerKey(c.Scope, periodMonth, Month(now)))
			if err != nil {
				return err
			}
			if e.CostNano >= nano(b.GetUsdPerMonth()) {
				return &Exceeded{Scope: c.Scope, Limit: LimitUSDPerMonth, Detail: fmt.Sprintf("%s spent this month (UTC) of %s", usdString(fromNano(e.CostNano)), usdString(b.GetUsdPerMonth()))}
			}
		}
	}
	return nil
}

// window reads the usage of s in one period at now; a period without an
// entry is a window of zeros.
func (l *Ledger) window(ctx context.Context, s Scope, kind, period string, now time.Time) (*baagentv1.UsageWindow, error) {
	e, _, err := l.read(ctx, ledgerKey(s, kind, period))
	if err != nil {
		return nil, err
	}
	cost, tokens := e.reserved(now)
	return &baagentv1.UsageWindow{
		Period: period, CostUsd: fromNano(e.CostNano), InputTokens: e.Input, OutputTokens: e.Output,
		ModelCalls: e.Calls, ReservedUsd: fromNano(cost), ReservedTokens: tokens, UnpricedTokens: e.Unpriced,
	}, nil
}

// Usage reads the usage of s today and this month (UTC).
func (l *Ledger) Usage(ctx context.Context, s Scope) (day, month *baagentv1.UsageWindow, err error) {
	day, month, _, err = l.Report(ctx, s, 0)
	return day, month, err
}

// Report reads the usage of s today and this month (UTC) and, as History
// does, on each of the last days days; today is read once, so the
// history's last day is the day reported.
func (l *Ledger) Report(ctx context.Context, s Scope, days int) (day, month *baagentv1.UsageWindow, history []*baagentv1.UsageWindow, err error) {
	if err := checkHistoryDays(days); err != nil {
		return nil, nil, nil, err
	}
	now := l.now()
	if day, err = l.window(ctx, s, periodDay, Day(now), now); err != nil {
		return nil, nil, nil, err
	}
	if month, err = l.window(ctx, s, periodMonth, Month(now), now); err != nil {
		return nil, nil, nil, err
	}
	if history, err = l.history(ctx, s, days, now, day); err != nil {
		return nil, nil, nil, err
	}
	return day, month, history, nil
}

// MaxHistoryDays is the most days History reads: the usage bucket keeps
// its entries 62 days (natsx.BucketUsage).
const MaxHistoryDays = 62

// historyReaders bounds the concurrent reads of one History call.
const historyReaders = 8

// History reads the usage of s on each of the last days UTC days, oldest
// first and ending with today; a day without an entry is present with
// zeros. days must be 0..MaxHistoryDays (0: none). The days are read
// concurrently, at most historyReaders at once.
func (l *Ledger) History(ctx context.Context, s Scope, days int) ([]*baagentv1.UsageWindow, error) {
	if err := checkHistoryDays(days); err != nil {
		return nil, err
	}
	return l.history(ctx, s, days, l.now(), nil)
}

func checkHistoryDays(days int) error {
	if days < 0 || days > MaxHistoryDays {
		return fmt.Errorf("history of %d days: must be 0..%d", days, MaxHistoryDays)
	}
	return nil
}

// history reads the last days days at now; today, when already read, is
// used for the last day instead of being read again.
func (l *Ledger) history(ctx context.Context, s Scope, days int, now time.Time, today *baagentv1.UsageWindow) ([]*baagentv1.UsageWindow, error) {
	if days == 0 {
		return nil, nil
	}
	out := make([]*baagentv1.UsageWindow, days)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(historyReaders)
	for i := range days {
		period := Day(now.UTC().AddDate(0, 0, i-days+1))
		if i == days-1 && today != nil {
			out[i] = today
			continue
		}
		g.Go(func() error {
			w, err := l.window(gctx, s, periodDay, period, now)
			if err != nil {
				return err
			}
			out[i] = w
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Now is the ledger's clock, for reports.
func (l *Ledger) Now() *timestamppb.Timestamp { return timestamppb.New(l.now()) }
