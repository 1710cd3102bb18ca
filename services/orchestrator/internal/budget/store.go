package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
)

// Cache bounds of [Store]: budgets are read before every model call, so
// they are cached for a moment; a change through the API reaches every
// replica within DefaultCacheTTL (at once on the replica that made it).
const (
	DefaultCacheTTL     = 2 * time.Second
	defaultCacheEntries = 10000
)

// Store is the budgets of tenants and keys: the admin API's entries in
// the KV bucket, over the budgets file's.
type Store struct {
	kv    jetstream.KeyValue
	file  *File
	ttl   time.Duration
	cache *lru.Cache[Scope, *baagentv1.BudgetEntry]
	now   func() time.Time
}

// NewStore returns the store of budgets kept in kv (natsx.BucketBudgets)
// over file's; ttl is how long a read is cached (0: DefaultCacheTTL;
// negative: not cached).
func NewStore(kv jetstream.KeyValue, file *File, ttl time.Duration) *Store {
	if ttl == 0 {
		ttl = DefaultCacheTTL
	}
	return &Store{kv: kv, file: file, ttl: ttl, now: time.Now,
		cache: lru.New[Scope, *baagentv1.BudgetEntry](lru.Options{MaxEntries: defaultCacheEntries})}
}

// budgetKey is a scope's key in the budgets bucket: "<tenant>" or
// "<tenant>.<key id>".
func budgetKey(s Scope) (string, error) {
	if err := CheckScope(s); err != nil {
		return "", err
	}
	if s.KeyID == "" {
		return s.Tenant, nil
	}
	return s.Tenant + "." + s.KeyID, nil
}

// Entry reads the budget of s from the bucket (not the cache) and the file.
func (st *Store) Entry(ctx context.Context, s Scope) (*baagentv1.BudgetEntry, error) {
	key, err := budgetKey(s)
	if err != nil {
		return nil, err
	}
	out := &baagentv1.BudgetEntry{Tenant: s.Tenant, ApiKeyId: s.KeyID, FileBudget: clone(st.file.Get(s))}
	kve, err := st.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("read budget of %s: %w", s, err)
	default:
		var stored baagentv1.BudgetEntry
		if err := proto.Unmarshal(kve.Value(), &stored); err != nil {
			return nil, fmt.Errorf("budget of %s is unreadable: %w", s, err)
		}
		out.ApiBudget, out.UpdatedAt = stored.GetApiBudget(), stored.GetUpdatedAt()
		if out.ApiBudget == nil {
			out.ApiBudget = &baagentv1.Budget{}
		}
	}
	switch {
	case out.ApiBudget != nil:
		out.Budget, out.Source = clone(out.ApiBudget), baagentv1.BudgetSource_BUDGET_SOURCE_API
	case out.FileBudget != nil:
		out.Budget, out.Source = clone(out.FileBudget), baagentv1.BudgetSource_BUDGET_SOURCE_FILE
	default:
		out.Budget, out.Source = &baagentv1.Budget{}, baagentv1.BudgetSource_BUDGET_SOURCE_NONE
	}
	st.cache.Put(s, out, 0, st.cacheTTL())
	return out, nil
}

func (st *Store) cacheTTL() time.Duration {
	if st.ttl < 0 {
		return time.Nanosecond
	}
	return st.ttl
}

// Effective returns the budget of s (cached for a moment). The result must
// not be modified.
func (st *Store) Effective(ctx context.Context, s Scope) (*baagentv1.Budget, error) {
	if st.ttl > 0 {
		if e, ok := st.cache.Get(s); ok {
			return e.GetBudget(), nil
		}
	}
	e, err := st.Entry(ctx, s)
	if err != nil {
		return nil, err
	}
	return e.GetBudget(), nil
}

// Set stores b as the API's budget of s; it replaces the file's entry.
func (st *Store) Set(ctx context.Context, s Scope, b *baagentv1.Budget) (*baagentv1.BudgetEntry, error) {
	key, err := budgetKey(s)
	if err != nil {
		return nil, err
	}
	data, err := proto.Marshal(&baagentv1.BudgetEntry{Tenant: s.Tenant, ApiKeyId: s.KeyID, ApiBudget: b, UpdatedAt: timestamppb.New(st.now())})
	if err != nil {
		return nil, err
	}
	if _, err := st.kv.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("store budget of %s: %w", s, err)
	}
	return st.Entry(ctx, s)
}

// Clear deletes the API's budget of s: the file's applies again.
func (st *Store) Clear(ctx context.Context, s Scope) (*baagentv1.BudgetEntry, error) {
	key, err := budgetKey(s)
	if err != nil {
		return nil, err
	}
	if err := st.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("delete budget of %s: %w", s, err)
	}
	return st.Entry(ctx, s)
}
