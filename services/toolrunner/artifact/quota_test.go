package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/services/toolrunner/quota"
)

func openQuota(t *testing.T, dir string, clk *fakeClock, maxBytes, tenantMax int64) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Now: clk.Now, MaxBytes: maxBytes, TenantMaxBytes: tenantMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// put stores size bytes for owner (distinct data per n) a second after the
// previous put, so that LRU order is put order.
func put(t *testing.T, s *Store, clk *fakeClock, owner Owner, n, size int) Meta {
	t.Helper()
	clk.Add(time.Second)
	data := []byte(fmt.Sprintf("%s %d ", owner.Tenant, n) + strings.Repeat("x", size))[:size]
	m, err := s.Put(owner, "", "", "", data)
	if err != nil {
		t.Fatalf("put %s %d: %v", owner.Tenant, n, err)
	}
	return m
}

func exists(s *Store, m Meta) bool {
	_, err := s.Stat(m.Owner, m.ID)
	return err == nil
}

// TestTenantQuotaEvictsOwnArtifactsOnly: a tenant's artifacts beyond its
// quota evict that tenant's least recently used ones, never another
// tenant's, however old; one larger than the quota is refused.
func TestTenantQuotaEvictsOwnArtifactsOnly(t *testing.T) {
	t.Parallel()

	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := openQuota(t, t.TempDir(), clk, 1<<20, 1000)
	acme, globex := Owner{"acme", "c1"}, Owner{"globex", "c1"}
	var theirs []Meta
	for i := range 4 {
		theirs = append(theirs, put(t, s, clk, globex, i, 200)) // older than all of acme's
	}
	var mine []Meta
	for i := range 5 {
		mine = append(mine, put(t, s, clk, acme, i, 200))
	}
	s.Stat(acme, mine[0].ID) // used again: now the most recent
	for i := 5; i < 8; i++ {
		mine = append(mine, put(t, s, clk, acme, i, 200))
	}
	// 8 × 200 bytes for a quota of 1000: the 3 least recently used go.
	for i, m := range mine {
		if want := !(i >= 1 && i <= 3); exists(s, m) != want {
			t.Errorf("acme artifact %d exists: %v, want %v", i, !want, want)
		}
	}
	for i, m := range theirs {
		if !exists(s, m) {
			t.Errorf("globex artifact %d evicted by acme's quota", i)
		}
	}
	if n, b := s.TenantStats("acme"); n != 5 || b != 1000 {
		t.Errorf("acme holds %d artifacts, %d bytes; want 5, 1000", n, b)
	}
	if n, b := s.TenantStats("globex"); n != 4 || b != 800 {
		t.Errorf("globex holds %d artifacts, %d bytes; want 4, 800", n, b)
	}

	_, err := s.Put(acme, "", "", "", make([]byte, 1001))
	var qe *quota.Error
	if !errors.As(err, &qe) || qe.Kind != quota.Artifact || qe.Tenant != "acme" || qe.Limit != 1000 || qe.Want != 1001 {
		t.Fatalf("an artifact larger than the quota: %v", err)
	}
	if te := qe.ToolError(); te.Code != quota.Code {
		t.Fatalf("tool error %+v", te)
	}
	if n, _ := s.TenantStats("acme"); n != 5 {
		t.Fatalf("a refused artifact evicted %d of the tenant's artifacts", 5-n)
	}
	if got := dataBytes(t, s.opts.Dir, "acme"); got != 1000 {
		t.Fatalf("acme's files hold %d bytes", got)
	}
}

// TestSizeCleanupTakesFromTheBiggestTenant: over the store's global cap,
// artifacts go from the tenant holding the most bytes first, even when
// other tenants' artifacts are less recently used.
func TestSizeCleanupTakesFromTheBiggestTenant(t *testing.T) {
	t.Parallel()

	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := openQuota(t, t.TempDir(), clk, 2000, -1)
	var small []Meta
	for i := range 3 {
		small = append(small, put(t, s, clk, Owner{"globex", "c1"}, i, 100))
		small = append(small, put(t, s, clk, Owner{"initech", "c1"}, i, 100))
	}
	var big []Meta
	for i := range 15 {
		big = append(big, put(t, s, clk, Owner{"acme", "c1"}, i, 100))
	}
	// 600 + 1500 bytes > 2000: cleaned down to 1600, all of it from acme.
	for i, m := range small {
		if !exists(s, m) {
			t.Errorf("small tenant's artifact %d evicted while acme holds the most", i)
		}
	}
	if n, b := s.TenantStats("acme"); n != 10 || b != 1000 {
		t.Errorf("acme holds %d artifacts, %d bytes; want 10, 1000", n, b)
	}
	for i, m := range big {
		if want := i >= 5; exists(s, m) != want {
			t.Errorf("acme artifact %d exists: %v, want %v (least recently used first)", i, !want, want)
		}
	}
	// Once acme is down to the others' level, they share the eviction.
	for i := range 10 {
		put(t, s, clk, Owner{"globex", "c2"}, 10+i, 100) // globex: 1300 bytes
	}
	_, g := s.TenantStats("globex")
	_, a := s.TenantStats("acme")
	if _, i := s.TenantStats("initech"); i != 300 || g+a+i > 2000 || g > 800 {
		t.Errorf("after globex grew: acme %d, globex %d, initech %d bytes", a, g, i)
	}
}

// TestTenantUsageSurvivesRestart: a store reopened on the same directory
// has the same per-tenant accounting and enforces the quota on what was
// stored before.
func TestTenantUsageSurvivesRestart(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s, err := Open(Options{Dir: dir, Now: clk.Now, TenantMaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	acme := Owner{"acme", "c1"}
	var mine []Meta
	for i := range 4 {
		mine = append(mine, put(t, s, clk, acme, i, 200))
	}
	put(t, s, clk, Owner{"globex", "c9"}, 0, 300)
	s.Close()

	s = openQuota(t, dir, clk, 0, 1000)
	if n, b := s.TenantStats("acme"); n != 4 || b != 800 {
		t.Fatalf("after a restart acme holds %d artifacts, %d bytes; want 4, 800", n, b)
	}
	if n, b := s.TenantStats("globex"); n != 1 || b != 300 {
		t.Fatalf("after a restart globex holds %d artifacts, %d bytes; want 1, 300", n, b)
	}
	put(t, s, clk, acme, 4, 200)
	put(t, s, clk, acme, 5, 200) // 1200 > 1000: the oldest, from before the restart, goes
	if exists(s, mine[0]) || !exists(s, mine[1]) {
		t.Fatal("the quota did not evict the least recently used artifact stored before the restart")
	}
	if n, b := s.TenantStats("acme"); n != 5 || b != 1000 {
		t.Fatalf("acme holds %d artifacts, %d bytes; want 5, 1000", n, b)
	}
}

// TestTenantQuotaConcurrentPuts: concurrent Puts of one tenant never take
// it past its quota, stored and in-flight bytes together, and leave the
// disk holding exactly what is accounted.
func TestTenantQuotaConcurrentPuts(t *testing.T) {
	t.Parallel()

	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	const limit, size = 10_000, 700
	s := openQuota(t, t.TempDir(), clk, 1<<20, limit)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				data := []byte(fmt.Sprintf("%d-%d ", g, i) + strings.Repeat("y", size))[:size]
				if _, err := s.Put(Owner{"acme", fmt.Sprintf("c%d", g)}, "", "", "", data); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	// What the tenant holds and has in flight never passes the quota.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for polling := true; polling; {
		select {
		case <-done:
			polling = false
		default:
		}
		s.mu.Lock()
		var used int64
		if t := s.tenants["acme"]; t != nil {
			used = t.bytes + t.reserved
		}
		s.mu.Unlock()
		if used > limit {
			t.Errorf("accounted %d bytes, the quota is %d", used, limit)
			<-done
			break
		}
	}
	n, b := s.TenantStats("acme")
	if b != int64(n*size) || b > limit || b < limit-size {
		t.Fatalf("acme holds %d artifacts, %d bytes; quota %d", n, b, limit)
	}
	if got := dataBytes(t, s.opts.Dir, "acme"); got != b {
		t.Fatalf("the disk holds %d bytes, accounted %d", got, b)
	}
}

// dataBytes is the size of tenant's artifact data files (and temporary
// files) on disk, sidecars aside.
func dataBytes(t *testing.T, dir, tenant string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(filepath.Join(dir, tenant), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, sidecarSuffix) {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// BenchmarkPut stores 4 KiB artifacts: under the tenant's quota, and at
// it (each Put evicts the tenant's least recently used of 256).
func BenchmarkPut(b *testing.B) {
	for _, bc := range []struct {
		name      string
		tenantMax int64
	}{{"under-quota", 0}, {"at-quota", 256 * 4096}} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), TenantMaxBytes: bc.tenantMax})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, 4096)
			owner := Owner{"acme", "c1"}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				copy(data, fmt.Sprintf("%d ", i))
				if _, err := s.Put(owner, "", "", "", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
