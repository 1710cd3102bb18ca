package toolrunner

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"
)

// maxOpenWorkspaces bounds the workspace handles kept open between calls.
const maxOpenWorkspaces = 256

// workspaces manages the per-conversation workspace directories
// (<WorkspaceDir>/<tenant>/<conversation>), each created on first use as a
// copy of the seed directory. Recently used workspaces stay open (opening
// one through the root costs several system calls per call); a handle is
// closed when it is both evicted and no longer in use.
type workspaces struct {
	root *os.Root
	seed string // "" = none
	now  func() time.Time

	mu    sync.Mutex
	open  map[string]*wsHandle
	order *list.List // idle and busy handles, front = most recently used
	// opening counts the calls opening a workspace that is not open yet,
	// so that the idle cleanup never removes one a call is about to use.
	opening map[string]int
}

type wsHandle struct {
	key     string
	root    *os.Root
	refs    int
	evicted bool
	el      *list.Element
	// touched is when the directory's modification time, the mark of its
	// last use that survives a restart, was last set.
	touched time.Time
}

func openWorkspaces(dir, seed string, now func() time.Time) (*workspaces, error) {
	if dir == "" {
		return nil, errors.New("setting workspace-dir: required")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("setting workspace-dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("setting workspace-dir: %w", err)
	}
	if seed != "" {
		fi, err := os.Stat(seed)
		if err != nil {
			root.Close()
			return nil, fmt.Errorf("setting workspace-seed-dir: %w", err)
		}
		if !fi.IsDir() {
			root.Close()
			return nil, fmt.Errorf("setting workspace-seed-dir: %s is not a directory", seed)
		}
	}
	if now == nil {
		now = time.Now
	}
	return &workspaces{root: root, seed: seed, now: now, open: map[string]*wsHandle{}, order: list.New(), opening: map[string]int{}}, nil
}

// close closes the idle handles and the root; call it when no call runs.
func (w *workspaces) close() error {
	w.mu.Lock()
	for _, h := range w.open {
		h.root.Close()
	}
	w.open = map[string]*wsHandle{}
	w.order.Init()
	w.mu.Unlock()
	return w.root.Close()
}

// acquire returns the workspace of (tenant, conversation) and a release
// function the caller must call when done with it. tenant and conversation
// are validated ids (no separators, not starting with a dot).
func (w *workspaces) acquire(tenant, conversation string) (*os.Root, func(), error) {
	key := path.Join(tenant, conversation)
	w.mu.Lock()
	if h, ok := w.open[key]; ok {
		h.refs++
		w.order.MoveToFront(h.el)
		touch := w.touchLocked(h)
		w.mu.Unlock()
		touch()
		return h.root, func() { w.release(h) }, nil
	}
	w.opening[key]++
	w.mu.Unlock()

	r, err := w.openDir(tenant, conversation)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opening[key]--; w.opening[key] == 0 {
		delete(w.opening, key)
	}
	if err != nil {
		return nil, nil, err
	}
	if h, ok := w.open[key]; ok { // a concurrent call opened it first
		r.Close()
		h.refs++
		w.order.MoveToFront(h.el)
		return h.root, func() { w.release(h) }, nil
	}
	h := &wsHandle{key: key, root: r, refs: 1}
	h.el = w.order.PushFront(h)
	w.open[key] = h
	w.touchLocked(h)()
	for el := w.order.Back(); w.order.Len() > maxOpenWorkspaces && el != nil; {
		prev := el.Prev()
		if old := el.Value.(*wsHandle); old.refs == 0 {
			w.forgetLocked(old)
			old.root.Close()
		}
		el = prev
	}
	return h.root, func() { w.release(h) }, nil
}

func (w *workspaces) release(h *wsHandle) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.refs--
	if h.refs == 0 && h.evicted {
		h.root.Close()
	}
}

// forgetLocked drops h from the open set; its root is closed by whoever
// sees it unused.
func (w *workspaces) forgetLocked(h *wsHandle) {
	if h.evicted {
		return
	}
	h.evicted = true
	delete(w.open, h.key)
	w.order.Remove(h.el)
}

// openDir opens the workspace directory, creating and seeding it first if
// needed.
func (w *workspaces) openDir(tenant, conversation string) (*os.Root, error) {
	rel := path.Join(tenant, conversation)
	if r, err := w.root.OpenRoot(rel); err == nil {
		return r, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := w.root.MkdirAll(tenant, 0o750); err != nil {
		return nil, err
	}
	// Build the workspace under a temporary name and rename it into place,
	// so that concurrent first calls never see a half-seeded workspace. An
	// empty workspace is made with Mkdir instead: rename(2) would silently
	// replace an empty directory another call has just created and opened.
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(tenant, ".new-"+hex.EncodeToString(rnd[:]))
	if err := w.root.Mkdir(tmp, 0o750); err != nil {
		return nil, err
	}
	copied := 0
	if w.seed != "" {
		var err error
		if copied, err = w.copySeed(tmp); err != nil {
			_ = w.root.RemoveAll(tmp)
			return nil, fmt.Errorf("seed workspace: %w", err)
		}
	}
	if copied == 0 {
		_ = w.root.RemoveAll(tmp)
		if err := w.root.Mkdir(rel, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	} else if err := w.root.Rename(tmp, rel); err != nil {
		_ = w.root.RemoveAll(tmp) // another call created it first
	}
	return w.root.OpenRoot(rel)
}

// copySeed copies the regular files and directories of the seed directory
// into dir and reports how many files it copied; symlinks and special files
// are skipped.
func (w *workspaces) copySeed(dir string) (int, error) {
	seed := os.DirFS(w.seed)
	files := 0
	err := fs.WalkDir(seed, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := path.Join(dir, p)
		switch {
		case p == ".":
			return nil
		case d.IsDir():
			return w.root.Mkdir(target, 0o750)
		case !d.Type().IsRegular():
			return nil
		}
		src, err := seed.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := w.root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			return err
		}
		_, cerr := io.Copy(dst, src)
		files++
		return errors.Join(cerr, dst.Close())
	})
	return files, err
}

// remove deletes a conversation's workspace and reports the bytes freed.
func (w *workspaces) remove(tenant, conversation string) (int64, error) {
	rel := path.Join(tenant, conversation)
	w.mu.Lock()
	if h, ok := w.open[rel]; ok {
		w.forgetLocked(h)
		if h.refs == 0 {
			h.root.Close()
		}
	}
	w.mu.Unlock()
	var size int64
	_ = fs.WalkDir(w.root.FS(), rel, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	if err := w.root.RemoveAll(rel); err != nil {
		return 0, err
	}
	return size, nil
}
