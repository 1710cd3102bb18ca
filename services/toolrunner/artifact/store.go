// Package artifact stores large tool results on disk under opaque ids
// (`artifact_<hash>`, see docs/concepts/artifacts.md): a caller names an
// artifact only by id, never by path; each artifact belongs to one
// conversation, which alone may read it; artifacts are removed by age, by
// total size (least recently used first, from the tenants holding the most
// first), by their tenant's quota (that tenant's least recently used first)
// and when their conversation ends.
//
// Each artifact is two files under the store's root, opened through an
// os.Root so that no name can leave it: the data and a JSON sidecar with its
// metadata. The sidecars are what make the metadata survive a restart; they
// are written after the data, so a crash in between leaves only an orphan
// data file, which Open deletes.
package artifact

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/toolrunner/quota"
)

// Defaults of [Options].
const (
	DefaultMaxAge       = 24 * time.Hour
	DefaultMaxBytes     = 10 << 30 // 10 GiB
	DefaultMaxArtifacts = 100_000
	// DefaultTenantMaxBytes is the per-tenant quota: a fifth of the
	// default store, so that a few busy tenants cannot fill it alone.
	DefaultTenantMaxBytes = 2 << 30 // 2 GiB
	// sizeCleanupTarget is the fraction of MaxBytes that a size cleanup
	// frees down to.
	sizeCleanupTarget = 0.8
	// touchPersistEvery bounds how often a read rewrites a sidecar to
	// persist the access time used by LRU.
	touchPersistEvery = time.Minute
	idHashHexLen      = 32
	sidecarSuffix     = ".meta"
	tmpSuffix         = ".tmp"
)

// ErrNotFound is returned for an artifact that does not exist or that
// belongs to another conversation; the two are not distinguished so that
// ids cannot be probed.
var ErrNotFound = errors.New("artifact not found")

// ErrTooLarge is returned by Put for data larger than the store's limit.
var ErrTooLarge = errors.New("artifact larger than the artifact store")

// Options configures a [Store].
type Options struct {
	// Dir is the store's root directory; it is created if missing.
	Dir string
	// MaxAge removes artifacts older than this (default 24 h).
	MaxAge time.Duration
	// MaxBytes bounds the total size; above it the least recently used
	// artifacts are removed down to 80% (default 10 GiB).
	MaxBytes int64
	// MaxArtifacts bounds the number of artifacts (default 100000).
	MaxArtifacts int
	// TenantMaxBytes is each tenant's quota: a Put that would take its
	// tenant past it first removes that tenant's own least recently used
	// artifacts (never another tenant's); a Put that cannot fit even then
	// fails with a *quota.Error. 0 takes the default (2 GiB); negative
	// means no per-tenant quota.
	TenantMaxBytes int64
	// OnQuotaExceeded is called when TenantMaxBytes refuses a Put (metrics).
	OnQuotaExceeded func()
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives cleanup logs; never a path, only ids.
	Logger *slog.Logger
	// OnRemove is called with the size of each removed artifact (metrics).
	OnRemove func(bytes int64)
}

// Owner is the conversation an artifact belongs to.
type Owner struct {
	Tenant         string `json:"tenant"`
	ConversationID string `json:"conversation_id"`
}

// Meta describes a stored artifact. File is relative to the store's root and
// is never shown outside this package.
type Meta struct {
	ID         string    `json:"id"`
	Owner      Owner     `json:"owner"`
	File       string    `json:"file"`
	Size       int64     `json:"size"`
	Hash       string    `json:"hash"`
	ToolCallID string    `json:"tool_call_id,omitempty"`
	Summary    string    `json:"summary,omitempty"`
	Created    time.Time `json:"created"`
	Accessed   time.Time `json:"accessed"`

	persisted time.Time // access time last written to the sidecar
}

// Store is a directory of artifacts. It is safe for concurrent use.
type Store struct {
	opts Options
	root *os.Root

	mu    sync.Mutex
	meta  map[string]*Meta
	total int64
	// tenants indexes meta by tenant for the quota and for fair size
	// cleanup; an entry goes when its tenant has no artifact and no Put in
	// flight, so the map holds only tenants with something stored.
	tenants map[string]*tenantArtifacts
}

// tenantArtifacts is one tenant's share of the store.
type tenantArtifacts struct {
	metas map[string]*Meta
	bytes int64
	// reserved is the size of the tenant's Puts being written: counted
	// against the quota before the write, so that concurrent Puts cannot
	// together pass it.
	reserved int64
	// holds counts the Puts in flight, which keep the entry.
	holds int
	// reserving serializes the tenant's reservations (see reserve).
	reserving sync.Mutex
}

// Open opens (creating if needed) the store in opts.Dir and loads the
// metadata of the artifacts already there.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("artifact: Options.Dir is required")
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxArtifacts <= 0 {
		opts.MaxArtifacts = DefaultMaxArtifacts
	}
	opts.TenantMaxBytes = quota.Limit(opts.TenantMaxBytes, DefaultTenantMaxBytes)
	if opts.OnQuotaExceeded == nil {
		opts.OnQuotaExceeded = func() {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnRemove == nil {
		opts.OnRemove = func(int64) {}
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("artifact dir: %w", err)
	}
	root, err := os.OpenRoot(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("artifact dir: %w", err)
	}
	s := &Store{opts: opts, root: root, meta: map[string]*Meta{}, tenants: map[string]*tenantArtifacts{}}
	if err := s.load(); err != nil {
		root.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the store's directory handle.
func (s *Store) Close() error { return s.root.Close() }

// ID is the artifact id of data stored for owner: the hash covers the owner
// so that two conversations never share (and so never see) one artifact.
func ID(owner Owner, data []byte) string {
	h := sha256.New()
	h.Write([]byte(owner.Tenant))
	h.Write([]byte{0})
	h.Write([]byte(owner.ConversationID))
	h.Write([]byte{0})
	h.Write(data)
	return validate.ArtifactPrefix + hex.EncodeToString(h.Sum(nil))[:idHashHexLen]
}

// ValidID reports whether id has the form `artifact_<1-64 lowercase hex>`:
// no separator, no dot, nothing a path could be built from.
func ValidID(id string) bool {
	var e validate.Errors
	validate.ArtifactID(&e, "artifact_id", id)
	return e.Len() == 0
}

// Put stores data for owner under namespace (a relative path inside the
// tenant's directory, validated by the caller; empty means the conversation
// id) and returns its metadata. Storing the same data again for the same
// owner returns the existing artifact. Data that does not fit in the
// tenant's quota, even once the tenant's other artifacts are removed, is
// refused with a *quota.Error.
func (s *Store) Put(owner Owner, namespace, toolCallID, summary string, data []byte) (Meta, error) {
	size := int64(len(data))
	if size > s.opts.MaxBytes {
		return Meta{}, ErrTooLarge
	}
	if namespace == "" {
		namespace = owner.ConversationID
	}
	id := ID(owner, data)
	now := s.opts.Now()
	s.mu.Lock()
	if m, ok := s.meta[id]; ok {
		m.Accessed = now
		out := *m
		s.mu.Unlock()
		return out, nil
	}
	t := s.tenantLocked(owner.Tenant)
	t.holds++ // keeps t until the Put ends
	s.mu.Unlock()
	if err := s.reserve(owner.Tenant, t, size); err != nil {
		s.mu.Lock()
		t.holds--
		s.dropTenantLocked(owner.Tenant, t)
		s.mu.Unlock()
		return Meta{}, err
	}

	dir := path.Join(owner.Tenant, namespace)
	m := &Meta{
		ID: id, Owner: owner, File: path.Join(dir, id), Size: size,
		Hash: DataHash(data), ToolCallID: toolCallID, Summary: summary,
		Created: now, Accessed: now, persisted: now,
	}
	var err error
	if err = s.root.MkdirAll(dir, 0o750); err != nil {
		err = scrub(err)
	} else if err = s.writeAtomic(m.File, data); err == nil {
		if err = s.writeSidecar(m); err != nil {
			_ = s.root.Remove(m.File)
		}
	}

	s.mu.Lock()
	t.holds--
	t.reserved -= size
	if err != nil {
		s.dropTenantLocked(owner.Tenant, t)
		s.mu.Unlock()
		return Meta{}, fmt.Errorf("store %s: %w", id, err)
	}
	if old, ok := s.meta[id]; ok { // a concurrent Put of the same data won
		s.dropTenantLocked(owner.Tenant, t)
		winner := *old
		s.mu.Unlock()
		if winner.File != m.File { // another namespace: ours would be an unaccounted copy
			_ = s.root.Remove(m.File + sidecarSuffix)
			_ = s.root.Remove(m.File)
		}
		return winner, nil
	}
	s.attachLocked(m)
	over := s.total > s.opts.MaxBytes || len(s.meta) > s.opts.MaxArtifacts
	out := *m
	s.mu.Unlock()
	if over {
		s.cleanupBySize()
	}
	return out, nil
}

// reserve counts size bytes against tenant's quota for a Put about to be
// written, first removing the tenant's least recently used artifacts if
// that is what it takes. It refuses, with a *quota.Error, data that cannot
// fit: larger than the quota, or with the tenant's other Puts in flight
// taking the room.
func (s *Store) reserve(tenant string, t *tenantArtifacts, size int64) error {
	limit := s.opts.TenantMaxBytes
	if limit <= 0 {
		s.mu.Lock()
		t.reserved += size
		s.mu.Unlock()
		return nil
	}
	// One reservation of the tenant at a time, held until its victims'
	// files are gone: the room they leave is not handed out while they
	// still fill the disk, so concurrent Puts pass the quota on disk by
	// one artifact at most.
	t.reserving.Lock()
	defer t.reserving.Unlock()
	s.mu.Lock()
	over := t.bytes + t.reserved + size - limit
	if over > 0 && (size > limit || t.bytes < over) {
		used := t.bytes + t.reserved
		s.mu.Unlock()
		s.opts.OnQuotaExceeded()
		s.opts.Logger.Warn("artifact refused: tenant's artifact quota exceeded", "tenant", tenant,
			"used_bytes", used, "quota_bytes", limit, "artifact_bytes", size)
		return &quota.Error{Kind: quota.Artifact, Tenant: tenant, Limit: limit, Used: used, Want: size, What: "this result"}
	}
	t.reserved += size
	var victims []*Meta
	if over > 0 {
		for _, m := range lruOf(t.metas) {
			if over <= 0 {
				break
			}
			s.detachLocked(m)
			victims = append(victims, m)
			over -= m.Size
		}
	}
	s.mu.Unlock()
	if n, freed := s.deleteFiles(victims); n > 0 {
		s.opts.Logger.Info("artifacts removed to stay under the tenant's artifact quota", "tenant", tenant, "artifacts", n, "bytes", freed)
	}
	return nil
}

// tenantLocked returns tenant's entry, creating it.
func (s *Store) tenantLocked(tenant string) *tenantArtifacts {
	t := s.tenants[tenant]
	if t == nil {
		t = &tenantArtifacts{metas: map[string]*Meta{}}
		s.tenants[tenant] = t
	}
	return t
}

// lruOf returns metas least recently used first.
func lruOf(metas map[string]*Meta) []*Meta {
	lru := make([]*Meta, 0, len(metas))
	for _, m := range metas {
		lru = append(lru, m)
	}
	slices.SortFunc(lru, func(a, b *Meta) int {
		if c := a.Accessed.Compare(b.Accessed); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return lru
}

// attachLocked adds m to the indexes and the totals.
func (s *Store) attachLocked(m *Meta) {
	s.meta[m.ID] = m
	s.total += m.Size
	t := s.tenantLocked(m.Owner.Tenant)
	t.metas[m.ID] = m
	t.bytes += m.Size
}

// detachLocked removes m from the indexes and the totals; its files stay
// for the caller to delete.
func (s *Store) detachLocked(m *Meta) {
	delete(s.meta, m.ID)
	s.total -= m.Size
	if t := s.tenants[m.Owner.Tenant]; t != nil {
		delete(t.metas, m.ID)
		t.bytes -= m.Size
		s.dropTenantLocked(m.Owner.Tenant, t)
	}
}

// dropTenantLocked forgets t once it holds nothing.
func (s *Store) dropTenantLocked(tenant string, t *tenantArtifacts) {
	if len(t.metas) == 0 && t.holds == 0 && s.tenants[tenant] == t {
		delete(s.tenants, tenant)
	}
}

// DataHash is the first 16 hex digits of the SHA-256 of data, the result's
// data_hash.
func DataHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Stat returns the metadata of owner's artifact id and marks it used.
func (s *Store) Stat(owner Owner, id string) (Meta, error) {
	if !ValidID(id) {
		return Meta{}, ErrNotFound
	}
	s.mu.Lock()
	m, ok := s.meta[id]
	if !ok || m.Owner != owner {
		s.mu.Unlock()
		return Meta{}, ErrNotFound
	}
	now := s.opts.Now()
	m.Accessed = now
	persist := now.Sub(m.persisted) >= touchPersistEvery
	if persist {
		m.persisted = now
	}
	out := *m
	s.mu.Unlock()
	if persist {
		if err := s.writeSidecar(&out); err != nil {
			s.opts.Logger.Warn("artifact access time not saved", "artifact_id", id, "error", scrub(err))
		}
	}
	return out, nil
}

// open opens the data file of an artifact returned by Stat.
func (s *Store) open(m Meta) (*os.File, error) {
	f, err := s.root.Open(m.File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, scrub(err)
	}
	return f, nil
}

// DeleteConversation removes every artifact of owner and reports how many
// and how many bytes.
func (s *Store) DeleteConversation(owner Owner) (int, int64) {
	s.mu.Lock()
	var victims []*Meta
	if t := s.tenants[owner.Tenant]; t != nil {
		for _, m := range t.metas {
			if m.Owner == owner {
				victims = append(victims, m)
			}
		}
	}
	s.mu.Unlock()
	n, freed := s.remove(victims)
	// Drop the conversation's now empty default namespace directory.
	_ = s.root.Remove(path.Join(owner.Tenant, owner.ConversationID))
	return n, freed
}

// Cleanup removes artifacts older than MaxAge, then least recently used
// ones while the store is over its size or count limit.
func (s *Store) Cleanup() (int, int64) {
	cutoff := s.opts.Now().Add(-s.opts.MaxAge)
	s.mu.Lock()
	var old []*Meta
	for _, m := range s.meta {
		if m.Created.Before(cutoff) {
			old = append(old, m)
		}
	}
	s.mu.Unlock()
	n, freed := s.remove(old)
	if n > 0 {
		s.opts.Logger.Info("expired artifacts removed", "artifacts", n, "bytes", freed)
	}
	n2, freed2 := s.cleanupBySize()
	return n + n2, freed + freed2
}

// cleanupBySize removes artifacts down to 80% of MaxBytes (and of
// MaxArtifacts) when either limit is exceeded. Fairly: each victim is the
// least recently used artifact of the tenant holding the most bytes (the
// most artifacts, once only the count is over), so that one tenant filling
// the store flushes its own artifacts and not everybody's.
func (s *Store) cleanupBySize() (int, int64) {
	s.mu.Lock()
	if s.total <= s.opts.MaxBytes && len(s.meta) <= s.opts.MaxArtifacts {
		s.mu.Unlock()
		return 0, 0
	}
	targetBytes := int64(float64(s.opts.MaxBytes) * sizeCleanupTarget)
	targetCount := int(float64(s.opts.MaxArtifacts) * sizeCleanupTarget)
	h := &tenantHeap{}
	for _, t := range s.tenants {
		if len(t.metas) > 0 {
			h.items = append(h.items, &tenantLRU{lru: lruOf(t.metas), bytes: t.bytes})
		}
	}
	total, count := s.total, len(s.meta)
	h.byBytes = total > targetBytes
	heap.Init(h)
	var victims []*Meta
	for h.Len() > 0 && (total > targetBytes || count > targetCount) {
		if byBytes := total > targetBytes; byBytes != h.byBytes {
			h.byBytes = byBytes
			heap.Init(h)
		}
		top := h.items[0]
		m := top.lru[0]
		top.lru, top.bytes = top.lru[1:], top.bytes-m.Size
		victims = append(victims, m)
		total -= m.Size
		count--
		if len(top.lru) == 0 {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	for _, m := range victims {
		s.detachLocked(m)
	}
	s.mu.Unlock()
	n, freed := s.deleteFiles(victims)
	if n > 0 {
		s.opts.Logger.Info("artifacts removed to stay under the size limit", "artifacts", n, "bytes", freed)
	}
	return n, freed
}

// tenantLRU is a tenant's artifacts, least recently used first, during a
// size cleanup.
type tenantLRU struct {
	lru   []*Meta
	bytes int64
}

// tenantHeap puts the tenant holding the most bytes (or artifacts) on top;
// ties go to the tenant with the least recently used artifact.
type tenantHeap struct {
	items   []*tenantLRU
	byBytes bool
}

func (h *tenantHeap) Len() int { return len(h.items) }
func (h *tenantHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if h.byBytes && a.bytes != b.bytes {
		return a.bytes > b.bytes
	}
	if !h.byBytes && len(a.lru) != len(b.lru) {
		return len(a.lru) > len(b.lru)
	}
	return a.lru[0].Accessed.Before(b.lru[0].Accessed)
}
func (h *tenantHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *tenantHeap) Push(x any)    { h.items = append(h.items, x.(*tenantLRU)) }
func (h *tenantHeap) Pop() any {
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return last
}

// remove deletes the files and metadata of those victims that are still
// stored.
func (s *Store) remove(victims []*Meta) (int, int64) {
	s.mu.Lock()
	gone := make([]*Meta, 0, len(victims))
	for _, m := range victims {
		if cur, ok := s.meta[m.ID]; ok && cur == m {
			s.detachLocked(m)
			gone = append(gone, m)
		}
	}
	s.mu.Unlock()
	return s.deleteFiles(gone)
}

// deleteFiles deletes the files of detached artifacts.
func (s *Store) deleteFiles(gone []*Meta) (int, int64) {
	n, freed := 0, int64(0)
	for _, m := range gone {
		if err := s.root.Remove(m.File + sidecarSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("artifact metadata not removed", "artifact_id", m.ID, "error", scrub(err))
		}
		if err := s.root.Remove(m.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("artifact not removed", "artifact_id", m.ID, "error", scrub(err))
		}
		n++
		freed += m.Size
		s.opts.OnRemove(m.Size)
	}
	return n, freed
}

// Stats reports the number of artifacts and their total size.
func (s *Store) Stats() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.meta), s.total
}

// TenantStats reports the number of tenant's artifacts and their total
// size, the usage its quota is checked against.
func (s *Store) TenantStats(tenant string) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[tenant]; t != nil {
		return len(t.metas), t.bytes
	}
	return 0, 0
}

// load reads every sidecar, drops entries whose data file is gone or has
// another size, and deletes data files without a sidecar and leftover
// temporary files.
func (s *Store) load() error {
	var sidecars, datas []string
	err := fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		name := path.Base(p)
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			_ = s.root.Remove(p)
		case strings.HasSuffix(name, sidecarSuffix) && ValidID(strings.TrimSuffix(name, sidecarSuffix)):
			sidecars = append(sidecars, p)
		case ValidID(name):
			datas = append(datas, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("artifact dir: %w", scrub(err))
	}
	known := map[string]bool{}
	for _, p := range sidecars {
		m, err := s.readSidecar(p)
		if err != nil {
			s.opts.Logger.Warn("unreadable artifact metadata dropped", "artifact_id", strings.TrimSuffix(path.Base(p), sidecarSuffix), "error", scrub(err))
			_ = s.root.Remove(p)
			continue
		}
		fi, err := s.root.Lstat(m.File)
		if _, dup := s.meta[m.ID]; dup || err != nil || !fi.Mode().IsRegular() || fi.Size() != m.Size {
			_ = s.root.Remove(p) // a duplicate would be counted twice: its data goes below
			continue
		}
		m.persisted = m.Accessed
		s.attachLocked(m)
		known[m.File] = true
	}
	for _, p := range datas {
		if !known[p] {
			_ = s.root.Remove(p)
		}
	}
	if len(s.meta) > 0 {
		s.opts.Logger.Info("artifacts loaded", "artifacts", len(s.meta), "bytes", s.total)
	}
	return nil
}

func (s *Store) readSidecar(p string) (*Meta, error) {
	b, err := s.root.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if !ValidID(m.ID) || m.File != strings.TrimSuffix(p, sidecarSuffix) || path.Base(m.File) != m.ID || m.Size < 0 {
		return nil, errors.New("metadata does not match its file")
	}
	return &m, nil
}

func (s *Store) writeSidecar(m *Meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.writeAtomic(m.File+sidecarSuffix, b)
}

// writeAtomic writes data to name through a temporary file and a rename, so
// that a reader or a restart never sees half a file.
func (s *Store) writeAtomic(name string, data []byte) error {
	tmp := name + tmpSuffix
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return scrub(err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = s.root.Remove(tmp)
		return scrub(err)
	}
	if err := s.root.Rename(tmp, name); err != nil {
		_ = s.root.Remove(tmp)
		return scrub(err)
	}
	return nil
}

// scrub drops the path from a *fs.PathError so that no artifact path
// reaches a log or an error message (ids only).
func scrub(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}
