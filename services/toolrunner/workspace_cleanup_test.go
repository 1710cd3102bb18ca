package toolrunner

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWorkspacesRemovedWhenIdle is the regression test of the load test's
// finding that every conversation's workspace stayed on disk forever:
// workspaces unused for the idle limit go, unless a call holds one, is
// opening one, or used one since; interrupted creations go too; a later
// call of a removed conversation gets a fresh, seeded workspace.
func TestWorkspacesRemovedWhenIdle(t *testing.T) {
	t.Parallel()

	dir, seed := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(seed, "data.csv"), []byte("x\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := openWorkspaces(workspaceOptions{Dir: dir, Seed: seed, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	use := func(conv string) func() {
		t.Helper()
		r, release, err := acquireRoot(w, "acme", conv)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WriteFile("note.txt", []byte(conv), 0o600); err != nil {
			t.Fatal(err)
		}
		return release
	}
	age := func(conv string) { // the directory was last used long ago, as after a restart
		t.Helper()
		old := now.Add(-30 * 24 * time.Hour)
		if err := os.Chtimes(filepath.Join(dir, "acme", conv), old, old); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(conv string) bool {
		_, err := os.Stat(filepath.Join(dir, "acme", conv))
		return err == nil
	}
	const maxIdle = 7 * 24 * time.Hour

	use("idle")()
	use("recent")()
	holdRelease := use("held")
	now = now.Add(8 * 24 * time.Hour)
	use("recent")() // used again since
	for _, c := range []string{"idle", "recent", "held"} {
		age(c)
	}
	leftover := filepath.Join(dir, "acme", ".new-0123456789abcdef")
	if err := os.Mkdir(leftover, 0o750); err != nil {
		t.Fatal(err)
	}
	old := now.Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.opening["acme/opening"]++ // a call is creating this one right now
	w.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(dir, "acme", "opening"), 0o750); err != nil {
		t.Fatal(err)
	}
	age("opening")

	removed, freed := w.removeIdle(maxIdle)
	if removed != 2 || freed == 0 {
		t.Fatalf("removed %d workspaces (%d bytes), want the idle one and the leftover", removed, freed)
	}
	if exists("idle") || exists(".new-0123456789abcdef") {
		t.Fatal("the idle workspace or the leftover is still there")
	}
	for _, c := range []string{"recent", "held", "opening"} {
		if !exists(c) {
			t.Fatalf("workspace %q was removed while in use", c)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("tenant directory holds %d entries, want the 3 kept (no .gone- left over)", len(entries))
	}

	// The removed conversation comes back: a fresh, seeded workspace.
	r, release, err := acquireRoot(w, "acme", "idle")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stat("note.txt"); !os.IsNotExist(err) {
		t.Fatal("the fresh workspace has the old note")
	}
	if _, err := r.Stat("data.csv"); err != nil {
		t.Fatalf("the fresh workspace is not seeded: %v", err)
	}
	release()

	// Once released and idle too, the held one goes.
	holdRelease()
	now = now.Add(8 * 24 * time.Hour)
	age("held")
	if removed, _ := w.removeIdle(maxIdle); removed == 0 || exists("held") {
		t.Fatalf("released idle workspace kept (removed %d)", removed)
	}
}
