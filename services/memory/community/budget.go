package community

import (
	"sync"
	"time"

	"github.com/baagent/baagent/internal/lru"
)

// DefaultTokensPerHour is the default cap on the model tokens a tenant's
// community summaries may spend per hour.
const DefaultTokensPerHour = 20000

// budgetTenants bounds the tenants a Budget remembers; a forgotten tenant
// starts its hour afresh.
const budgetTenants = 4096

// Budget caps the tokens community summaries spend, per tenant per clock
// hour. The updater reserves a summary's estimated cost before asking the
// model (Reserve), and settles with what it actually cost afterwards
// (Settle); when a reservation does not fit, the summary waits for the
// next hour. It is safe for concurrent use.
type Budget struct {
	limit int
	now   func() time.Time

	mu    sync.Mutex
	spend *lru.Cache[string, *hourSpend]
}

type hourSpend struct {
	hour   int64
	tokens int
}

// NewBudget returns a budget of tokensPerHour per tenant
// (DefaultTokensPerHour when <= 0).
func NewBudget(tokensPerHour int) *Budget {
	return newBudget(tokensPerHour, time.Now)
}

func newBudget(tokensPerHour int, now func() time.Time) *Budget {
	if tokensPerHour <= 0 {
		tokensPerHour = DefaultTokensPerHour
	}
	return &Budget{limit: tokensPerHour, now: now, spend: lru.New[string, *hourSpend](lru.Options{MaxEntries: budgetTenants})}
}

// Limit is the tokens per tenant per hour.
func (b *Budget) Limit() int { return b.limit }

// current returns the tenant's spend of this hour; b.mu is held.
func (b *Budget) current(tenant string) *hourSpend {
	hour := b.now().Unix() / 3600
	sp, ok := b.spend.Get(tenant)
	if !ok || sp.hour != hour {
		sp = &hourSpend{hour: hour}
		b.spend.Put(tenant, sp, 0, 0)
	}
	return sp
}

// Reserve adds tokens to the tenant's spend of this hour if the total stays
// within the limit, and reports whether it did.
func (b *Budget) Reserve(tenant string, tokens int) bool {
	tokens = max(tokens, 0)
	b.mu.Lock()
	defer b.mu.Unlock()
	sp := b.current(tenant)
	if sp.tokens+tokens > b.limit {
		return false
	}
	sp.tokens += tokens
	return true
}

// Settle replaces a reservation of reserved tokens by the actual cost (0
// when the call failed without spending). The actual cost counts even
// when it goes over the limit: the next reservations then wait.
func (b *Budget) Settle(tenant string, reserved, actual int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sp := b.current(tenant)
	sp.tokens = max(0, sp.tokens+max(actual, 0)-max(reserved, 0))
}

// Remaining is what the tenant may still spend this hour.
func (b *Budget) Remaining(tenant string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.limit-b.current(tenant).tokens)
}
