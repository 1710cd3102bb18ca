package builtin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// slotCall is an acquire running in its own goroutine.
type slotCall struct {
	release func()
	err     error
	done    chan struct{}
}

func startAcquire(ctx context.Context, f *fairSlots, tenant string) *slotCall {
	c := &slotCall{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.release, c.err = f.acquire(ctx, tenant)
	}()
	return c
}

// wait waits for the call to get its slot.
func (c *slotCall) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
		if c.err != nil {
			t.Fatal(c.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call still waits for a slot after 10 s")
	}
}

// waitStats waits until f holds and queues the given numbers.
func waitStats(t *testing.T, f *fairSlots, held, waiting int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d held and %d waiting", held, waiting), func() bool {
		h, w, _ := f.stats()
		return h == held && w == waiting
	})
}

// TestFairSlotsOrder: a freed slot goes to the waiting tenant holding the
// fewest, then to the one served least recently (so not straight back to
// the tenant that freed it), then in arrival order; a tenant never holds
// more than its cap, even with slots free.
func TestFairSlotsOrder(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	f := newFairSlots(2, 1)
	a1 := startAcquire(ctx, f, "a") // served first
	a1.wait(t)
	b1 := startAcquire(ctx, f, "b")
	b1.wait(t)
	a2 := startAcquire(ctx, f, "a")
	waitStats(t, f, 2, 1)
	b2 := startAcquire(ctx, f, "b")
	waitStats(t, f, 2, 2)
	c1 := startAcquire(ctx, f, "c")
	waitStats(t, f, 2, 3)

	a1.release() // c (never served) comes before a's and b's second calls
	c1.wait(t)
	waitStats(t, f, 2, 2)
	b1.release() // a (served first, holding none) comes before b (served later)
	a2.wait(t)
	waitStats(t, f, 2, 1)
	c1.release()
	b2.wait(t)
	a2.release()
	b2.release()
	if h, w, n := f.stats(); h != 0 || w != 0 || n != 0 {
		t.Fatalf("after all calls: %d held, %d waiting, %d tenants remembered", h, w, n)
	}

	// The cap: one tenant alone gets 2 of 3 slots; its third call waits
	// with a slot free, until one of its own ends.
	f = newFairSlots(3, 2)
	x1, x2 := startAcquire(ctx, f, "x"), startAcquire(ctx, f, "x")
	x1.wait(t)
	x2.wait(t)
	x3 := startAcquire(ctx, f, "x")
	waitStats(t, f, 2, 1)
	y := startAcquire(ctx, f, "y") // the free slot is y's at once
	y.wait(t)
	waitStats(t, f, 3, 1)
	x1.release()
	x3.wait(t)
}

// TestFairSlotsContext: a waiter whose context ends leaves the queue and
// gets ctx's error; a tenant's entry goes when it holds and waits nothing.
func TestFairSlotsContext(t *testing.T) {
	t.Parallel()

	f := newFairSlots(1, 1)
	release, err := f.acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.acquire(ctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	if h, w, n := f.stats(); h != 1 || w != 0 || n != 1 {
		t.Fatalf("after the timed-out waiter: %d held, %d waiting, %d tenants", h, w, n)
	}
	release()
	if h, w, n := f.stats(); h != 0 || w != 0 || n != 0 {
		t.Fatalf("after release: %d held, %d waiting, %d tenants", h, w, n)
	}
}

// TestFairSlotsStress: many tenants acquiring and giving up at random
// never exceed the slots or a tenant's cap, and leave nothing behind.
func TestFairSlotsStress(t *testing.T) {
	t.Parallel()

	const slots, perTenant = 3, 2
	f := newFairSlots(slots, perTenant)
	var total atomic.Int32
	var mu sync.Mutex
	per := map[string]int{}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			tenant := fmt.Sprintf("t%d", g%5)
			for range 200 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(300))*time.Microsecond)
				release, err := f.acquire(ctx, tenant)
				cancel()
				if err != nil {
					continue
				}
				if n := total.Add(1); n > slots {
					t.Errorf("%d slots held", n)
				}
				mu.Lock()
				per[tenant]++
				if per[tenant] > perTenant {
					t.Errorf("%s holds %d slots", tenant, per[tenant])
				}
				mu.Unlock()
				for range r.IntN(50) { // hold the slot a while
					runtime.Gosched()
				}
				mu.Lock()
				per[tenant]--
				mu.Unlock()
				total.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if h, w, n := f.stats(); h != 0 || w != 0 || n != 0 {
		t.Fatalf("after the stress: %d held, %d waiting, %d tenants", h, w, n)
	}
}
