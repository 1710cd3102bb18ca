// Package sqlite is the memory store on SQLite (modernc.org/sqlite, no
// cgo): one database file in WAL mode, FTS5 for keyword search, graph
// tables with indexes walked level by level for traversal, and embeddings
// as BLOBs searched through an in-process vecindex kept current by a
// per-tenant change sequence. It is the embedded default; one process owns
// the file (writes go through a single connection, reads through a pool).
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/vecindex"
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock (default 10s).
	BusyTimeout time.Duration
	// ReadConns bounds the read connections (default 4).
	ReadConns int
	// Vectors tunes the in-process vector index.
	Vectors vecindex.Options
	// MaxTombstones is how many removed-vector records a tenant keeps for
	// other readers' indexes (default 10,000); older ones are pruned and
	// an index that fell further behind reloads.
	MaxTombstones int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the store's warnings (default slog.Default()).
	Logger *slog.Logger
}

// Store is the SQLite memory store.
type Store struct {
	w   *sql.DB // the one writer connection
	r   *sql.DB // readers
	idx *vecindex.Index
	o   Options

	// testHook, when set, runs inside CompleteEpisode's transaction after
	// the entities are written (tests inject failures with it).
	testHook func(ctx context.Context) error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating when missing) the database file at path and
// migrates its schema.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("memory sqlite: empty path")
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxTombstones <= 0 {
		o.MaxTombstones = 10_000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	pragmas := url.Values{}
	for _, p := range []string{
		fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()),
		"journal_mode(WAL)",
		"synchronous(NORMAL)",
		"foreign_keys(OFF)",
		"temp_store(MEMORY)",
		"secure_delete(ON)",     // a deleted row's bytes are zeroed, not left in free pages
		"mmap_size(1073741824)", // reads through the OS page cache, not read(2)
		"cache_size(-16384)",    // 16 MiB of pages per connection
	} {
		pragmas.Add("_pragma", p)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas.Encode()
	w, err := sql.Open("sqlite", dsn+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: open: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	s := &Store{w: w, o: o}
	if err := s.migrate(ctx); err != nil {
		_ = w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("memory sqlite: open: %w", err)
	}
	r.SetMaxOpenConns(o.ReadConns)
	r.SetMaxIdleConns(o.ReadConns)
	s.r = r
	s.idx = vecindex.New(vecSource{s}, o.Vectors)
	return s, nil
}

// Backend is "sqlite".
func (s *Store) Backend() string { return "sqlite" }

// Close closes the database.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// migrations are the schema versions, applied in order; never edit one
// that has shipped, add the next.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE tenants (
	tenant TEXT PRIMARY KEY,
	seq INTEGER NOT NULL DEFAULT 0,            -- vector change sequence
	tomb_floor INTEGER NOT NULL DEFAULT 0,     -- tombstones at or below are pruned
	graph_changed_at INTEGER NOT NULL DEFAULT 0,
	communities_updated_at INTEGER NOT NULL DEFAULT 0,
	settings TEXT                              -- JSON; NULL: defaults
) WITHOUT ROWID;
CREATE INDEX tenants_changed ON tenants(graph_changed_at);

CREATE TABLE episodes (
	rid INTEGER PRIMARY KEY,
	tenant TEXT NOT NULL,
	id TEXT NOT NULL,
	source INTEGER NOT NULL,
	content TEXT NOT NULL,
	conversation_id TEXT NOT NULL DEFAULT '',
	run_id TEXT NOT NULL DEFAULT '',
	idem_key TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	status INTEGER NOT NULL,
	error TEXT NOT NULL DEFAULT '',
	attempts INTEGER NOT NULL DEFAULT 0,
	redactions INTEGER NOT NULL DEFAULT 0,
	processed_at INTEGER NOT NULL DEFAULT 0,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until INTEGER NOT NULL DEFAULT 0,
	UNIQUE (tenant, id)
);
CREATE UNIQUE INDEX episodes_idem ON episodes(tenant, idem_key) WHERE idem_key <> '';
CREATE INDEX episodes_list ON episodes(tenant, created_at, id);
CREATE INDEX episodes_conv ON episodes(tenant, conversation_id, created_at, id);
CREATE INDEX episodes_claim ON episodes(created_at, id) WHERE status IN (1, 2);

CREATE TABLE entities (
	rid INTEGER PRIMARY KEY,
	tenant TEXT NOT NULL,
	id TEXT NOT NULL UNIQUE,
	name TEXT NOT NULL,
	name_key TEXT NOT NULL,                    -- lower-cased name
	type TEXT NOT NULL,
	summary TEXT NOT NULL DEFAULT '',
	attributes TEXT NOT NULL DEFAULT '{}',     -- JSON object
	aliases TEXT NOT NULL DEFAULT '[]',        -- JSON array
	embedding BLOB,                            -- little-endian float32
	mention_count INTEGER NOT NULL DEFAULT 0,
	community_id TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	seq INTEGER NOT NULL                       -- change sequence of the vector
);
CREATE INDEX entities_name ON entities(tenant, name_key, id);
CREATE INDEX entities_type ON entities(tenant, type, name_key, id);
CREATE INDEX entities_seq ON entities(tenant, seq);
CREATE INDEX entities_community ON entities(tenant, community_id) WHERE community_id <> '';

-- names and aliases, lower-cased, for FindEntity
CREATE TABLE entity_names (
	tenant TEXT NOT NULL,
	key TEXT NOT NULL,
	entity_rid INTEGER NOT NULL,
	is_alias INTEGER NOT NULL,
	PRIMARY KEY (tenant, key, entity_rid)
) WITHOUT ROWID;
CREATE INDEX entity_names_entity ON entity_names(entity_rid);

-- removed vectors, for other readers' indexes
CREATE TABLE vector_tombstones (
	tenant TEXT NOT NULL,
	seq INTEGER NOT NULL,
	id TEXT NOT NULL,
	PRIMARY KEY (tenant, seq)
) WITHOUT ROWID;

-- keyword search: tk is a per-tenant token, the rowid the entity's rid
CREATE VIRTUAL TABLE entity_fts USING fts5(
	tk, name, body,
	tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TABLE mentions (
	episode_rid INTEGER NOT NULL,
	entity_rid INTEGER NOT NULL,
	PRIMARY KEY (episode_rid, entity_rid)
) WITHOUT ROWID;
CREATE INDEX mentions_entity ON mentions(entity_rid, episode_rid);

CREATE TABLE relations (
	rid INTEGER PRIMARY KEY,
	tenant TEXT NOT NULL,
	id TEXT NOT NULL UNIQUE,
	source_rid INTEGER NOT NULL,
	target_rid INTEGER NOT NULL,
	source_id TEXT NOT NULL,
	target_id TEXT NOT NULL,
	type TEXT NOT NULL,
	fact TEXT NOT NULL DEFAULT '',
	weight REAL NOT NULL,
	episode_count INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (source_rid, target_rid, type)
);
CREATE INDEX relations_source ON relations(source_rid, weight);
CREATE INDEX relations_target ON relations(target_rid, weight);
CREATE INDEX relations_tenant ON relations(tenant, rid);

-- which episodes support a relation, with what confidence
CREATE TABLE relation_support (
	relation_rid INTEGER NOT NULL,
	episode_rid INTEGER NOT NULL,
	confidence REAL NOT NULL,
	PRIMARY KEY (relation_rid, episode_rid)
) WITHOUT ROWID;
CREATE INDEX relation_support_episode ON relation_support(episode_rid);

CREATE TABLE communities (
	tenant TEXT NOT NULL,
	id TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	summary TEXT NOT NULL DEFAULT '',
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
`,
	// 2: document counts per term, for keyword search's ranking budget.
	`CREATE VIRTUAL TABLE entity_fts_vocab USING fts5vocab(entity_fts, 'row');`,
	// 3: interaction patterns, their traces, grants and suppressions.
	`
-- A pattern: the scoring fields as columns (candidates read only those),
-- the whole pattern as JSON in body. last_queried_at and version are the
-- truth; body's copies of them are not read. The table is clustered by
-- task type and update time, so that candidates of one task type are one
-- range, read newest first without a lookup or a sort.
CREATE TABLE patterns (
	tenant TEXT NOT NULL,
	task_type TEXT NOT NULL,
	id TEXT NOT NULL,
	entity_types TEXT NOT NULL,                -- joined by U+001F
	entities TEXT NOT NULL,                    -- joined by U+001F
	name TEXT NOT NULL,
	usage_count INTEGER NOT NULL,
	success_count INTEGER NOT NULL,
	failure_count INTEGER NOT NULL,
	consecutive_failures INTEGER NOT NULL,
	success_rate REAL NOT NULL,
	avg_duration_ms INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	last_queried_at INTEGER NOT NULL,
	last_used_at INTEGER NOT NULL,
	version INTEGER NOT NULL,
	body TEXT NOT NULL,                        -- JSON of patterns.Pattern
	PRIMARY KEY (tenant, task_type, updated_at, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX patterns_id ON patterns(tenant, id);
CREATE INDEX patterns_updated ON patterns(tenant, updated_at, id);

-- the "shares an entity" lookup of candidates
CREATE TABLE pattern_entities (
	tenant TEXT NOT NULL,
	entity TEXT NOT NULL,
	pattern_id TEXT NOT NULL,
	PRIMARY KEY (tenant, entity, pattern_id)
) WITHOUT ROWID;
-- by pattern first: led by the tenant, the planner would walk all of a
-- tenant's rows through it to read distinct pattern ids in order
CREATE INDEX pattern_entities_pattern ON pattern_entities(pattern_id, tenant);

CREATE TABLE pattern_traces (
	tenant TEXT NOT NULL,
	run_id TEXT NOT NULL,
	conversation_id TEXT NOT NULL DEFAULT '',
	pattern_id TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	trace TEXT NOT NULL,                       -- JSON of patterns.Trace
	PRIMARY KEY (tenant, run_id)
) WITHOUT ROWID;
CREATE INDEX pattern_traces_created ON pattern_traces(created_at);
CREATE INDEX pattern_traces_conv ON pattern_traces(tenant, conversation_id);

CREATE TABLE pattern_grants (
	owner TEXT NOT NULL,
	pattern_id TEXT NOT NULL,
	grantee TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (owner, pattern_id, grantee)
) WITHOUT ROWID;
CREATE INDEX pattern_grants_grantee ON pattern_grants(grantee, pattern_id);
CREATE INDEX pattern_grants_newest ON pattern_grants(owner, created_at);

CREATE TABLE pattern_suppressions (
	tenant TEXT NOT NULL,
	sig_key TEXT NOT NULL,
	signature TEXT NOT NULL,                   -- JSON of patterns.Signature
	until INTEGER NOT NULL,
	PRIMARY KEY (tenant, sig_key)
) WITHOUT ROWID;
`,
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory sqlite: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("memory sqlite: migrate: %w", err)
	}
	var v int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("memory sqlite: migrate: %w", err)
		}
	case err != nil:
		return fmt.Errorf("memory sqlite: migrate: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("memory sqlite: the database is at schema version %d, newer than this binary's %d", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("memory sqlite: migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return fmt.Errorf("memory sqlite: migrate: %w", err)
	}
	return tx.Commit()
}

// --- small helpers ---------------------------------------------------------

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford base32, lower case

// newID is prefix and 26 characters: 10 of milliseconds (sortable), 16
// random.
func newID(prefix string, now time.Time) string {
	var b [26]byte
	ms := uint64(now.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = idAlphabet[ms&31]
		ms >>= 5
	}
	var r [16]byte
	_, _ = rand.Read(r[:])
	for i := range r {
		b[10+i] = idAlphabet[r[i]&31]
	}
	return prefix + string(b[:])
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func encodeVec(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// key is the case-insensitive form of a name.
func key(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func pageSize(p store.Page) int {
	switch {
	case p.Size <= 0:
		return 50
	case p.Size > 500:
		return 500
	}
	return p.Size
}

// cursor is a listing's position: the last row's sort key and id.
type cursor struct {
	K string `json:"k,omitempty"`
	N int64  `json:"n,omitempty"`
	I string `json:"i"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

var errBadToken = errors.New("memory sqlite: malformed page token")

func decodeCursor(tok string) (*cursor, error) {
	if tok == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, errBadToken
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.I == "" {
		return nil, errBadToken
	}
	return &c, nil
}

// placeholders is "?, ?, ?" for n arguments.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

func notFound(what, id string) error {
	return fmt.Errorf("%w: %s %q", store.ErrNotFound, what, id)
}

// chunks splits xs into slices of at most n.
func chunks[T any](xs []T, n int) [][]T {
	var out [][]T
	for len(xs) > n {
		out = append(out, xs[:n])
		xs = xs[n:]
	}
	if len(xs) > 0 {
		out = append(out, xs)
	}
	return out
}

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// inTx runs fn in a write transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory sqlite: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory sqlite: commit: %w", err)
	}
	return nil
}

// tenantState is the tenants row a write transaction works with.
type tenantState struct {
	name  string
	seq   int64
	dirty bool // graph changed
	vecs  bool // seq advanced
}

func (s *Store) loadTenant(ctx context.Context, tx *sql.Tx, tenant string) (*tenantState, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (tenant) VALUES (?) ON CONFLICT (tenant) DO NOTHING`, tenant); err != nil {
		return nil, fmt.Errorf("memory sqlite: tenant: %w", err)
	}
	ts := &tenantState{name: tenant}
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM tenants WHERE tenant = ?`, tenant).Scan(&ts.seq); err != nil {
		return nil, fmt.Errorf("memory sqlite: tenant: %w", err)
	}
	return ts, nil
}

func (ts *tenantState) next() int64 {
	ts.seq++
	ts.vecs = true
	return ts.seq
}

// save writes the tenant's sequence and change time back.
func (s *Store) saveTenant(ctx context.Context, tx *sql.Tx, ts *tenantState) error {
	if !ts.dirty && !ts.vecs {
		return nil
	}
	q := `UPDATE tenants SET seq = ? WHERE tenant = ?`
	args := []any{ts.seq, ts.name}
	if ts.dirty {
		q = `UPDATE tenants SET seq = ?, graph_changed_at = ? WHERE tenant = ?`
		args = []any{ts.seq, s.o.Now().UnixNano(), ts.name}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("memory sqlite: tenant: %w", err)
	}
	return nil
}

// WarmVectors loads the tenant's vectors into the in-process index.
func (s *Store) WarmVectors(ctx context.Context, tenant string) error {
	return s.idx.Refresh(ctx, tenant)
}
