package toolrunner

import (
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Workspaces are never deleted by a run ending (a conversation goes on
// over many runs), so without an idle limit every conversation ever held
// would keep its copy of the seed data on disk forever: the load test's
// 1,000 runs left 1,000 workspaces behind. A workspace unused for
// WorkspaceMaxIdle is removed by the cleanup loop; a later call of the
// conversation starts with a fresh one.

// DefaultWorkspaceMaxIdle is how long an unused workspace is kept.
const DefaultWorkspaceMaxIdle = 7 * 24 * time.Hour

// touchEvery bounds how often a use refreshes the workspace directory's
// modification time (one system call per call would be wasted).
const touchEvery = time.Minute

// touchLocked records a use of h; the returned function sets the
// directory's modification time when it is due (call it without w.mu).
func (w *workspaces) touchLocked(h *wsHandle) func() {
	now := w.now()
	if now.Sub(h.touched) < touchEvery {
		return func() {}
	}
	h.touched = now
	return func() { _ = w.root.Chtimes(h.key, now, now) }
}

// removeIdle removes the workspaces not used for maxIdle (by their
// directory's modification time, and by the last use this process saw)
// that no call holds or is opening, and the leftovers of interrupted
// creations older than that. It reports how many it removed and the bytes
// freed, and credits them to their tenants' quotas.
func (w *workspaces) removeIdle(maxIdle time.Duration) (removed int, freed int64) {
	cutoff := w.now().Add(-maxIdle)
	tenants, err := fs.ReadDir(w.root.FS(), ".")
	if err != nil {
		return 0, 0
	}
	for _, t := range tenants {
		if !t.IsDir() || strings.HasPrefix(t.Name(), ".") {
			continue
		}
		n, f := w.removeIdleOf(t.Name(), cutoff)
		removed += n
		freed += f
	}
	return removed, freed
}

// removeIdleOf removes tenant's idle workspaces.
func (w *workspaces) removeIdleOf(tenant string, cutoff time.Time) (removed int, freed int64) {
	convs, err := fs.ReadDir(w.root.FS(), tenant)
	if err != nil {
		return 0, 0
	}
	var e *tenantUsage
	held := false
	defer func() {
		if held {
			w.quota.release(e)
		}
	}()
	for _, c := range convs {
		info, err := c.Info()
		if err != nil || !c.IsDir() || !info.ModTime().Before(cutoff) {
			continue
		}
		if !held { // the account is only needed, and counted, if there is something to remove
			e, held = w.quota.hold(tenant), true
		}
		key := path.Join(tenant, c.Name())
		if gone, ok := w.detachIdle(key, cutoff); ok {
			size, err := w.removeDir(e, gone)
			freed += size
			if err == nil {
				removed++
			}
		}
	}
	return removed, freed
}

// detachIdle renames an idle workspace out of the way (to a .gone- name in
// its tenant's directory) unless a call holds it, is opening it, or used
// it since cutoff; a call that comes later creates a fresh one.
func (w *workspaces) detachIdle(key string, cutoff time.Time) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opening[key] > 0 {
		return "", false
	}
	if h, ok := w.open[key]; ok {
		if h.refs > 0 || !h.touched.Before(cutoff) {
			return "", false
		}
		w.forgetLocked(h)
		h.root.Close()
	}
	if strings.HasPrefix(path.Base(key), ".") { // a leftover .new- or .gone- directory
		return key, !w.removing[key]
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	gone := path.Join(path.Dir(key), ".gone-"+hex.EncodeToString(rnd[:]))
	if err := w.root.Rename(key, gone); err != nil {
		return "", false
	}
	return gone, true
}
