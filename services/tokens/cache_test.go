package tokens

import (
	"fmt"
	"testing"
)

func errFmt(format string, args ...any) error { return fmt.Errorf(format, args...) }

func TestCountCacheLRU(t *testing.T) {
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
