package toolrunner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestWorkspaceHandles(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	w, err := openWorkspaces(workspaceOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	for i := range maxOpenWorkspaces + 50 {
		r, release, err := acquireRoot(w, "acme", fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WriteFile("f.txt", []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		release()
	}
	w.mu.Lock()
	n := len(w.open)
	w.mu.Unlock()
	if n > maxOpenWorkspaces {
		t.Fatalf("%d handles open, bound %d", n, maxOpenWorkspaces)
	}

	// Releasing a conversation while a call holds its workspace: the call
	// keeps a working handle, the directory goes, the next call starts anew.
	r, release, err := acquireRoot(w, "acme", "busy")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("a.txt", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := w.remove("acme", "busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "acme", "busy")); !os.IsNotExist(err) {
		t.Fatal("workspace not removed")
	}
	release()
	r2, release2, err := acquireRoot(w, "acme", "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, err := r2.Stat("a.txt"); !os.IsNotExist(err) {
		t.Fatal("the new workspace has the old file")
	}
}

// acquireRoot is w.acquire for tests that need only the directory.
func acquireRoot(w *workspaces, tenant, conversation string) (*os.Root, func(), error) {
	l, err := w.acquire(tenant, conversation)
	if err != nil {
		return nil, nil, err
	}
	return l.root, l.release, nil
}
