// Package store keeps tenant and project skills uploaded through the API in
// JetStream, shared by every skills replica:
//
//   - an object store (BucketFiles) holds each revision of a skill as one
//     bundle (a tar of its files, SKILL.md included), named
//     `<key>/<revision>`;
//   - a KV bucket (BucketManifests) maps each skill to its manifest: the
//     current revision, its SKILL.md and file list, and the revisions kept
//     before it;
//   - a KV bucket (BucketSettings) holds per-tenant and per-project settings:
//     the system skills disabled there.
//
// A revision is a hash of the skill's files, so uploading the same content
// twice is the same revision. Every replica watches both KV buckets and
// keeps an in-memory View, so an upload is visible everywhere within the
// watch's latency (milliseconds on one NATS). The last KeepRevisions
// revisions stay readable, so a run that activated one can read its
// resources after a replace; bundles no manifest references are swept after
// a grace period.
//
// The package stores and serves bytes; it does not parse SKILL.md. The
// skills service validates an upload with the same rules as a file skill
// before calling Put.
package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/natsx"
)

// Names of the JetStream buckets.
const (
	BucketFiles     = "baagent_skill_files"
	BucketManifests = "baagent_skills"
	BucketSettings  = "baagent_skill_settings"
)

// Defaults of [Config].
const (
	DefaultKeepRevisions      = 4
	DefaultMaxSkillsPerTenant = 200
	DefaultMaxBytesPerTenant  = 200 << 20
	DefaultSweepInterval      = 5 * time.Minute
	DefaultSweepGrace         = 15 * time.Minute
	// The buckets' sizes are reserved against the NATS server's
	// max_file_store (16 GB in k8s/) next to the platform's streams and
	// buckets (about 7.5 GiB), so they are modest; per-tenant limits keep
	// one tenant from filling them.
	DefaultFilesMaxBytes     = 2 << 30
	DefaultManifestsMaxBytes = 256 << 20
	DefaultSettingsMaxBytes  = 64 << 20
	defaultBundleCacheBytes  = 64 << 20
)

// maxManifestBytes bounds a manifest under NATS's default 1 MiB message
// limit. The current revision alone always fits: SKILL.md is at most
// 256 KiB and its file list at most 513 paths of 512 bytes.
const maxManifestBytes = 900 << 10

// Errors of the store. Anything else it returns is the store being
// unavailable (NATS unreachable, a bucket missing).
var (
	// ErrNotFound: no such stored skill, or a revision no longer kept.
	ErrNotFound = errors.New("not found")
	// ErrConflict: an If-Match or If-None-Match precondition failed, or
	// another writer changed the skill concurrently.
	ErrConflict = errors.New("precondition failed")
	// ErrLimit: the tenant's count or size limit would be exceeded.
	ErrLimit = errors.New("tenant limit reached")
)

// Config configures a [Store]. Zero values take the defaults.
type Config struct {
	// Replicas of each bucket (the -nats-replicas setting); 0 means 1.
	Replicas int
	// KeepRevisions is how many revisions of a skill stay readable,
	// the current one included (default 4).
	KeepRevisions int
	// MaxSkillsPerTenant caps the stored skills of a tenant, its projects'
	// included (default 200).
	MaxSkillsPerTenant int
	// MaxBytesPerTenant caps the bytes of a tenant's stored skills, kept
	// revisions included (default 200 MiB).
	MaxBytesPerTenant int64
	// SweepInterval and SweepGrace: how often unreferenced bundles are
	// looked for, and how old one must be to go (a Put in progress has
	// written its bundle but not yet its manifest).
	SweepInterval time.Duration
	SweepGrace    time.Duration
	// FilesMaxBytes, ManifestsMaxBytes and SettingsMaxBytes bound the
	// buckets; a write that does not fit fails (Unavailable at the API).
	FilesMaxBytes     int64
	ManifestsMaxBytes int64
	SettingsMaxBytes  int64
	// Logger receives the store's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the store's metrics; nil registers none.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.KeepRevisions <= 0 {
		c.KeepRevisions = DefaultKeepRevisions
	}
	if c.MaxSkillsPerTenant <= 0 {
		c.MaxSkillsPerTenant = DefaultMaxSkillsPerTenant
	}
	if c.MaxBytesPerTenant <= 0 {
		c.MaxBytesPerTenant = DefaultMaxBytesPerTenant
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.SweepGrace <= 0 {
		c.SweepGrace = DefaultSweepGrace
	}
	if c.FilesMaxBytes <= 0 {
		c.FilesMaxBytes = DefaultFilesMaxBytes
	}
	if c.ManifestsMaxBytes <= 0 {
		c.ManifestsMaxBytes = DefaultManifestsMaxBytes
	}
	if c.SettingsMaxBytes <= 0 {
		c.SettingsMaxBytes = DefaultSettingsMaxBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Key names a stored skill.
type Key struct {
	Tenant  string
	Project string // empty for a tenant skill
	Name    string
}

// Scope names a tenant (Project empty) or one of its projects.
type Scope struct {
	Tenant  string
	Project string
}

// kvKey is `<tenant>.<project token>.<name>`: tenants and skill names are
// valid KV key tokens already; a project id may hold ':' and '.', so it is
// base64url encoded behind a "p" ("_" for none).
func (k Key) kvKey() string { return scopeKey(k.Tenant, k.Project) + "." + k.Name }

func scopeKey(tenant, project string) string {
	pt := "_"
	if project != "" {
		pt = "p" + base64.RawURLEncoding.EncodeToString([]byte(project))
	}
	return tenant + "." + pt
}

func (k Key) String() string {
	if k.Project == "" {
		return k.Tenant + "/" + k.Name
	}
	return k.Tenant + "/" + k.Project + "/" + k.Name
}

func bundleName(k Key, rev string) string { return k.kvKey() + "/" + rev }

// FileInfo is one file of a revision other than SKILL.md.
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Revision is a kept earlier revision of a skill.
type Revision struct {
	Revision string     `json:"revision"`
	Files    []FileInfo `json:"files,omitempty"`
	Size     int64      `json:"size"`
}

// Manifest is a stored skill as its manifest records it.
type Manifest struct {
	Tenant  string `json:"tenant"`
	Project string `json:"project,omitempty"`
	Name    string `json:"name"`
	// Revision is the current revision.
	Revision string `json:"revision"`
	// SkillMD is the current SKILL.md.
	SkillMD string `json:"skill_md"`
	// Files are the current revision's files other than SKILL.md, sorted.
	Files []FileInfo `json:"files,omitempty"`
	// Size is the current revision's bytes, SKILL.md included.
	Size      int64     `json:"size"`
	UpdatedAt time.Time `json:"updated_at"`
	// Kept are the earlier revisions still readable, newest first.
	Kept []Revision `json:"kept,omitempty"`
}

// Key is the manifest's skill.
func (m *Manifest) Key() Key { return Key{Tenant: m.Tenant, Project: m.Project, Name: m.Name} }

// keeps reports whether rev is the current or a kept revision.
func (m *Manifest) keeps(rev string) bool {
	return rev == m.Revision || slices.ContainsFunc(m.Kept, func(r Revision) bool { return r.Revision == rev })
}

// bytesHeld is what the manifest's revisions occupy together.
func (m *Manifest) bytesHeld() int64 {
	n := m.Size
	for _, r := range m.Kept {
		n += r.Size
	}
	return n
}

// View is one immutable state of the store as this replica sees it.
type View struct {
	// Skills are the stored skills ordered by key (tenant, project, name).
	Skills []*Manifest
	// Disabled maps a tenant or project scope to the system skills
	// disabled there.
	Disabled map[Scope]map[string]bool
	// Gen increases with every change.
	Gen uint64
	// Applied is, per bucket (bucketManifests, bucketSettings), the last
	// KV revision this View reflects: a write waits until its revision
	// is applied, so the replica that took it answers with it
	// (read-your-writes).
	Applied [2]uint64
}

// Indexes of View.Applied.
const (
	bucketManifests = iota
	bucketSettings
)

// DefaultApplyWait bounds how long a write waits for its own watch to show
// it before answering anyway (the write is durable; only this replica's
// View lags).
const DefaultApplyWait = 5 * time.Second

// Store is the JetStream-backed skill store.
type Store struct {
	cfg       Config
	log       *slog.Logger
	metrics   *metrics
	files     jetstream.ObjectStore
	manifests jetstream.KeyValue
	settings  jetstream.KeyValue

	view atomic.Pointer[View]

	// mu guards the maps the watcher applies updates to; the View is
	// rebuilt from them.
	mu       sync.Mutex
	skills   map[string]*Manifest
	disabled map[Scope]map[string]bool
	gen      uint64
	applied  [2]uint64
	// published is closed and replaced whenever a new View is stored.
	published chan struct{}

	watchMu sync.Mutex
	watches []jetstream.KeyWatcher

	cache *bundleCache
	// changed has a value when the View changed since the last receive.
	changed chan struct{}
	// running guards Run against a second concurrent call.
	running atomic.Bool
}

// Open creates or updates the buckets (with cfg.Replicas replicas), loads
// the current state and starts watching it; Run applies later changes.
// Close stops the watches.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg: cfg, log: cfg.Logger, metrics: m,
		skills:   map[string]*Manifest{},
		disabled: map[Scope]map[string]bool{},
		cache:    newBundleCache(defaultBundleCacheBytes),
		changed:  make(chan struct{}, 1),

		published: make(chan struct{}),
	}
	fail := func(err error) (*Store, error) {
		s.Close()
		if cfg.Registerer != nil {
			m.unregister(cfg.Registerer)
		}
		return nil, err
	}
	if s.files, err = natsx.Call(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: BucketFiles, Description: "BA-Agent uploaded skills, one bundle per revision, name <key>/<revision>",
			MaxBytes: cfg.FilesMaxBytes, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
		})
	}); err != nil {
		return fail(fmt.Errorf("object store %s: %w", BucketFiles, err))
	}
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
		desc string
		max  int64
	}{
		{&s.manifests, BucketManifests, "BA-Agent uploaded skills' manifests, key <tenant>.<project>.<skill>", cfg.ManifestsMaxBytes},
		{&s.settings, BucketSettings, "BA-Agent tenant and project skill settings, key <tenant>.<project>", cfg.SettingsMaxBytes},
	} {
		kv, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
			return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: b.name, Description: b.desc, History: 1,
				MaxBytes: b.max, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
			})
		})
		if err != nil {
			return fail(fmt.Errorf("KV bucket %s: %w", b.name, err))
		}
		*b.kv = kv
	}
	s.view.Store(&View{Disabled: map[Scope]map[string]bool{}})
	for _, kv := range []jetstream.KeyValue{s.manifests, s.settings} {
		w, err := kv.WatchAll(context.Background())
		if err != nil {
			return fail(fmt.Errorf("watch %s: %w", kv.Bucket(), err))
		}
		s.watchMu.Lock()
		s.watches = append(s.watches, w)
		s.watchMu.Unlock()
		// The initial values end with a nil entry.
		if err := s.drainInitial(ctx, w); err != nil {
			return fail(err)
		}
	}
	s.rebuild()
	return s, nil
}

func (s *Store) drainInitial(ctx context.Context, w jetstream.KeyWatcher) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("load skill store: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("load skill store: watch ended")
			}
			if e == nil {
				return nil
			}
			s.apply(e, false)
		}
	}
}

// Close stops the watches. The Store must not be used afterwards.
func (s *Store) Close() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for _, w := range s.watches {
		_ = w.Stop()
	}
	s.watches = nil
}

// Changed receives a value after the View changed (while Run runs);
// changes in between are coalesced into one.
func (s *Store) Changed() <-chan struct{} { return s.changed }

// View returns the current state; callers must not modify it.
func (s *Store) View() *View { return s.view.Load() }

// Run applies the watched changes and sweeps unreferenced bundles every
// SweepInterval until ctx is cancelled, then stops the watches. A watch
// that ends (its stream was lost) is restarted.
func (s *Store) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("skill store: Run is already running")
	}
	defer s.running.Store(false)
	defer s.Close()
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	for {
		s.watchMu.Lock()
		if len(s.watches) != 2 {
			s.watchMu.Unlock()
			return errors.New("skill store: closed")
		}
		mw, sw := s.watches[0], s.watches[1]
		s.watchMu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-sweep.C:
			if n, err := s.Sweep(ctx); err != nil {
				s.log.Warn("skill store: sweep failed", "error", err)
			} else if n > 0 {
				s.log.Info("skill store: swept unreferenced revisions", "bundles", n)
			}
		case e, ok := <-mw.Updates():
			if !s.handle(ctx, 0, mw, e, ok) {
				return nil
			}
		case e, ok := <-sw.Updates():
			if !s.handle(ctx, 1, sw, e, ok) {
				return nil
			}
		}
	}
}

// handle applies one watched entry, rebuilding the View when no further
// update is waiting (a burst is one rebuild); a closed watch is restarted.
func (s *Store) handle(ctx context.Context, i int, w jetstream.KeyWatcher, e jetstream.KeyValueEntry, ok bool) bool {
	if !ok {
		kv := []jetstream.KeyValue{s.manifests, s.settings}[i]
		s.log.Warn("skill store: watch ended; restarting it", "bucket", kv.Bucket())
		nw, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyWatcher, error) {
			return kv.WatchAll(context.Background())
		})
		if err != nil {
			s.log.Error("skill store: cannot restart watch", "bucket", kv.Bucket(), "error", err)
			return ctx.Err() == nil && s.retryLater(ctx)
		}
		s.watchMu.Lock()
		s.watches[i] = nw
		s.watchMu.Unlock()
		return true
	}
	if e != nil {
		s.apply(e, true)
	}
	if len(w.Updates()) == 0 {
		if s.rebuild() {
			select {
			case s.changed <- struct{}{}:
			default: // a notification is pending already
			}
		}
	}
	return true
}

func (s *Store) retryLater(ctx context.Context) bool {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// apply records one KV entry in the maps.
func (s *Store) apply(e jetstream.KeyValueEntry, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted := e.Operation() != jetstream.KeyValuePut
	switch e.Bucket() {
	case BucketManifests:
		s.applied[bucketManifests] = max(s.applied[bucketManifests], e.Revision())
		if deleted {
			delete(s.skills, e.Key())
			break
		}
		var m Manifest
		if err := json.Unmarshal(e.Value(), &m); err != nil || m.Key().kvKey() != e.Key() {
			s.log.Error("skill store: ignoring a malformed manifest", "key", e.Key(), "error", err)
			break
		}
		s.skills[e.Key()] = &m
	case BucketSettings:
		s.applied[bucketSettings] = max(s.applied[bucketSettings], e.Revision())
		sc, ok := parseScopeKey(e.Key())
		if !ok {
			break
		}
		if deleted {
			delete(s.disabled, sc)
			break
		}
		var st settings
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			s.log.Error("skill store: ignoring malformed settings", "key", e.Key(), "error", err)
			break
		}
		set := make(map[string]bool, len(st.Disabled))
		for _, n := range st.Disabled {
			set[n] = true
		}
		s.disabled[sc] = set
	}
	s.gen++
	if live {
		s.metrics.watchLag.Observe(max(0, time.Since(e.Created()).Seconds()))
	}
}

// rebuild publishes a new View when the maps changed since the last one.
func (s *Store) rebuild() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.view.Load(); cur != nil && cur.Gen == s.gen && s.gen != 0 {
		return false
	}
	v := &View{Gen: s.gen, Applied: s.applied, Skills: make([]*Manifest, 0, len(s.skills)), Disabled: make(map[Scope]map[string]bool, len(s.disabled))}
	for _, m := range s.skills {
		v.Skills = append(v.Skills, m)
	}
	slices.SortFunc(v.Skills, func(a, b *Manifest) int {
		if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
			return c
		}
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for k, set := range s.disabled {
		v.Disabled[k] = set
	}
	s.view.Store(v)
	close(s.published)
	s.published = make(chan struct{})
	s.metrics.stored.Set(float64(len(v.Skills)))
	return true
}

// awaitApplied waits until the View reflects revision rev of bucket (an
// index of View.Applied), at most DefaultApplyWait and while ctx lasts.
// Without Run nothing applies changes, so it does not wait. Running out
// of time is not an error: the write is stored, and the View catches up.
func (s *Store) awaitApplied(ctx context.Context, bucket int, rev uint64) {
	if rev == 0 || !s.running.Load() {
		return
	}
	timer := time.NewTimer(DefaultApplyWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ch := s.published
		s.mu.Unlock()
		if s.View().Applied[bucket] >= rev {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-timer.C:
			s.log.Warn("skill store: a write is not yet visible on this replica", "bucket", bucket, "revision", rev)
			return
		}
	}
}

// lastSequence is the bucket's last stream sequence: the revision of a
// delete marker just written (Delete does not return it).
func lastSequence(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	st, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueStatus, error) { return kv.Status(ctx) })
	if err != nil {
		return 0, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return 0, fmt.Errorf("bucket %s: no stream state", kv.Bucket())
	}
	return bs.StreamInfo().State.LastSeq, nil
}

func parseScopeKey(k string) (Scope, bool) {
	tenant, pt, ok := strings.Cut(k, ".")
	if !ok {
		return Scope{}, false
	}
	if pt == "_" {
		return Scope{Tenant: tenant}, true
	}
	if !strings.HasPrefix(pt, "p") {
		return Scope{}, false
	}
	p, err := base64.RawURLEncoding.DecodeString(pt[1:])
	if err != nil || len(p) == 0 {
		return Scope{}, false
	}
	return Scope{Tenant: tenant, Project: string(p)}, true
}
