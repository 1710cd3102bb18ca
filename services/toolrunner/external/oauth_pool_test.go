package external

import (
	"sync"
	"testing"
	"time"
)

type poolClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *poolClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *poolClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func tenantsOf(ss []*tenantSession) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.tenant)
	}
	return out
}

func TestSessionPoolEvictsLeastRecentlyUsed(t *testing.T) {
	clk := &poolClock{now: time.Unix(1_780_000_000, 0)}
	p := newSessionPool(2, time.Minute, clk.Now)
	a, created, ev := p.get("a")
	if !created || len(ev) != 0 {
		t.Fatalf("first get: created=%v evicted=%v", created, tenantsOf(ev))
	}
	p.get("b")
	if again, created, _ := p.get("a"); created || again != a { // a is now the most recent
		t.Fatal("a second get of a tenant made a new session")
	}
	_, created, ev = p.get("c")
	if !created || len(ev) != 1 || ev[0].tenant != "b" {
		t.Fatalf("evicted %v, want [b] (least recently used)", tenantsOf(ev))
	}
	if p.len() != 2 {
		t.Fatalf("len = %d, want 2", p.len())
	}
	// An evicted session that is still connecting closes once connected.
	ev[0].close()
	if !ev[0].isClosed() || ev[0].setSession(nil) {
		t.Fatal("a closed session accepted its connection")
	}
	// A removed session's tenant gets a new one; removing a stale one is a no-op.
	if !p.remove(a) || p.remove(a) {
		t.Fatal("remove: want true once, then false")
	}
	if s, created, _ := p.get("a"); !created || s == a {
		t.Fatal("get after remove reused the removed session")
	}
}

func TestSessionPoolExpiresIdleAndDrains(t *testing.T) {
	clk := &poolClock{now: time.Unix(1_780_000_000, 0)}
	p := newSessionPool(10, 10*time.Minute, clk.Now)
	p.get("old")
	clk.advance(6 * time.Minute)
	p.get("new")
	clk.advance(5 * time.Minute) // old: 11 min idle, new: 5
	if got := tenantsOf(p.expire()); len(got) != 1 || got[0] != "old" {
		t.Fatalf("expired %v, want [old]", got)
	}
	if got := tenantsOf(p.drain()); len(got) != 1 || got[0] != "new" {
		t.Fatalf("drained %v, want [new]", got)
	}
	if s, _, _ := p.get("late"); s != nil || p.len() != 0 {
		t.Fatal("a drained pool took a new session")
	}
}
