// Package artifact stores large tool results on disk under opaque ids
// (`artifact_<hash>`, seed 003 "artifact security rules"): a caller names an
// artifact only by id, never by path; each artifact belongs to one
// conversation, which alone may read it; artifacts are removed by age, by
// total size (least recently used first) and when their conversation ends.
//
// Each artifact is two files under the store's root, opened through an
// os.Root so that no name can leave it: the data and a JSON sidecar with its
// metadata. The sidecars are what make the metadata survive a restart; they
// are written after the data, so a crash in between leaves only an orphan
// data file, which Open deletes.
package artifact

import (
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
)

// Defaults of [Options] (seed 000 DataFileManager).
const (
	DefaultMaxAge       = 24 * time.Hour
	DefaultMaxBytes     = 10 << 30 // 10 GiB
	DefaultMaxArtifacts = 100_000
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
	s := &Store{opts: opts, root: root, meta: map[string]*Meta{}}
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
// owner returns the existing artifact.
func (s *Store) Put(owner Owner, namespace, toolCallID, summary string, data []byte) (Meta, error) {
	if int64(len(data)) > s.opts.MaxBytes {
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
	s.mu.Unlock()

	dir := path.Join(owner.Tenant, namespace)
	m := &Meta{
		ID: id, Owner: owner, File: path.Join(dir, id), Size: int64(len(data)),
		Hash: DataHash(data), ToolCallID: toolCallID, Summary: summary,
		Created: now, Accessed: now, persisted: now,
	}
	if err := s.root.MkdirAll(dir, 0o750); err != nil {
		return Meta{}, fmt.Errorf("store %s: %w", id, scrub(err))
	}
	if err := s.writeAtomic(m.File, data); err != nil {
		return Meta{}, fmt.Errorf("store %s: %w", id, err)
	}
	if err := s.writeSidecar(m); err != nil {
		_ = s.root.Remove(m.File)
		return Meta{}, fmt.Errorf("store %s: %w", id, err)
	}

	s.mu.Lock()
	if old, ok := s.meta[id]; ok { // a concurrent Put of the same data won
		s.mu.Unlock()
		return *old, nil
	}
	s.meta[id] = m
	s.total += m.Size
	over := s.total > s.opts.MaxBytes || len(s.meta) > s.opts.MaxArtifacts
	out := *m
	s.mu.Unlock()
	if over {
		s.cleanupBySize()
	}
	return out, nil
}

// DataHash is the first 16 hex digits of the SHA-256 of data, the seed's
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
	for _, m := range s.meta {
		if m.Owner == owner {
			victims = append(victims, m)
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

// cleanupBySize removes least recently used artifacts down to 80% of
// MaxBytes (and of MaxArtifacts) when either limit is exceeded.
func (s *Store) cleanupBySize() (int, int64) {
	s.mu.Lock()
	if s.total <= s.opts.MaxBytes && len(s.meta) <= s.opts.MaxArtifacts {
		s.mu.Unlock()
		return 0, 0
	}
	lru := make([]*Meta, 0, len(s.meta))
	for _, m := range s.meta {
		lru = append(lru, m)
	}
	slices.SortFunc(lru, func(a, b *Meta) int { return a.Accessed.Compare(b.Accessed) })
	targetBytes := int64(float64(s.opts.MaxBytes) * sizeCleanupTarget)
	targetCount := int(float64(s.opts.MaxArtifacts) * sizeCleanupTarget)
	total, count := s.total, len(s.meta)
	var victims []*Meta
	for _, m := range lru {
		if total <= targetBytes && count <= targetCount {
			break
		}
		victims = append(victims, m)
		total -= m.Size
		count--
	}
	s.mu.Unlock()
	n, freed := s.remove(victims)
	if n > 0 {
		s.opts.Logger.Info("artifacts removed to stay under the size limit", "artifacts", n, "bytes", freed)
	}
	return n, freed
}

// remove deletes the files and metadata of victims.
func (s *Store) remove(victims []*Meta) (int, int64) {
	n, freed := 0, int64(0)
	for _, m := range victims {
		s.mu.Lock()
		cur, ok := s.meta[m.ID]
		if ok && cur == m {
			delete(s.meta, m.ID)
			s.total -= m.Size
		}
		s.mu.Unlock()
		if !ok || cur != m {
			continue
		}
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
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != m.Size {
			_ = s.root.Remove(p)
			continue
		}
		m.persisted = m.Accessed
		s.meta[m.ID] = m
		s.total += m.Size
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
// reaches a log or an error message (seed 003: ids only).
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
