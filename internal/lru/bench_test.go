package lru

import (
	"testing"
)

// The shapes of the services' caches: a hit on a warm cache (token counts,
// summaries), a miss that evicts (a cache full of one-off keys), and both
// from every CPU (one cache shared by all the calls of a service).

const benchEntries = 4096

func BenchmarkGetPut(b *testing.B) {
	b.Run("op=hit", func(b *testing.B) {
		c := New[uint64, int64](Options{MaxEntries: benchEntries})
		for i := range uint64(benchEntries) {
			c.Put(i, int64(i), 0, 0)
		}
		i := uint64(0)
		for b.Loop() {
			if _, ok := c.Get(i % benchEntries); !ok {
				b.Fatal("miss")
			}
			i += 7
		}
	})
	b.Run("op=put-evict", func(b *testing.B) {
		c := New[uint64, int64](Options{MaxEntries: benchEntries})
		i := uint64(0)
		for b.Loop() {
			c.Put(i, int64(i), 0, 0)
			i++
		}
	})
	b.Run("op=mixed-parallel", func(b *testing.B) {
		c := New[uint64, int64](Options{MaxEntries: benchEntries})
		for i := range uint64(benchEntries) {
			c.Put(i, int64(i), 0, 0)
		}
		b.RunParallel(func(pb *testing.PB) {
			i := uint64(0)
			for pb.Next() {
				if i%10 == 0 {
					c.Put(i%(2*benchEntries), int64(i), 0, 0)
				} else {
					c.Get(i % (2 * benchEntries))
				}
				i += 3
			}
		})
	})
}
