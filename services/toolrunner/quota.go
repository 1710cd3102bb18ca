package toolrunner

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sync"

	"github.com/baagent/baagent/services/toolrunner/quota"
)

// Per-tenant workspace quota. A tenant's usage is everything under
// <workspace-dir>/<tenant>/: its conversations' workspaces, seed copies
// included (a walk after a restart cannot tell seed files from the
// tenant's, so excluding them would make the count depend on the process's
// age; and copies of the seed are what 1,000 conversations fill a disk
// with). Usage is charged in 4 KiB blocks, a file rounded up and every
// directory one block, because that is roughly what the disk loses, and so
// that a million empty files cannot pass as zero bytes: within its quota a
// tenant has at most quota/4 KiB entries, which bounds the walk.
//
// Usage is counted by walking the tenant's directory when the tenant is
// first used (once per process, whoever comes first; the others wait), then
// kept up to date by the writes (file tools, seed copies) and removals
// (release, idle cleanup), which all hold the tenant's entry while they
// work: so a walk never runs while a write or a removal is in flight.

// DefaultWorkspaceQuotaBytes is the default per-tenant workspace quota.
const DefaultWorkspaceQuotaBytes = 1 << 30 // 1 GiB

// quotaBlock is the unit usage is charged in.
const quotaBlock = 4 << 10

// blocks is the charge of a file of size bytes.
func blocks(size int64) int64 {
	if size <= 0 {
		return quotaBlock
	}
	return (size + quotaBlock - 1) / quotaBlock * quotaBlock
}

// wsQuota accounts the workspace usage of each tenant; a nil *wsQuota
// means no quota and accounts nothing.
type wsQuota struct {
	root       *os.Root // the workspace directory
	limit      int64
	log        *slog.Logger
	onExceeded func()

	mu      sync.Mutex
	tenants map[string]*tenantUsage
	total   int64 // used, summed over tenants
}

// tenantUsage is one tenant's account. The entry lives while something
// holds it or the tenant has usage: the map holds only tenants with files
// on disk or calls in flight.
type tenantUsage struct {
	name  string
	ready chan struct{} // closed once used holds the walk's count
	// Under wsQuota.mu:
	refs     int
	used     int64 // charged bytes on disk
	reserved int64 // writes in flight, counted before they are made
}

// hold returns tenant's account, counting its usage first if it is not
// known yet. Pair it with release.
func (q *wsQuota) hold(tenant string) *tenantUsage {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	e := q.tenants[tenant]
	first := e == nil
	if first {
		e = &tenantUsage{name: tenant, ready: make(chan struct{})}
		q.tenants[tenant] = e
	}
	e.refs++
	q.mu.Unlock()
	if !first {
		<-e.ready
		return e
	}
	_, used := footprint(q.root, tenant, false)
	q.mu.Lock()
	e.used += used
	q.total += used
	q.mu.Unlock()
	close(e.ready)
	return e
}

// release drops a hold, and the account with it when it is empty.
func (q *wsQuota) release(e *tenantUsage) {
	if q == nil || e == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.reserved == 0 && e.used <= 0 && q.tenants[e.name] == e {
		delete(q.tenants, e.name)
		q.total -= e.used
	}
}

// reserve counts n more bytes against e's quota for a write about to be
// made, or refuses with a *quota.Error; what names the write for the
// message. Settle the reservation once the write is done.
func (q *wsQuota) reserve(e *tenantUsage, n int64, what string) error {
	if q == nil || e == nil || n <= 0 {
		return nil
	}
	q.mu.Lock()
	used := e.used + e.reserved
	if used+n <= q.limit {
		e.reserved += n
		q.mu.Unlock()
		return nil
	}
	q.mu.Unlock()
	q.onExceeded()
	q.log.Warn("workspace write refused: tenant's workspace quota exceeded", "tenant", e.name,
		"used_bytes", used, "quota_bytes", q.limit, "write_bytes", n)
	return &quota.Error{Kind: quota.Workspace, Tenant: e.name, Limit: q.limit, Used: used, Want: n, What: what}
}

// settle ends a reservation of reserved bytes (0: none) and charges delta,
// the change the write or removal actually made.
func (q *wsQuota) settle(e *tenantUsage, reserved, delta int64) {
	if q == nil || e == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e.reserved -= max(reserved, 0)
	if e.used+delta < 0 { // never below nothing: a drift must not grant room
		delta = -e.used
	}
	e.used += delta
	q.total += delta
}

// usage reports the bytes charged to the tenants known now (metrics).
func (q *wsQuota) usage() int64 {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}

// tenantUsed reports tenant's charged bytes, if it is known (tests).
func (q *wsQuota) tenantUsed(tenant string) (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.tenants[tenant]
	if !ok {
		return 0, false
	}
	return e.used, true
}

// footprint walks rel and reports the size of its regular files and its
// charge (rel itself included when self).
func footprint(root fsRoot, rel string, self bool) (size, charged int64) {
	_ = fs.WalkDir(root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil || (p == rel && !self) {
			return nil
		}
		if d.IsDir() {
			charged += quotaBlock
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if fi.Mode().IsRegular() {
			size += fi.Size()
			charged += blocks(fi.Size())
		} else {
			charged += quotaBlock // a symlink or a special file still takes an inode
		}
		return nil
	})
	return size, charged
}

// fsRoot is what footprint needs of an *os.Root.
type fsRoot interface{ FS() fs.FS }

// writeCharged runs write, which creates or replaces the file name in h's
// workspace with size bytes, if e's quota has room for it, and charges the
// change. Writes of one workspace run one at a time (and never during its
// removal), so that what is measured before and after a write is that
// write's doing only.
func (w *workspaces) writeCharged(h *wsHandle, e *tenantUsage, name string, size int64, write func() error) error {
	unlock := w.lockKey(h.key)
	defer unlock()
	file0, dirs0, missing0 := pathCharge(h.root, name)
	want := blocks(size) + int64(missing0)*quotaBlock - file0
	if err := w.quota.reserve(e, want, "this write"); err != nil {
		var qe *quota.Error
		if errors.As(err, &qe) {
			return qe.ToolError()
		}
		return err
	}
	// Settled even if write panics: a reservation left behind would
	// shrink the tenant's quota until the process restarts.
	defer func() {
		file1, dirs1, _ := pathCharge(h.root, name)
		w.quota.settle(e, want, file1-file0+int64(dirs1-dirs0)*quotaBlock)
	}()
	return write()
}

// pathCharge reports the charge of the file name in root (0 if missing)
// and how many of its parent directories exist and are missing.
func pathCharge(root *os.Root, name string) (file int64, dirs, missing int) {
	if fi, err := root.Lstat(name); err == nil {
		if fi.Mode().IsRegular() {
			file = blocks(fi.Size())
		} else {
			file = quotaBlock
		}
	}
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, err := root.Lstat(dir); err == nil {
			dirs++
		} else {
			missing++
		}
	}
	return file, dirs, missing
}

// keyLock serializes the writes and the removal of one workspace.
type keyLock struct {
	mu   sync.Mutex
	refs int // under workspaces.mu
}

// lockKey locks the workspace key and returns its unlock function; the
// lock is dropped from the map once nobody waits for it.
func (w *workspaces) lockKey(key string) func() {
	w.mu.Lock()
	l := w.keyLocks[key]
	if l == nil {
		l = &keyLock{}
		w.keyLocks[key] = l
	}
	l.refs++
	w.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		w.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(w.keyLocks, key)
		}
		w.mu.Unlock()
	}
}

// notStoredNote is appended to an observation whose complete data was to
// be kept as an artifact and could not be: so that the model neither takes
// the part it sees for the whole nor looks for an artifact.
func notStoredNote(err error, size int) string {
	var qe *quota.Error
	if errors.As(err, &qe) {
		return "\n\n(The complete result (" + quota.Size(int64(size)) + ") could not be stored as an artifact, so only the part shown here is available: " + qe.Error() + ")"
	}
	return "\n\n(The complete result (" + quota.Size(int64(size)) + ") could not be stored as an artifact, so only the part shown here is available.)"
}
