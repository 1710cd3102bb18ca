package toolrunner

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
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
// closed when it is both evicted and no longer in use. Each tenant's
// workspaces together stay within its quota (quota.go).
type workspaces struct {
	root  *os.Root
	seed  string // "" = none
	now   func() time.Time
	quota *wsQuota // nil: no quota
	// seedCharge is what a seed copy is charged, reserved before copying.
	seedCharge int64

	mu    sync.Mutex
	open  map[string]*wsHandle
	order *list.List // idle and busy handles, front = most recently used
	// opening counts the calls opening a workspace that is not open yet,
	// so that the idle cleanup never removes one a call is about to use.
	opening map[string]int
	// keyLocks serialize the writes and the removal of a workspace.
	keyLocks map[string]*keyLock
	// removing holds the .gone- directories remove is deleting, which the
	// idle cleanup must not take for leftovers (and credit twice).
	removing map[string]bool
}

// workspaceOptions configures openWorkspaces.
type workspaceOptions struct {
	Dir  string
	Seed string // "" = none
	Now  func() time.Time
	// Quota is each tenant's bound in bytes; 0 = no quota.
	Quota int64
	// Logger receives the quota's refusals.
	Logger *slog.Logger
	// OnExceeded is called on each refusal (metrics).
	OnExceeded func()
}

// wsLease is a call's use of a workspace.
type wsLease struct {
	root *os.Root
	// write makes a change to the workspace within the tenant's quota
	// (tool.Call.QuotaWrite); nil when there is no quota.
	write   func(name string, size int64, write func() error) error
	release func()
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

func openWorkspaces(o workspaceOptions) (*workspaces, error) {
	dir, seed := o.Dir, o.Seed
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnExceeded == nil {
		o.OnExceeded = func() {}
	}
	w := &workspaces{root: root, seed: seed, now: o.Now, open: map[string]*wsHandle{}, order: list.New(),
		opening: map[string]int{}, keyLocks: map[string]*keyLock{}, removing: map[string]bool{}}
	if o.Quota > 0 {
		w.quota = &wsQuota{root: root, limit: o.Quota, log: o.Logger, onExceeded: o.OnExceeded, tenants: map[string]*tenantUsage{}}
		w.seedCharge = seedCharge(seed)
		if w.seedCharge+quotaBlock > o.Quota {
			o.Logger.Warn("the workspace quota is smaller than one copy of the seed directory: every new conversation will be refused",
				"quota_bytes", o.Quota, "seed_bytes", w.seedCharge)
		}
	}
	return w, nil
}

// seedCharge is the charge of a copy of the seed directory: the regular
// files and directories copySeed copies.
func seedCharge(seed string) int64 {
	if seed == "" {
		return 0
	}
	var charged int64
	_ = fs.WalkDir(os.DirFS(seed), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || p == ".":
		case d.IsDir():
			charged += quotaBlock
		case d.Type().IsRegular():
			if fi, err := d.Info(); err == nil {
				charged += blocks(fi.Size())
			}
		}
		return nil
	})
	return charged
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

// acquire returns the workspace of (tenant, conversation) as a lease the
// caller must release when done with it. tenant and conversation are
// validated ids (no separators, not starting with a dot). Creating the
// workspace fails with a *quota.Error when the tenant's quota has no room
// for a copy of the seed.
func (w *workspaces) acquire(tenant, conversation string) (*wsLease, error) {
	// The tenant's account is held for the whole call: its usage stays
	// known while the call may write.
	e := w.quota.hold(tenant)
	key := path.Join(tenant, conversation)
	w.mu.Lock()
	if h, ok := w.open[key]; ok {
		h.refs++
		w.order.MoveToFront(h.el)
		touch := w.touchLocked(h)
		w.mu.Unlock()
		touch()
		return w.lease(h, e), nil
	}
	w.opening[key]++
	w.mu.Unlock()

	r, err := w.openDir(tenant, conversation, e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opening[key]--; w.opening[key] == 0 {
		delete(w.opening, key)
	}
	if err != nil {
		w.quota.release(e)
		return nil, err
	}
	if h, ok := w.open[key]; ok { // a concurrent call opened it first
		r.Close()
		h.refs++
		w.order.MoveToFront(h.el)
		return w.lease(h, e), nil
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
	return w.lease(h, e), nil
}

// lease wraps a held handle and account for a call.
func (w *workspaces) lease(h *wsHandle, e *tenantUsage) *wsLease {
	var once sync.Once
	l := &wsLease{root: h.root, release: func() {
		once.Do(func() {
			w.release(h)
			w.quota.release(e)
		})
	}}
	if w.quota != nil {
		l.write = func(name string, size int64, write func() error) error {
			return w.writeCharged(h, e, name, size, write)
		}
	}
	return l
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
// needed; a creation is charged to the tenant's account e.
func (w *workspaces) openDir(tenant, conversation string, e *tenantUsage) (*os.Root, error) {
	rel := path.Join(tenant, conversation)
	if r, err := w.root.OpenRoot(rel); err == nil {
		return r, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// One creation at a time: concurrent first calls wait and open the
	// workspace, rather than each reserving (or being refused) a copy of
	// the seed only one of them makes.
	unlock := w.lockKey(rel)
	defer unlock()
	if r, err := w.root.OpenRoot(rel); err == nil {
		return r, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := w.root.MkdirAll(tenant, 0o750); err != nil {
		return nil, err
	}
	need := w.seedCharge + quotaBlock
	what := "a new workspace for this conversation"
	if w.seed != "" {
		what += " (a copy of the seed files)"
	}
	if err := w.quota.reserve(e, need, what); err != nil {
		return nil, err
	}
	var added int64 // what this call actually created
	defer func() { w.quota.settle(e, need, added) }()
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
		if err := w.root.Mkdir(rel, 0o750); err == nil {
			added = quotaBlock
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	} else {
		_, charged := footprint(w.root, tmp, true)
		if err := w.root.Rename(tmp, rel); err != nil {
			_ = w.root.RemoveAll(tmp) // another call created it first
		} else {
			added = charged
		}
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
// It is renamed out of the way first, so that a call coming later gets a
// fresh workspace rather than one being deleted under it.
func (w *workspaces) remove(tenant, conversation string) (int64, error) {
	rel := path.Join(tenant, conversation)
	e := w.quota.hold(tenant)
	defer w.quota.release(e)
	unlock := w.lockKey(rel) // no write of this workspace during its removal
	defer unlock()
	w.mu.Lock()
	if h, ok := w.open[rel]; ok {
		w.forgetLocked(h)
		if h.refs == 0 {
			h.root.Close()
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	gone := path.Join(tenant, ".gone-"+hex.EncodeToString(rnd[:]))
	err := w.root.Rename(rel, gone)
	if err == nil {
		w.removing[gone] = true
	}
	w.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	size, err := w.removeDir(e, gone)
	w.mu.Lock()
	delete(w.removing, gone)
	w.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return size, nil
}

// removeDir deletes rel, a workspace no call can write any more, and
// credits its charge to the tenant's account e. It reports the size of the
// files it held.
func (w *workspaces) removeDir(e *tenantUsage, rel string) (int64, error) {
	size, charged := footprint(w.root, rel, true)
	err := w.root.RemoveAll(rel)
	if err != nil { // credit only what is gone
		_, left := footprint(w.root, rel, true)
		charged -= left
	}
	w.quota.settle(e, 0, -charged)
	return size, err
}
