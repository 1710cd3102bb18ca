package tokens

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func errFmt(format string, args ...any) error { return fmt.Errorf(format, args...) }

func TestCountCacheLRU(t *testing.T) {
	t.Parallel()

	m, _ := newMetrics(nil)
	c := newCountCache(2, m)
	k := func(b byte) cacheKey { return cacheKey{uint64(b)} }
	c.put(k(1), 10)
	c.put(k(2), 20)
	if n, ok := c.get(k(1)); !ok || n != 10 { // 1 is now the most recent
		t.Fatalf("get(1) = %d, %v", n, ok)
	}
	c.put(k(3), 30) // evicts 2, the least recently used
	if _, ok := c.get(k(2)); ok {
		t.Error("2 was not evicted")
	}
	if n, ok := c.get(k(3)); !ok || n != 30 {
		t.Errorf("get(3) = %d, %v", n, ok)
	}
	c.put(k(3), 31) // update in place
	if n, _ := c.get(k(3)); n != 31 || c.len() != 2 {
		t.Errorf("after update: %d, len %d", n, c.len())
	}
}

func TestApplyMargin(t *testing.T) {
	t.Parallel()

	for _, c := range []struct {
		raw    int64
		margin float64
		want   int64
	}{
		{0, 1.25, 0},
		{100, 1.0, 100},
		{10, 1.15, 12},   // 11.5
		{100, 1.15, 115}, // exactly 115, although 100 * 1.15 is 114.99999999999999 in float64
		{70, 1.3, 91},    // 70 * 1.3 is 91.00000000000001 in float64
		{3, 1.2, 4},      // 3.6
		{1, 1.25, 2},
	} {
		if got := applyMargin(c.raw, c.margin); got != c.want {
			t.Errorf("applyMargin(%d, %v) = %d, want %d", c.raw, c.margin, got, c.want)
		}
	}
}

// TestCountCacheBoundedThroughServer: the cache never holds more than
// CacheEntries counts, evicted messages are encoded again, and the hit and
// miss metrics follow.
func TestCountCacheBoundedThroughServer(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	s := newTestServer(t, Options{CacheEntries: 4, Registerer: reg})
	msgs := make([]*baagentv1.ChatMessage, 10)
	for i := range msgs {
		msgs[i] = user(fmt.Sprintf("message number %d", i))
	}
	req := &baagentv1.CountMessagesRequest{Model: "gpt-4o", Messages: msgs}
	first, err := s.CountMessages(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetCacheMisses() != 10 || s.cache.len() != 4 {
		t.Fatalf("first: %d misses, cache holds %d; want 10 and 4", first.GetCacheMisses(), s.cache.len())
	}
	// The last four are cached; the first six were evicted and count again,
	// to the same numbers.
	again, err := s.CountMessages(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetRawCount() != first.GetRawCount() || s.cache.len() != 4 {
		t.Fatalf("again: raw %d (first %d), cache %d", again.GetRawCount(), first.GetRawCount(), s.cache.len())
	}
	// Counting in order with an LRU of 4 evicts each entry before its reuse.
	if again.GetCacheHits() != 0 || again.GetCacheMisses() != 10 {
		t.Errorf("again: %d hits %d misses, want 0 and 10", again.GetCacheHits(), again.GetCacheMisses())
	}
	last4 := &baagentv1.CountMessagesRequest{Model: "gpt-4o", Messages: msgs[6:]}
	if r, err := s.CountMessages(t.Context(), last4); err != nil || r.GetCacheHits() != 4 || r.GetCacheMisses() != 0 {
		t.Fatalf("last four: %v, %v; want 4 hits", r, err)
	}
	// Another encoding is another key: no hit across encodings.
	other := &baagentv1.CountMessagesRequest{Model: "gpt-4", Messages: msgs[6:]}
	if r, err := s.CountMessages(t.Context(), other); err != nil || r.GetCacheHits() != 0 {
		t.Fatalf("cl100k_base: %v, %v; want no hits", r, err)
	}
	if hits, misses := counterValue(t, reg, "baagent_tokens_cache_hits_total"), counterValue(t, reg, "baagent_tokens_cache_misses_total"); hits != 4 || misses != 24 {
		t.Errorf("metrics: %v hits, %v misses; want 4 and 24", hits, misses)
	}
}

// Gets and puts of one key at once (two identical counts in flight): the
// race detector sees no unsynchronised access to the entry.
func TestCountCacheConcurrentGetPut(t *testing.T) {
	t.Parallel()

	m, _ := newMetrics(nil)
	c := newCountCache(4, m)
	k := cacheKey{7}
	c.put(k, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			c.put(k, int64(i))
		}
	}()
	for range 1000 {
		if _, ok := c.get(k); !ok {
			t.Fatal("the key vanished")
		}
	}
	<-done
	if n, ok := c.get(k); !ok || n != 999 {
		t.Fatalf("get = %d, %v; want 999", n, ok)
	}
}
