package skills

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// runServer starts s.Run until the test ends.
func runServer(t *testing.T, s *Server) {
	t.Helper()
	testkit.Run(t, context.Background(), s.Run)
}

func listedNames(t *testing.T, s *Server, tenant string) []string {
	t.Helper()
	got, _ := list(t, s, tenant, "")
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g.name + "=" + g.description
	}
	return out
}

func TestReloadPicksUpChanges(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "one", "First.")
	s := newTestServer(t, root)
	runServer(t, s)
	has := func(tenant string, want ...string) func() bool {
		return func() bool { return slices.Equal(listedNames(t, s, tenant), want) }
	}

	addSkill(t, root, "", "two", "Second.")
	testkit.Eventually(t, 10*time.Second, "an added skill", has("t", "one=First.", "two=Second."))

	addSkill(t, root, "", "one", "First, edited with a longer description.")
	testkit.Eventually(t, 10*time.Second, "an edited skill", has("t", "one=First, edited with a longer description.", "two=Second."))

	if err := os.RemoveAll(filepath.Join(root, "two")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a removed skill", has("t", "one=First, edited with a longer description."))

	addSkill(t, root, "tenants/acme", "mine", "Acme's.")
	testkit.Eventually(t, 10*time.Second, "a new tenant skill", has("acme", "mine=Acme's.", "one=First, edited with a longer description."))

	writeFile(t, root, "tenants/acme/tenant.yaml", "disabled_skills: [one]\n")
	testkit.Eventually(t, 10*time.Second, "a tenant.yaml disabling a skill", has("acme", "mine=Acme's."))
	if got := listedNames(t, s, "t"); len(got) != 1 {
		t.Fatalf("another tenant lost a skill: %v", got)
	}

	// A resource added in a new subdirectory is listed.
	writeFile(t, root, "one/references/new/notes.md", "notes")
	testkit.Eventually(t, 10*time.Second, "a new resource", func() bool {
		r, err := s.GetSkill(context.Background(), &baagentv1.GetSkillRequest{Tenant: "t", Name: "one"})
		return err == nil && slices.Contains(r.GetMetadata().GetResources(), "references/new/notes.md")
	})

	// A skill edited into an invalid state is taken out and reported.
	writeFile(t, root, "one/SKILL.md", "---\nname: one\n---\n")
	testkit.Eventually(t, 10*time.Second, "an invalid edit", func() bool {
		got, inv := list(t, s, "t", "")
		return len(got) == 0 && len(inv) == 1 && strings.Contains(inv[0].GetReason(), "description: required")
	})
}

// TestReloadIsAtomic swaps whole releases of 50 skills under readers that
// check every response: all 50 skills, all of the same release. The root is
// a symbolic link replaced with a rename, as a deployment would do it.
func TestReloadIsAtomic(t *testing.T) {
	t.Parallel()

	base := t.TempDir()
	release := func(n int) string {
		dir := filepath.Join(base, fmt.Sprintf("release-%d", n))
		for i := range 50 {
			addSkill(t, dir, "", fmt.Sprintf("skill-%02d", i), "Skill.", fmt.Sprintf("version: %d.0.0", n))
		}
		return dir
	}
	link := filepath.Join(base, "current")
	swap := func(target string) {
		tmp := link + ".tmp"
		symlink(t, target, tmp)
		if err := os.Rename(tmp, link); err != nil {
			t.Fatal(err)
		}
	}
	swap(release(1))
	reg := prometheus.NewRegistry()
	s := newTestServer(t, link, func(o *Options) { o.Registerer = reg })

	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		reads   atomic.Int64
		failure atomic.Value
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := s.ListSkills(context.Background(), &baagentv1.ListSkillsRequest{Tenant: "t"})
				if err != nil {
					failure.Store(err.Error())
					return
				}
				sk := resp.GetSkills()
				if len(sk) != 50 {
					failure.Store(fmt.Sprintf("%d skills listed", len(sk)))
					return
				}
				for _, m := range sk {
					if m.GetVersion() != sk[0].GetVersion() {
						failure.Store(fmt.Sprintf("mixed releases: %s and %s", sk[0].GetVersion(), m.GetVersion()))
						return
					}
				}
				reads.Add(1)
			}
		}()
	}
	for n := 2; n <= 6; n++ {
		swap(release(n))
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d.0.0", n)
		testkit.Eventually(t, 10*time.Second, "release "+want, func() bool {
			r, err := s.GetSkill(context.Background(), &baagentv1.GetSkillRequest{Tenant: "t", Name: "skill-49"})
			return err == nil && r.GetMetadata().GetVersion() == want
		})
	}
	// Let the readers overlap the last swap before stopping them.
	testkit.Eventually(t, 10*time.Second, "concurrent reads", func() bool { return reads.Load() > 20 })
	stop.Store(true)
	wg.Wait()
	if f := failure.Load(); f != nil {
		t.Fatal(f)
	}
	if got := testutil.ToFloat64(s.metrics.reloads.WithLabelValues("ok")); got != 6 {
		t.Errorf("reloads{ok} = %v, want 6", got)
	}
}

func TestFailedReloadKeepsTheLastGoodSet(t *testing.T) {
	t.Parallel()

	base := t.TempDir()
	root := filepath.Join(base, "skills")
	addSkill(t, root, "", "kept", "Kept.")
	reg := prometheus.NewRegistry()
	s := newTestServer(t, root, func(o *Options) { o.Registerer = reg })
	if err := os.Rename(root, root+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("reload of a missing root succeeded")
	}
	if got := listedNames(t, s, "t"); !slices.Equal(got, []string{"kept=Kept."}) {
		t.Fatalf("after a failed reload: %v", got)
	}
	if got := testutil.ToFloat64(s.metrics.reloads.WithLabelValues("error")); got != 1 {
		t.Errorf("reloads{error} = %v", got)
	}
	// The root comes back as a different directory: it is reopened.
	addSkill(t, root, "", "fresh", "Fresh.")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := listedNames(t, s, "t"); !slices.Equal(got, []string{"fresh=Fresh."}) {
		t.Fatalf("after the root came back: %v", got)
	}
	if got := testutil.ToFloat64(s.metrics.loaded.WithLabelValues("system")); got != 1 {
		t.Errorf("loaded{system} = %v", got)
	}
}

// TestPollDetectsChangesTheClockCannotSee: a poll compares modification
// times and sizes; an edit that keeps both is still seen while the snapshot
// is recent enough for that to happen (racy), and nothing is reloaded when
// nothing changed.
func TestPollDetectsChangesTheClockCannotSee(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "clock", "Version A.")
	s := newTestServer(t, root)
	if !s.snap.Load().racy {
		t.Fatal("a snapshot of files written just now is not racy")
	}
	p := filepath.Join(root, "clock", "SKILL.md")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	addSkill(t, root, "", "clock", "Version B.") // same size
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	s.poll()
	if got := listedNames(t, s, "t"); !slices.Equal(got, []string{"clock=Version B."}) {
		t.Fatalf("racy edit not seen: %v", got)
	}

	// Age every file: the snapshot is no longer racy, and a poll with no
	// change does not reload.
	old := time.Now().Add(-time.Hour)
	ageTree(t, root, old)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	gen := s.snap.Load().gen
	if s.snap.Load().racy {
		t.Fatal("snapshot of old files is racy")
	}
	s.poll()
	if s.snap.Load().gen != gen {
		t.Fatal("poll reloaded with nothing changed")
	}
	addSkill(t, root, "", "clock", "Version C, longer.")
	ageTree(t, root, old)
	s.poll()
	if got := listedNames(t, s, "t"); !slices.Equal(got, []string{"clock=Version C, longer."}) {
		t.Fatalf("size change not seen: %v", got)
	}
}

func ageTree(t testing.TB, root string, when time.Time) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRunStopsWithItsContextAndRunsOnce(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "Run to start", s.running.Load)
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Run: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s.running.Load() {
		t.Fatal("still marked running")
	}
}

func TestNewFailsWithoutARoot(t *testing.T) {
	t.Parallel()

	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Options.Root is required") {
		t.Fatalf("no root: %v", err)
	}
	reg := prometheus.NewRegistry()
	_, err := New(Options{Root: filepath.Join(t.TempDir(), "missing"), Logger: quietLogger(), Registerer: reg})
	if err == nil || !strings.Contains(err.Error(), "skills root") {
		t.Fatalf("missing root: %v", err)
	}
	// The failed New left the registry free for the next one.
	if _, err := New(Options{Root: t.TempDir(), Logger: quietLogger(), Registerer: reg}); err != nil {
		t.Fatalf("New after a failed New on the same registry: %v", err)
	}
	if _, err := New(Options{Root: t.TempDir(), Logger: quietLogger(), Registerer: reg}); err == nil {
		t.Fatal("two servers registered on one registry")
	}
	f := filepath.Join(t.TempDir(), "file")
	writeFile(t, filepath.Dir(f), "file", "x")
	if _, err := New(Options{Root: f, Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("root is a file: %v", err)
	}
}
