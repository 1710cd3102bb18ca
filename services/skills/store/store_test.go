package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

func openStore(t testing.TB, js jetstream.JetStream, cfg Config) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, js, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	testkit.Run(t, context.Background(), s.Run)
	return s
}

func newJS(t testing.TB) jetstream.JetStream {
	t.Helper()
	srv := natstest.StartNATS(t)
	js, _ := natstest.Connect(t, srv.ClientURL(), t.Name())
	return js
}

func skillFiles(name, body string, extra ...File) []File {
	md := fmt.Sprintf("---\nname: %s\ndescription: Skill %s.\n---\n%s\n", name, name, body)
	files := append([]File{{Path: SkillFile, Data: []byte(md)}}, extra...)
	return files
}

func find(v *View, k Key) *Manifest {
	for _, m := range v.Skills {
		if m.Key() == k {
			return m
		}
	}
	return nil
}

func TestPutGetReadDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newJS(t), Config{})
	k := Key{Tenant: "acme", Name: "demo"}
	files := skillFiles("demo", "v1", File{Path: "references/a.md", Data: []byte("alpha")})
	m, replaced, err := s.Put(ctx, k, files, PutOptions{IfNoneMatch: true})
	if err != nil || replaced {
		t.Fatalf("Put = %v, replaced %v", err, replaced)
	}
	if m.Revision != RevisionOf(files) || len(m.Files) != 1 || m.Files[0].Path != "references/a.md" {
		t.Fatalf("manifest = %+v", m)
	}
	testkit.Eventually(t, 10*time.Second, "the put in the view", func() bool { return find(s.View(), k) != nil })
	got, rev, err := s.ReadFiles(ctx, k, "")
	if err != nil || rev != m.Revision || paths(got) != "SKILL.md,references/a.md" || string(got[1].Data) != "alpha" {
		t.Fatalf("ReadFiles = %v %s %v", paths(got), rev, err)
	}
	// Preconditions.
	if _, _, err := s.Put(ctx, k, files, PutOptions{IfNoneMatch: true}); !errors.Is(err, ErrConflict) {
		t.Errorf("If-None-Match on an existing skill: err = %v, want ErrConflict", err)
	}
	if _, _, err := s.Put(ctx, k, files, PutOptions{IfMatch: "nope"}); !errors.Is(err, ErrConflict) {
		t.Errorf("If-Match mismatch: err = %v, want ErrConflict", err)
	}
	if _, err := s.Delete(ctx, k, "nope"); !errors.Is(err, ErrConflict) {
		t.Errorf("Delete If-Match mismatch: err = %v, want ErrConflict", err)
	}
	if _, _, err := s.Put(ctx, Key{Tenant: "acme", Name: "other"}, files, PutOptions{IfMatch: "x"}); !errors.Is(err, ErrConflict) {
		t.Errorf("If-Match on a missing skill: err = %v, want ErrConflict", err)
	}
	rev, err = s.Delete(ctx, k, m.Revision)
	if err != nil || rev != m.Revision {
		t.Fatalf("Delete = %s, %v", rev, err)
	}
	testkit.Eventually(t, 10*time.Second, "the delete in the view", func() bool { return find(s.View(), k) == nil })
	if _, err := s.Delete(ctx, k, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ReadFiles(ctx, k, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadFiles after delete: err = %v, want ErrNotFound", err)
	}
}

func TestRevisionsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newJS(t), Config{KeepRevisions: 2})
	k := Key{Tenant: "acme", Project: "q3:report.v2", Name: "demo"}
	var revs []string
	for i := range 3 {
		m, _, err := s.Put(ctx, k, skillFiles("demo", fmt.Sprint("v", i), File{Path: "r.txt", Data: fmt.Appendf(nil, "r%d", i)}), PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, m.Revision)
		testkit.Eventually(t, 10*time.Second, "revision in the view", func() bool {
			v := find(s.View(), k)
			return v != nil && v.Revision == m.Revision
		})
	}
	// The previous revision stays readable after a replace…
	files, _, err := s.ReadFiles(ctx, k, revs[1])
	if err != nil || string(files[1].Data) != "r1" {
		t.Fatalf("ReadFiles(previous) = %v, %v", paths(files), err)
	}
	// …the one before it is no longer kept (KeepRevisions 2).
	if _, _, err := s.ReadFiles(ctx, k, revs[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadFiles(dropped) err = %v, want ErrNotFound", err)
	}
	// Same content again is the same revision and keeps the history.
	m, replaced, err := s.Put(ctx, k, skillFiles("demo", "v2", File{Path: "r.txt", Data: []byte("r2")}), PutOptions{IfMatch: revs[2]})
	if err != nil || !replaced || m.Revision != revs[2] || len(m.Kept) != 1 || m.Kept[0].Revision != revs[1] {
		t.Fatalf("idempotent Put = %+v, %v, %v", m, replaced, err)
	}
}

func TestTenantIsolationAndLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newJS(t), Config{MaxSkillsPerTenant: 2, MaxBytesPerTenant: 4096})
	for _, n := range []string{"a", "b"} {
		if _, _, err := s.Put(ctx, Key{Tenant: "acme", Name: n}, skillFiles(n, "x"), PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "both skills in the view", func() bool { return len(s.View().Skills) == 2 })
	if _, _, err := s.Put(ctx, Key{Tenant: "acme", Project: "p", Name: "c"}, skillFiles("c", "x"), PutOptions{}); !errors.Is(err, ErrLimit) {
		t.Errorf("third skill: err = %v, want ErrLimit", err)
	}
	// Replacing within the count is allowed; another tenant is not counted.
	if _, _, err := s.Put(ctx, Key{Tenant: "acme", Name: "a"}, skillFiles("a", "y"), PutOptions{}); err != nil {
		t.Errorf("replace: %v", err)
	}
	if _, _, err := s.Put(ctx, Key{Tenant: "other", Name: "a"}, skillFiles("a", "x"), PutOptions{}); err != nil {
		t.Errorf("other tenant: %v", err)
	}
	if _, _, err := s.Put(ctx, Key{Tenant: "other", Name: "b"}, skillFiles("b", "x", File{Path: "big", Data: make([]byte, 5000)}), PutOptions{}); !errors.Is(err, ErrLimit) {
		t.Errorf("over the byte limit: err = %v, want ErrLimit", err)
	}
	// Settings for more projects than the skill limit are refused.
	for i := range 2 {
		if err := s.SetDisabled(ctx, Scope{Tenant: "acme", Project: fmt.Sprint("p", i)}, "x", true); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "both settings in the view", func() bool { return s.scopesOf("acme") == 2 })
	if err := s.SetDisabled(ctx, Scope{Tenant: "acme", Project: "p2"}, "x", true); !errors.Is(err, ErrLimit) {
		t.Errorf("settings for a third project: err = %v, want ErrLimit", err)
	}
	if err := s.SetDisabled(ctx, Scope{Tenant: "acme", Project: "p0"}, "y", true); err != nil {
		t.Errorf("more in an existing scope: %v", err)
	}
	// Enabling everything in a scope frees it.
	if err := s.SetDisabled(ctx, Scope{Tenant: "acme", Project: "p1"}, "x", false); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "p1's settings gone", func() bool { return s.scopesOf("acme") == 1 })
	if err := s.SetDisabled(ctx, Scope{Tenant: "acme", Project: "p2"}, "x", true); err != nil {
		t.Errorf("settings for a project after one was freed: %v", err)
	}
	// A tenant's read cannot reach another tenant's skill.
	testkit.Eventually(t, 10*time.Second, "other/a in the view", func() bool { return find(s.View(), Key{Tenant: "other", Name: "a"}) != nil })
	if _, _, err := s.ReadFiles(ctx, Key{Tenant: "nobody", Name: "a"}, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's skill: err = %v, want ErrNotFound", err)
	}
}

func TestSettingsAndTwoReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := newJS(t)
	a := openStore(t, js, Config{})
	b := openStore(t, js, Config{})
	k := Key{Tenant: "acme", Name: "demo"}
	m, _, err := a.Put(ctx, k, skillFiles("demo", "v1"), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "replica b sees the upload", func() bool {
		v := find(b.View(), k)
		return v != nil && v.Revision == m.Revision
	})
	select {
	case <-b.Changed():
	default:
		t.Error("Changed has no notification")
	}
	if err := a.SetDisabled(ctx, Scope{Tenant: "acme"}, "sys-skill", true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetDisabled(ctx, Scope{Tenant: "acme", Project: "p.1"}, "other", true); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "replica b sees the settings", func() bool {
		d := b.View().Disabled
		return d[Scope{Tenant: "acme"}]["sys-skill"] && d[Scope{Tenant: "acme", Project: "p.1"}]["other"]
	})
	if err := b.SetDisabled(ctx, Scope{Tenant: "acme"}, "sys-skill", false); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "replica a sees the enable", func() bool {
		return !a.View().Disabled[Scope{Tenant: "acme"}]["sys-skill"]
	})
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	k := Key{Tenant: "acme", Name: "demo"}
	var rev string
	{
		srv := natstest.StartNATSIn(t, dir)
		js, nc := natstest.Connect(t, srv.ClientURL(), "first")
		s, err := Open(ctx, js, Config{})
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := s.Put(ctx, k, skillFiles("demo", "v1", File{Path: "a", Data: []byte("a")}), PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev = m.Revision
		if err := s.SetDisabled(ctx, Scope{Tenant: "acme"}, "x", true); err != nil {
			t.Fatal(err)
		}
		s.Close()
		nc.Close()
		srv.Shutdown()
	}
	srv := natstest.StartNATSIn(t, dir)
	js, _ := natstest.Connect(t, srv.ClientURL(), "second")
	s := openStore(t, js, Config{Registerer: prometheus.NewRegistry()})
	v := find(s.View(), k) // Open loads the state before returning
	if v == nil || v.Revision != rev || !s.View().Disabled[Scope{Tenant: "acme"}]["x"] {
		t.Fatalf("after restart: manifest %+v, disabled %v", v, s.View().Disabled)
	}
	files, _, err := s.ReadFiles(ctx, k, rev)
	if err != nil || paths(files) != "SKILL.md,a" {
		t.Fatalf("ReadFiles after restart = %v, %v", paths(files), err)
	}
}

func TestSweepOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := newJS(t)
	s := openStore(t, js, Config{KeepRevisions: 1, SweepGrace: time.Nanosecond, SweepInterval: time.Hour})
	k := Key{Tenant: "acme", Name: "demo"}
	m1, _, err := s.Put(ctx, k, skillFiles("demo", "v1"), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m2, _, err := s.Put(ctx, k, skillFiles("demo", "v2"), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An orphan of a failed put: a bundle without a manifest.
	obs, err := js.ObjectStore(ctx, BucketFiles)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, bundleName(Key{Tenant: "acme", Name: "ghost"}, "r"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	n, err := s.Sweep(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 (the replaced revision and the orphan)", n, err)
	}
	if _, err := obs.GetInfo(ctx, bundleName(k, m1.Revision)); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("replaced revision still stored: %v", err)
	}
	if _, err := obs.GetInfo(ctx, bundleName(k, m2.Revision)); err != nil {
		t.Errorf("current revision swept: %v", err)
	}
	// The grace period protects fresh bundles.
	s2 := openStore(t, js, Config{SweepGrace: time.Hour, SweepInterval: time.Hour, Registerer: prometheus.NewRegistry()})
	if _, err := obs.PutBytes(ctx, "acme._.fresh/r", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := s2.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("Sweep within the grace period = %d, %v; want 0", n, err)
	}
}

func TestConcurrentPutsOneWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newJS(t), Config{})
	k := Key{Tenant: "acme", Name: "demo"}
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, _, err := s.Put(ctx, k, skillFiles("demo", fmt.Sprint("v", i)), PutOptions{IfNoneMatch: true})
			errs <- err
		}()
	}
	ok := 0
	for range 8 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrConflict):
			t.Errorf("err = %v, want nil or ErrConflict", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d creates succeeded, want exactly 1", ok)
	}
}

func TestScopeKeyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, sc := range []Scope{{Tenant: "t"}, {Tenant: "t", Project: "p"}, {Tenant: "a-b_c", Project: "q3:x.y-z"}} {
		got, ok := parseScopeKey(scopeKey(sc.Tenant, sc.Project))
		if !ok || got != sc {
			t.Errorf("round trip %+v = %+v %v", sc, got, ok)
		}
		if k := (Key{Tenant: sc.Tenant, Project: sc.Project, Name: "n"}).kvKey(); strings.ContainsAny(k, ":/ ") {
			t.Errorf("key %q has characters a KV key cannot hold", k)
		}
	}
}

// TestManifestStaysUnderTheMessageLimit: long file lists in several kept
// revisions drop the oldest revisions instead of failing the upload.
func TestManifestStaysUnderTheMessageLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newJS(t), Config{})
	k := Key{Tenant: "acme", Name: "demo"}
	long := strings.Repeat("d", 100) + "/" + strings.Repeat("e", 100) + "/" + strings.Repeat("f", 100) + "/"
	var m *Manifest
	for r := range DefaultKeepRevisions + 1 {
		files := skillFiles("demo", fmt.Sprint("v", r))
		for i := range MaxFiles - 1 {
			files = append(files, File{Path: fmt.Sprintf("%s%0190d", long, i), Data: []byte{byte(r)}})
		}
		var err error
		if m, _, err = s.Put(ctx, k, files, PutOptions{}); err != nil {
			t.Fatalf("revision %d: %v", r, err)
		}
	}
	if len(m.Kept) == 0 || len(m.Kept) >= DefaultKeepRevisions-1 {
		t.Errorf("kept %d earlier revisions, want fewer than %d but at least 1", len(m.Kept), DefaultKeepRevisions-1)
	}
}
