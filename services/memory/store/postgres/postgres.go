// Package postgres is the memory Store on PostgreSQL (pgx v5, pgxpool), for
// memory services that scale out: several replicas share one database.
//
// Full-text search uses a generated tsvector column (names and aliases
// weighted A, summary and attributes B) with a GIN index; traversal is a
// recursive CTE; episodes are claimed with FOR UPDATE SKIP LOCKED and a
// lease. Vectors are real[] columns searched through an in-process index
// per tenant, kept current by a per-tenant change sequence; when the
// pgvector extension is available the store uses a vector column with an
// HNSW index instead (Backend() says which).
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/vecindex"
)

// Options configure Open.
type Options struct {
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// MaxConns bounds the pool; 0 keeps the DSN's pool_max_conns or
	// pgxpool's default.
	MaxConns int32
	// Vectors tunes the in-process vector index (bounds on its memory and
	// tenant count, when searches turn approximate); zero values take
	// vecindex's defaults.
	Vectors vecindex.Options
	// DisablePgvector keeps vectors in real[] even when the pgvector
	// extension is available.
	DisablePgvector bool
	// Registerer receives the store's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Store is the PostgreSQL memory store.
type Store struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	pgvector bool
	vectors  *vecindex.Index
	hnsw     sync.Map // dimension counts whose HNSW index exists (pgvector)
	metrics  *storeMetrics
}

var _ store.Store = (*Store)(nil)

// Open connects to dsn, applies the migrations and detects pgvector.
func Open(ctx context.Context, dsn string, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("memory postgres: dsn: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("memory postgres: connect: %w", err)
	}
	s, err := openPool(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func openPool(ctx context.Context, pool *pgxpool.Pool, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("memory postgres: connect: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, log: log, metrics: m}
	if !o.DisablePgvector {
		s.pgvector, err = enablePgvector(ctx, pool, log)
		if err != nil {
			return nil, err
		}
		if s.pgvector {
			if err := s.ensureExistingHNSW(ctx); err != nil {
				return nil, err
			}
		}
	}
	s.vectors = vecindex.New(vecSource{s}, o.Vectors)
	log.Info("memory store on PostgreSQL", "backend", s.Backend(), "schema_version", SchemaVersion())
	return s, nil
}

// Backend is `postgres`, or `postgres+pgvector` with the extension.
func (s *Store) Backend() string {
	if s.pgvector {
		return "postgres+pgvector"
	}
	return "postgres"
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool is the store's connection pool (tests and benchmarks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// crockford is the ULID alphabet.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// newID returns prefix and 26 characters: 48 bits of Unix milliseconds and
// 80 random bits in Crockford base32 (lower case), so ids sort by time.
func newID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	out := make([]byte, 0, len(prefix)+26)
	out = append(out, prefix...)
	// 128 bits as 26 base32 digits, the first digit carrying 3 bits.
	for i := 0; i < 26; i++ {
		v := 0
		for j := 0; j < 5; j++ {
			if bit := i*5 + j - 2; bit >= 0 && b[bit/8]>>(7-bit%8)&1 == 1 {
				v |= 1 << (4 - j)
			}
		}
		out = append(out, crockford[v])
	}
	return string(out)
}

// pageSize clamps a page size to 1..500 (50 when unset).
func pageSize(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

// errBadToken is a page token this store did not write.
var errBadToken = errors.New("memory store: invalid page token")

// encodeToken packs a keyset position: a sort key and an id.
func encodeToken(key, id string) string {
	b := make([]byte, 0, 4+len(key)+len(id))
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	b = append(b, id...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken is encodeToken's inverse.
func decodeToken(tok string) (key, id string, err error) {
	if len(tok) > 4096 {
		return "", "", errBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 4 {
		return "", "", errBadToken
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", "", errBadToken
	}
	key, id = string(b[4:4+n]), string(b[4+n:])
	if id == "" {
		return "", "", errBadToken
	}
	return key, id, nil
}

// notFound wraps store.ErrNotFound with what was missing.
func notFound(what, id string) error {
	return fmt.Errorf("%w: %s %q", store.ErrNotFound, what, id)
}

// bumpTenant advances the tenant's change sequence inside tx and returns the
// new value. The row lock it takes orders the tenant's graph writes, so
// sequence numbers become visible in order; graph marks the change for the
// community updater.
func bumpTenant(ctx context.Context, tx pgx.Tx, tenant string, graph bool) (int64, error) {
	var seq int64
	err := tx.QueryRow(ctx, `
INSERT INTO memory_tenants (tenant, seq, graph_changed_at)
VALUES ($1, 1, CASE WHEN $2 THEN clock_timestamp() END)
ON CONFLICT (tenant) DO UPDATE SET seq = memory_tenants.seq + 1,
	graph_changed_at = CASE WHEN $2 THEN clock_timestamp() ELSE memory_tenants.graph_changed_at END
RETURNING seq`, tenant, graph).Scan(&seq)
	return seq, err
}

// inTx runs fn in a transaction, committed when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// lowerAll lower-cases and trims each string.
func lowerAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, v := range ss {
		out[i] = strings.ToLower(strings.TrimSpace(v))
	}
	return out
}

// typesArg is the types filter as a query argument: empty (never nil,
// which SQL would see as NULL) for any type.
func typesArg(types []string) []string {
	out := []string{}
	for _, t := range types {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// validText tells whether PostgreSQL can hold s in a text column: valid
// UTF-8 without NUL. A tenant or id that is not cannot exist, so reads
// answer NotFound or nothing instead of a database error; writes refuse it.
func validText(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}

// validIDs is ids without the ones validText refuses.
func validIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if validText(id) {
			out = append(out, id)
		}
	}
	return out
}

// errInvalidText is a write of text PostgreSQL cannot hold.
var errInvalidText = errors.New("memory store: text is not valid UTF-8 or contains NUL")

// cleanText makes free text (an error message) storable.
func cleanText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// WarmVectors loads the tenant's vectors into the in-process index; with
// pgvector the database searches them and there is nothing to load.
func (s *Store) WarmVectors(ctx context.Context, tenant string) error {
	if s.pgvector {
		return nil
	}
	return s.vectors.Refresh(ctx, tenant)
}
