package lru

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// keys returns the cache's keys, most recently used first.
func keys[K comparable, V any](c *Cache[K, V]) []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []K
	for e := c.root.next; e != &c.root; e = e.next {
		out = append(out, e.key)
	}
	return out
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := New[int, string](Options{MaxEntries: 3})
	for i := range 3 {
		c.Put(i, fmt.Sprint(i), 0, 0)
	}
	c.Get(0)              // 0 is now the most recent
	c.Put(3, "3", 0, 0)   // evicts 1
	c.Put(2, "two", 0, 0) // an update: moves 2 to the front, evicts nothing
	if got, want := keys(c), []int{2, 3, 0}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	if _, ok := c.Get(1); ok {
		t.Error("1, the least recently used, was not evicted")
	}
	if v, _ := c.Get(2); v != "two" {
		t.Errorf("Get(2) = %q after the update", v)
	}
	if c.Len() != 3 {
		t.Errorf("Len %d, want 3", c.Len())
	}
	// GetOrAdd of a new key into the full cache evicts the least recent (0);
	// the evicted entry is reused without leaking its value.
	if v := c.GetOrAdd(4, func() string { return "4" }); v != "4" {
		t.Fatalf("GetOrAdd(4) = %q", v)
	}
	if got, want := keys(c), []int{4, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	if _, ok := c.Get(0); ok {
		t.Error("0 survived GetOrAdd into a full cache")
	}
	if v, _ := c.Get(3); v != "3" {
		t.Errorf("Get(3) = %q", v)
	}
}

func TestPeekKeepsTheOrderOfWrites(t *testing.T) {
	t.Parallel()
	c := New[int, int](Options{MaxEntries: 2})
	c.Put(1, 1, 0, 0)
	c.Put(2, 2, 0, 0)
	if v, ok := c.Peek(1); !ok || v != 1 {
		t.Fatalf("Peek(1) = %v, %v", v, ok)
	}
	c.Put(3, 3, 0, 0) // 1 is still the least recently written
	if _, ok := c.Peek(1); ok {
		t.Error("Peek marked 1 used: it survived an eviction")
	}
}

func TestEntryCountBelowOneIsOne(t *testing.T) {
	t.Parallel()
	c := New[int, int](Options{})
	c.Put(1, 1, 0, 0)
	c.Put(2, 2, 0, 0)
	if got := keys(c); !slices.Equal(got, []int{2}) {
		t.Fatalf("keys %v, want [2]", got)
	}
}

func TestCostBound(t *testing.T) {
	t.Parallel()
	c := New[string, int](Options{MaxEntries: 100, MaxCost: 10})
	c.Put("a", 0, 4, 0)
	c.Put("b", 0, 4, 0)
	c.Put("c", 0, 4, 0) // 12 > 10: a goes
	if got := keys(c); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("keys %v, want [c b]", got)
	}
	c.AddCost("b", 3) // 11 > 10: b, the least recent, goes even though c did not grow
	if got := keys(c); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after AddCost keys %v, want [c]", got)
	}
	c.Put("big", 0, 50, 0) // alone above the bound: kept, everything else goes
	if got := keys(c); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("keys %v, want [big]", got)
	}
	c.Put("big", 0, 2, 0) // an update replaces the cost
	c.Put("d", 0, 8, 0)
	if got := keys(c); !slices.Equal(got, []string{"d", "big"}) {
		t.Fatalf("keys %v, want [d big]: the update's cost was not replaced", got)
	}
	c.Remove("d")
	c.Put("e", 0, 8, 0)
	if got := keys(c); !slices.Equal(got, []string{"e", "big"}) {
		t.Fatalf("keys %v, want [e big]: Remove did not give back d's cost", got)
	}
	c.AddCost("missing", 100) // no entry: no effect
	if c.Len() != 2 {
		t.Fatalf("AddCost of a missing key evicted: Len %d", c.Len())
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	c := New[string, int](Options{MaxEntries: 10, Now: func() time.Time { return now }})
	c.Put("short", 1, 0, time.Second)
	c.Put("long", 2, 0, time.Minute)
	c.Put("never", 3, 0, 0)
	now = now.Add(999 * time.Millisecond)
	if _, ok := c.Get("short"); !ok {
		t.Fatal("expired before its TTL")
	}
	now = now.Add(time.Millisecond) // exactly at the expiry: gone
	if _, ok := c.Get("short"); ok {
		t.Fatal("still there at its expiry")
	}
	if c.Len() != 2 {
		t.Fatalf("an expired entry read is removed: Len %d, want 2", c.Len())
	}
	now = now.Add(time.Hour)
	if _, ok := c.Peek("long"); ok {
		t.Fatal("Peek returned an expired entry")
	}
	c.Put("again", 4, 0, time.Second)
	now = now.Add(time.Second)
	c.RemoveExpired()
	if got := keys(c); !slices.Equal(got, []string{"never"}) {
		t.Fatalf("after RemoveExpired keys %v, want [never]", got)
	}
	// A write replaces the expiry; GetOrAdd replaces an expired entry.
	c.Put("k", 1, 0, time.Second)
	c.Put("k", 2, 0, 0)
	now = now.Add(time.Hour)
	if v, ok := c.Get("k"); !ok || v != 2 {
		t.Fatalf("Get(k) = %v, %v: the rewrite without TTL expired", v, ok)
	}
	c.Put("k", 3, 0, time.Second)
	now = now.Add(time.Second)
	if v := c.GetOrAdd("k", func() int { return 9 }); v != 9 {
		t.Fatalf("GetOrAdd returned the expired value %d", v)
	}
}

func TestGetOrAddMakesOneValuePerKey(t *testing.T) {
	t.Parallel()
	c := New[int, *int](Options{MaxEntries: 10})
	var made sync.Map
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Go(func() {
			got[i] = c.GetOrAdd(1, func() *int {
				v := new(int)
				made.Store(v, true)
				return v
			})
		})
	}
	wg.Wait()
	n := 0
	made.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d values made for one key", n)
	}
	for _, v := range got {
		if v != got[0] {
			t.Fatal("callers got different values")
		}
	}
}

func TestRemoveIfAndPurge(t *testing.T) {
	t.Parallel()
	c := New[int, int](Options{MaxEntries: 10, MaxCost: 100})
	for i := range 6 {
		c.Put(i, i%2, 10, 0)
	}
	if n := c.RemoveIf(func(_, v int) bool { return v == 1 }); n != 3 {
		t.Fatalf("RemoveIf removed %d, want 3", n)
	}
	if got := keys(c); !slices.Equal(got, []int{4, 2, 0}) {
		t.Fatalf("keys %v, want [4 2 0]", got)
	}
	c.Purge()
	if c.Len() != 0 || len(keys(c)) != 0 {
		t.Fatalf("Purge left %d entries", c.Len())
	}
	for i := range 10 { // the purged cost is gone: ten fit again
		c.Put(i, 0, 10, 0)
	}
	if c.Len() != 10 {
		t.Fatalf("Len %d after Purge and ten puts, want 10", c.Len())
	}
}

// TestConcurrentUse runs every operation from several goroutines; run it
// with -race. The bounds hold throughout.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := New[int, int](Options{MaxEntries: 64, MaxCost: 500})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := (g*7 + i) % 200
				switch i % 7 {
				case 0, 1:
					c.Put(k, i, int64(i%20), time.Duration(i%3)*time.Millisecond)
				case 2:
					c.Get(k)
				case 3:
					c.Peek(k)
				case 4:
					c.GetOrAdd(k, func() int { return i })
				case 5:
					c.AddCost(k, 1)
				case 6:
					if i%100 == 6 {
						c.RemoveExpired()
						c.RemoveIf(func(k, _ int) bool { return k%50 == 0 })
					} else {
						c.Remove(k)
					}
				}
				if n := c.Len(); n > 64 {
					t.Errorf("Len %d above the bound", n)
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var cost int64
	n := 0
	for e := c.root.next; e != &c.root; e = e.next {
		cost += e.cost
		n++
	}
	if n != len(c.items) || cost != c.cost {
		t.Fatalf("ring of %d entries costing %d, map of %d, accounted cost %d", n, cost, len(c.items), c.cost)
	}
	if c.cost > 500 && n > 1 {
		t.Fatalf("cost %d above the bound with %d entries", c.cost, n)
	}
}
