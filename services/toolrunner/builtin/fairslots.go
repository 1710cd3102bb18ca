package builtin

import (
	"context"
	"slices"
	"sync"
)

// fairSlots is a counting semaphore shared fairly among tenants: n slots,
// at most perTenant of them held by one tenant. When a slot frees and
// several tenants wait, it goes to the waiting tenant holding the fewest
// slots; among those, to the one served least recently (a tenant that was
// never served, or not since it last went idle, first), so a tenant whose
// slot just freed does not get it straight back while another tenant has
// been waiting; within a tenant, waiters are served in arrival order.
// Nothing can be taken back from a holder, so a tenant comes down to its
// share as its calls end.
//
// Memory is per call and per active tenant: a waiter lives for one
// acquire, and a tenant's entry is deleted when it holds and waits for
// nothing.
type fairSlots struct {
	mu        sync.Mutex
	free      int
	perTenant int
	served    uint64 // grants so far: the clock of lastServed
	tenants   map[string]*slotTenant
	waiting   map[*slotTenant]struct{} // tenants with waiters
}

type slotTenant struct {
	name       string
	held       int
	lastServed uint64 // served at its last grant; 0 = not since its entry was made
	queue      []*slotWaiter
}

type slotWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool
	arrival uint64
}

func newFairSlots(n, perTenant int) *fairSlots {
	n = max(n, 1)
	return &fairSlots{
		free: n, perTenant: min(max(perTenant, 1), n),
		tenants: map[string]*slotTenant{}, waiting: map[*slotTenant]struct{}{},
	}
}

// acquire waits for a slot for tenant until ctx ends, and returns the
// function that gives it back (call it once).
func (f *fairSlots) acquire(ctx context.Context, tenant string) (release func(), err error) {
	f.mu.Lock()
	t := f.tenants[tenant]
	if t == nil {
		t = &slotTenant{name: tenant}
		f.tenants[tenant] = t
	}
	// While a slot is free no waiter can take it (dispatch hands slots
	// out as soon as they free), so the fast path jumps no queue.
	if f.free > 0 && t.held < f.perTenant && len(t.queue) == 0 {
		f.grantLocked(t)
		f.mu.Unlock()
		return f.releaser(t), nil
	}
	f.served++ // arrivals share the grant clock: both only grow
	w := &slotWaiter{ready: make(chan struct{}), arrival: f.served}
	t.queue = append(t.queue, w)
	f.waiting[t] = struct{}{}
	f.mu.Unlock()

	select {
	case <-w.ready:
		return f.releaser(t), nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	if w.granted { // granted as ctx ended: pass the slot on
		f.releaseLocked(t)
		f.mu.Unlock()
		return nil, ctx.Err()
	}
	if i := slices.Index(t.queue, w); i >= 0 {
		t.queue = slices.Delete(t.queue, i, i+1)
	}
	if len(t.queue) == 0 {
		delete(f.waiting, t)
	}
	f.forgetLocked(t)
	f.mu.Unlock()
	return nil, ctx.Err()
}

func (f *fairSlots) releaser(t *slotTenant) func() {
	return func() {
		f.mu.Lock()
		f.releaseLocked(t)
		f.mu.Unlock()
	}
}

func (f *fairSlots) grantLocked(t *slotTenant) {
	f.free--
	t.held++
	f.served++
	t.lastServed = f.served
}

func (f *fairSlots) releaseLocked(t *slotTenant) {
	t.held--
	f.free++
	f.dispatchLocked()
	f.forgetLocked(t)
}

// forgetLocked deletes the entry of a tenant that holds and waits for
// nothing.
func (f *fairSlots) forgetLocked(t *slotTenant) {
	if t.held == 0 && len(t.queue) == 0 && f.tenants[t.name] == t {
		delete(f.tenants, t.name)
	}
}

// dispatchLocked hands free slots to waiters, fairest first.
func (f *fairSlots) dispatchLocked() {
	for f.free > 0 {
		var best *slotTenant
		for t := range f.waiting {
			if t.held >= f.perTenant {
				continue
			}
			if best == nil || t.held < best.held ||
				t.held == best.held && (t.lastServed < best.lastServed ||
					t.lastServed == best.lastServed && t.queue[0].arrival < best.queue[0].arrival) {
				best = t
			}
		}
		if best == nil {
			return
		}
		w := best.queue[0]
		best.queue[0] = nil
		best.queue = best.queue[1:]
		if len(best.queue) == 0 {
			best.queue = nil
			delete(f.waiting, best)
		}
		w.granted = true
		f.grantLocked(best)
		close(w.ready)
	}
}

// stats returns the slots held and the calls waiting, for tests.
func (f *fairSlots) stats() (held, waiting, tenants int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tenants {
		held += t.held
		waiting += len(t.queue)
	}
	return held, waiting, len(f.tenants)
}
