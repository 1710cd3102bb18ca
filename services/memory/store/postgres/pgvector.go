package postgres

// The pgvector path: when the `vector` extension is available the store
// keeps a copy of each embedding in a `vector` column and searches it with
// an HNSW index (cosine distance, `<=>`) instead of the in-process index.
// pgvector is not packaged for the machines this was written on, so this
// path is exercised only by unit tests of the SQL it builds.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/baagent/baagent/services/memory/store"
)

// maxVectorDims is the largest dimension count pgvector indexes with HNSW.
const maxVectorDims = 2000

// enablePgvector creates the extension when it is available and adds the
// vector column; false when the extension is not available.
func enablePgvector(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (bool, error) {
	var available bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&available); err != nil {
		return false, fmt.Errorf("memory postgres: detect pgvector: %w", err)
	}
	if !available {
		return false, nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return false, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock) }()
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
		log.Warn("pgvector is available but could not be created; vectors stay in real[]", "error", err)
		return false, nil
	}
	if _, err := conn.Exec(ctx, pgvectorColumnSQL); err != nil {
		return false, fmt.Errorf("memory postgres: pgvector column: %w", err)
	}
	return true, nil
}

// pgvectorColumnSQL adds the vector column, filled from real[] for rows
// written before the extension arrived.
const pgvectorColumnSQL = `
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_name = 'memory_entities' AND column_name = 'embedding_vec' AND table_schema = current_schema()) THEN
		ALTER TABLE memory_entities ADD COLUMN embedding_vec vector;
		UPDATE memory_entities SET embedding_vec = embedding::vector WHERE embedding IS NOT NULL;
	END IF;
END $$`

// hnswIndexSQL is the HNSW index of the vectors of one dimension count: a
// vector column without dimensions cannot be indexed, so the index is on
// the cast to vector(dims), restricted to the rows of that length.
func hnswIndexSQL(dims int) string {
	return fmt.Sprintf(`CREATE INDEX IF NOT EXISTS memory_entities_hnsw_%d ON memory_entities
	USING hnsw ((embedding_vec::vector(%d)) vector_cosine_ops) WHERE vector_dims(embedding_vec) = %d`, dims, dims, dims)
}

// pgvectorSearchSQL orders the tenant's vectors of one dimension count by
// cosine distance to $2 with the HNSW index; $3 is k, $4 the types (empty:
// any). The score is the cosine similarity, 1 - distance.
func pgvectorSearchSQL(dims int) string {
	return fmt.Sprintf(`SELECT id, (1 - (embedding_vec::vector(%[1]d) <=> $2::vector(%[1]d)))::float8 AS score
FROM memory_entities
WHERE tenant = $1 AND vector_dims(embedding_vec) = %[1]d AND (cardinality($4::text[]) = 0 OR type = ANY($4))
ORDER BY embedding_vec::vector(%[1]d) <=> $2::vector(%[1]d)
LIMIT $3`, dims)
}

// vectorLiteral is pgvector's text form of v: "[1,-0.5,...]". Non-finite
// values (which pgvector refuses) become 0.
func vectorLiteral(v []float32) string {
	var b strings.Builder
	b.Grow(len(v)*10 + 2)
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}

// setVector writes an entity's vector column.
func (s *Store) setVector(ctx context.Context, tx pgx.Tx, tenant, id string, v []float32) error {
	if len(v) > maxVectorDims {
		return nil // left to real[] only; such vectors are not searchable with the index
	}
	_, err := tx.Exec(ctx, `UPDATE memory_entities SET embedding_vec = $3::vector WHERE tenant = $1 AND id = $2`,
		tenant, id, vectorLiteral(v))
	return err
}

// ensureHNSW makes sure the HNSW index of vectors of dims dimensions
// exists, once per store and dimension count (a handful: one per embedding
// model in use). It runs outside any transaction, after the first such
// vector is committed, since building the index locks the table against
// writes; a failure is logged (searches still work, unindexed).
func (s *Store) ensureHNSW(ctx context.Context, dims int) {
	if dims <= 0 || dims > maxVectorDims {
		return
	}
	if _, done := s.hnsw.Load(dims); done {
		return
	}
	_, err := s.pool.Exec(ctx, hnswIndexSQL(dims))
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "23505")) { // created meanwhile
		s.log.Warn("pgvector: HNSW index not created", "dims", dims, "error", err)
		return
	}
	s.hnsw.Store(dims, true)
}

// ensureExistingHNSW makes sure of the HNSW indexes of the vectors already
// stored (a database that had vectors before pgvector was installed).
func (s *Store) ensureExistingHNSW(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT vector_dims(embedding_vec) FROM memory_entities WHERE embedding_vec IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("memory postgres: vector dimensions: %w", err)
	}
	dims, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("memory postgres: vector dimensions: %w", err)
	}
	for _, d := range dims {
		s.ensureHNSW(ctx, int(d))
	}
	return nil
}

// pgvectorSearch is VectorSearch with the extension.
func (s *Store) pgvectorSearch(ctx context.Context, tenant string, vec []float32, k int, types []string) ([]store.Scored, error) {
	if len(vec) > maxVectorDims {
		return nil, nil
	}
	if types == nil {
		types = []string{}
	}
	rows, err := s.pool.Query(ctx, pgvectorSearchSQL(len(vec)), tenant, vectorLiteral(vec), k, types)
	if err != nil {
		return nil, fmt.Errorf("memory store: vector search: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Scored, error) {
		var sc store.Scored
		err := r.Scan(&sc.ID, &sc.Score)
		return sc, err
	})
	if err != nil {
		return nil, fmt.Errorf("memory store: vector search: %w", err)
	}
	return out, nil
}
