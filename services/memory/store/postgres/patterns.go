package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
)

// Interaction patterns live in memory_patterns (the scoring fields as
// columns, the whole pattern as jsonb), memory_pattern_traces (once per
// run id), memory_pattern_grants and memory_pattern_suppressions
// (migration 2). LearnTrace takes a transaction-scoped advisory lock per
// tenant, so learns of one tenant are serialised across replicas while
// other tenants' proceed.

// scoreCols are the columns PatternCandidates reads, in scanScore's order.
// The lists come joined by U+001F (textArray keeps it out of their
// elements): pgx decodes a text[] into many small allocations.
const scoreCols = `p.tenant, p.id, p.name, p.task_type,
	array_to_string(p.entity_types, E'\x1f'), array_to_string(p.entities, E'\x1f'),
	p.usage_count, p.success_count, p.failure_count, p.consecutive_failures, p.success_rate, p.avg_duration_ms,
	p.created_at, p.updated_at, p.last_queried_at, p.last_used_at, p.version`

// fullCols are the columns a whole pattern is read from.
const fullCols = `p.tenant, p.last_queried_at, p.version, p.body`

// maxGrantList bounds ListPatternGrants.
const maxGrantList = 500

// maxIDs bounds the ids of one GetPatterns or TouchPatterns.
const maxIDs = 10_000

func scanScore(r pgx.Row) (*store.PatternRecord, error) {
	var (
		rec                             store.PatternRecord
		usage, succ, fail, consecFail   int32
		created, updated, queried, used time.Time
	)
	var types, ents string
	p := &rec.Pattern
	if err := r.Scan(&p.Tenant, &p.ID, &p.Name, &p.Signature.TaskType, &types, &ents,
		&usage, &succ, &fail, &consecFail, &p.SuccessRate, &p.AvgDurationMs,
		&created, &updated, &queried, &used, &rec.Version); err != nil {
		return nil, fmt.Errorf("memory store: pattern: %w", err)
	}
	p.Signature.EntityTypes, p.Entities = splitList(types), splitList(ents)
	p.UsageCount, p.SuccessCount, p.FailureCount, p.ConsecutiveFailures = int(usage), int(succ), int(fail), int(consecFail)
	p.CreatedAt, p.UpdatedAt, p.LastQueriedAt, p.LastUsedAt = fromTS(created), fromTS(updated), fromTS(queried), fromTS(used)
	return &rec, nil
}

// fullRow is a whole pattern as read: its owner, last query time, version
// and body.
type fullRow struct {
	tenant  string
	queried time.Time
	version int64
	body    []byte
}

func (f *fullRow) dest() []any { return []any{&f.tenant, &f.queried, &f.version, &f.body} }

func (f *fullRow) record() (*store.PatternRecord, error) {
	rec := &store.PatternRecord{Version: f.version}
	if err := json.Unmarshal(f.body, &rec.Pattern); err != nil {
		return nil, fmt.Errorf("memory store: pattern body: %w", err)
	}
	rec.Tenant = f.tenant
	rec.LastQueriedAt = fromTS(f.queried)
	return rec, nil
}

// fromTS is a stored time as read: UTC, the zero time for year 1 (how
// the zero time is stored).
func fromTS(t time.Time) time.Time {
	if t = t.UTC(); t.IsZero() {
		return time.Time{}
	}
	return t
}

// ts is a time as a query argument; the zero time is stored as such
// (0001-01-01 UTC), so that the columns need no NULL.
func ts(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// micro is a time at the database's precision, in UTC.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// normalizePattern puts a pattern about to be written in its stored form.
func normalizePattern(p *patterns.Pattern, tenant string) {
	p.Tenant = tenant
	p.CreatedAt, p.UpdatedAt = micro(p.CreatedAt), micro(p.UpdatedAt)
	p.LastQueriedAt, p.LastUsedAt = micro(p.LastQueriedAt), micro(p.LastUsedAt)
}

// listSep joins the scoring lists as candidates read them.
const listSep = "\x1f"

// textArray is a scoring list as a text[] argument: never NULL, each
// element storable and free of listSep (a space instead; the body keeps
// the list as it is).
func textArray(xs []string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, strings.ReplaceAll(cleanText(x), listSep, " "))
	}
	return out
}

// splitList is a list joined by listSep; nil for the empty string.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, listSep)
}

// entityKeys are the lower-cased, unique, non-empty entity names the GIN
// index holds.
func entityKeys(es []string) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		if e = strings.ToLower(strings.TrimSpace(cleanText(e))); e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// tenantKeys are the entity keys prefixed with the tenant, as the GIN
// index holds them.
func tenantKeys(tenant string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = tenant + "\x1f" + k
	}
	return out
}

// jsonbSafe makes encoding/json output storable as jsonb, which refuses
// the escape \u0000: each one becomes \ufffd. Other bytes are unchanged.
func jsonbSafe(b []byte) []byte {
	const nul = `\u0000`
	if !strings.Contains(string(b), nul) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i:i+6]) == nul {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		// Any other escape: copy it whole, so that an escaped backslash
		// is never read as the start of one.
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

func marshalJSONB(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonbSafe(b), nil
}

// writePattern inserts (version 1) or updates (version+1) a pattern inside
// tx and returns the version written.
func writePattern(ctx context.Context, tx pgx.Tx, p *patterns.Pattern, created bool) (int64, error) {
	if !validText(p.Tenant, p.ID, p.Signature.TaskType) {
		return 0, errInvalidText
	}
	body, err := marshalJSONB(p)
	if err != nil {
		return 0, fmt.Errorf("memory store: pattern: %w", err)
	}
	keys := entityKeys(p.Entities)
	args := []any{p.Tenant, p.ID, p.Signature.TaskType, textArray(p.Signature.EntityTypes), textArray(p.Entities), keys,
		cleanText(p.Name), p.UsageCount, p.SuccessCount, p.FailureCount, p.ConsecutiveFailures, p.SuccessRate, p.AvgDurationMs,
		ts(p.CreatedAt), ts(p.UpdatedAt), ts(p.LastQueriedAt), ts(p.LastUsedAt), body, tenantKeys(p.Tenant, keys)}
	var version int64
	if created {
		_, err := tx.Exec(ctx, `INSERT INTO memory_patterns (tenant, id, task_type, entity_types, entities, entity_keys,
			name, usage_count, success_count, failure_count, consecutive_failures, success_rate, avg_duration_ms,
			created_at, updated_at, last_queried_at, last_used_at, body, tenant_keys, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, 1)`, args...)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return 0, fmt.Errorf("%w: pattern %q exists", store.ErrConflict, p.ID)
		}
		if err != nil {
			return 0, fmt.Errorf("memory store: insert pattern: %w", err)
		}
		return 1, nil
	}
	err = tx.QueryRow(ctx, `UPDATE memory_patterns SET task_type = $3, entity_types = $4, entities = $5, entity_keys = $6,
		name = $7, usage_count = $8, success_count = $9, failure_count = $10, consecutive_failures = $11, success_rate = $12,
		avg_duration_ms = $13, created_at = $14, updated_at = $15, last_queried_at = $16, last_used_at = $17, body = $18,
		tenant_keys = $19, version = version + 1
		WHERE tenant = $1 AND id = $2 RETURNING version`, args...).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, notFound("pattern", p.ID)
	}
	if err != nil {
		return 0, fmt.Errorf("memory store: update pattern: %w", err)
	}
	return version, nil
}

// LearnTrace records the trace and applies learn's decision in one
// transaction, under the tenant's pattern lock.
func (s *Store) LearnTrace(ctx context.Context, tr *store.TraceRecord, taskType, used string, learn store.LearnFunc) (store.LearnOutcome, error) {
	if tr == nil || tr.Tenant == "" || tr.RunID == "" {
		return store.LearnOutcome{}, errors.New("memory store: a trace needs its tenant and run id")
	}
	if learn == nil {
		return store.LearnOutcome{}, errors.New("memory store: LearnTrace needs a learn function")
	}
	if !validText(tr.Tenant, tr.RunID, tr.ConversationID) {
		return store.LearnOutcome{}, errInvalidText
	}
	// A task type or used pattern PostgreSQL cannot hold names no pattern.
	if !validText(taskType) {
		taskType = "\x1f"
	}
	if !validText(used) {
		used = ""
	}
	created := micro(tr.CreatedAt)
	if created.IsZero() {
		created = micro(time.Now())
	}
	traceJSON, err := marshalJSONB(tr.Trace)
	if err != nil {
		return store.LearnOutcome{}, fmt.Errorf("memory store: trace: %w", err)
	}
	var out store.LearnOutcome
	start := time.Now()
	defer func() { s.metrics.learnSeconds.Observe(time.Since(start).Seconds()) }()
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out = store.LearnOutcome{}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('baagent.patterns:' || $1, 0))`, tr.Tenant); err != nil {
			return fmt.Errorf("memory store: pattern lock: %w", err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO memory_pattern_traces (tenant, run_id, conversation_id, created_at, trace)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, run_id) DO NOTHING`,
			tr.Tenant, tr.RunID, tr.ConversationID, created, traceJSON)
		if err != nil {
			return fmt.Errorf("memory store: insert trace: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var first string
			if err := tx.QueryRow(ctx, `SELECT pattern_id FROM memory_pattern_traces WHERE tenant = $1 AND run_id = $2`,
				tr.Tenant, tr.RunID).Scan(&first); err != nil {
				return fmt.Errorf("memory store: trace: %w", err)
			}
			out = store.LearnOutcome{PatternID: first, Duplicate: true}
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT `+fullCols+` FROM memory_patterns p
			WHERE p.tenant = $1 AND (p.task_type = $2 OR p.id = $3) ORDER BY p.id`, tr.Tenant, taskType, used)
		if err != nil {
			return fmt.Errorf("memory store: learn candidates: %w", err)
		}
		cands, err := collectFull(rows)
		if err != nil {
			return err
		}
		changed, isNew, err := learn(cands)
		if err != nil {
			return err
		}
		if changed == nil {
			return nil
		}
		if changed.ID == "" {
			return errors.New("memory store: learn returned a pattern without an id")
		}
		normalizePattern(&changed.Pattern, tr.Tenant)
		v, err := writePattern(ctx, tx, &changed.Pattern, isNew)
		if err != nil {
			return err
		}
		changed.Version = v
		out.PatternID, out.Created = changed.ID, isNew
		if _, err := tx.Exec(ctx, `UPDATE memory_pattern_traces SET pattern_id = $3 WHERE tenant = $1 AND run_id = $2`,
			tr.Tenant, tr.RunID, changed.ID); err != nil {
			return fmt.Errorf("memory store: trace: %w", err)
		}
		return nil
	})
	if err != nil {
		return store.LearnOutcome{}, err
	}
	if !out.Duplicate {
		tr.PatternID, tr.CreatedAt = out.PatternID, created
	}
	return out, nil
}

func collectFull(rows pgx.Rows) ([]*store.PatternRecord, error) {
	defer rows.Close()
	var out []*store.PatternRecord
	for rows.Next() {
		var f fullRow
		if err := rows.Scan(f.dest()...); err != nil {
			return nil, fmt.Errorf("memory store: pattern: %w", err)
		}
		rec, err := f.record()
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory store: pattern: %w", err)
	}
	return out, nil
}

// PatternCandidates reads the scoring fields of the tenant's patterns of
// the task type or sharing an entity, and of the granted ones that
// qualify likewise.
func (s *Store) PatternCandidates(ctx context.Context, tenant, taskType string, entities []string, limit int) ([]*store.PatternRecord, error) {
	if limit <= 0 || !validText(tenant, taskType) {
		return nil, nil
	}
	keys := entityKeys(entities)
	if len(keys) > 500 {
		keys = keys[:500]
	}
	// The task type and the shared entities are two disjoint branches,
	// each on its index (the OR of both was a sequential scan).
	rows, err := s.pool.Query(ctx, `
SELECT `+scoreCols+` FROM memory_patterns p
WHERE p.tenant = $1 AND p.task_type = $2
UNION ALL
SELECT `+scoreCols+` FROM memory_patterns p
WHERE p.tenant = $1 AND p.task_type <> $2 AND p.tenant_keys && $5::text[]
UNION ALL
SELECT `+scoreCols+` FROM memory_pattern_grants g JOIN memory_patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
WHERE g.grantee = $1 AND g.owner <> $1 AND (p.task_type = $2 OR p.entity_keys && $3::text[])
ORDER BY 14 DESC, 2 DESC, 1 DESC
LIMIT $4`, tenant, taskType, keys, limit, tenantKeys(tenant, keys))
	if err != nil {
		return nil, fmt.Errorf("memory store: pattern candidates: %w", err)
	}
	defer rows.Close()
	out := make([]*store.PatternRecord, 0, min(limit, 256))
	for rows.Next() {
		rec, err := scanScore(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory store: pattern candidates: %w", err)
	}
	return out, nil
}

// TouchPatterns sets last_queried_at on the tenant's own patterns.
func (s *Store) TouchPatterns(ctx context.Context, tenant string, ids []string, at time.Time) error {
	ids = validIDs(ids)
	if len(ids) == 0 || !validText(tenant) {
		return nil
	}
	if len(ids) > maxIDs {
		return fmt.Errorf("memory store: touch %d patterns, more than %d", len(ids), maxIDs)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE memory_patterns SET last_queried_at = $3 WHERE tenant = $1 AND id = ANY($2)`,
		tenant, ids, ts(micro(at))); err != nil {
		return fmt.Errorf("memory store: touch patterns: %w", err)
	}
	return nil
}

// ownOrGranted reads the whole patterns among ids the tenant owns or was
// granted; the tenant's own first for an id both have.
func (s *Store) ownOrGranted(ctx context.Context, tenant string, ids []string) ([]*store.PatternRecord, error) {
	ids = validIDs(ids)
	if len(ids) == 0 || !validText(tenant) {
		return nil, nil
	}
	if len(ids) > maxIDs {
		return nil, fmt.Errorf("memory store: read %d patterns, more than %d", len(ids), maxIDs)
	}
	rows, err := s.pool.Query(ctx, `
SELECT `+fullCols+`, 0 AS shared FROM memory_patterns p WHERE p.tenant = $1 AND p.id = ANY($2)
UNION ALL
SELECT `+fullCols+`, 1 FROM memory_pattern_grants g JOIN memory_patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
WHERE g.grantee = $1 AND g.owner <> $1 AND g.pattern_id = ANY($2)
ORDER BY 5`, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("memory store: patterns: %w", err)
	}
	defer rows.Close()
	var out []*store.PatternRecord
	seen := make(map[string]bool, len(ids))
	for rows.Next() {
		var f fullRow
		var shared int32
		if err := rows.Scan(append(f.dest(), &shared)...); err != nil {
			return nil, fmt.Errorf("memory store: patterns: %w", err)
		}
		rec, err := f.record()
		if err != nil {
			return nil, err
		}
		if !seen[rec.ID] {
			seen[rec.ID] = true
			out = append(out, rec)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory store: patterns: %w", err)
	}
	return out, nil
}

// GetPattern reads a pattern the tenant owns or was granted.
func (s *Store) GetPattern(ctx context.Context, tenant, id string) (*store.PatternRecord, error) {
	out, err := s.ownOrGranted(ctx, tenant, []string{id})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, notFound("pattern", id)
	}
	return out[0], nil
}

// GetPatterns reads many, in the order of ids; missing ones are left out.
func (s *Store) GetPatterns(ctx context.Context, tenant string, ids []string) ([]*store.PatternRecord, error) {
	found, err := s.ownOrGranted(ctx, tenant, ids)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	byID := make(map[string]*store.PatternRecord, len(found))
	for _, p := range found {
		byID[p.ID] = p
	}
	out := make([]*store.PatternRecord, 0, len(found))
	for _, id := range ids {
		if p, ok := byID[id]; ok {
			out = append(out, p)
			delete(byID, id)
		}
	}
	return out, nil
}

// patternCursor is ListPatterns' position: the last row's update time (Unix
// microseconds), owner and id.
type patternCursor struct {
	micros int64
	owner  string
	id     string
}

func encodePatternCursor(c patternCursor) string {
	return encodeToken(strconv.FormatInt(c.micros, 10)+"|"+c.owner, c.id)
}

// decodePatternCursor is encodePatternCursor's inverse.
func decodePatternCursor(tok string) (patternCursor, error) {
	k, id, err := decodeToken(tok)
	if err != nil {
		return patternCursor{}, err
	}
	n, owner, ok := strings.Cut(k, "|")
	if !ok {
		return patternCursor{}, errBadToken
	}
	micros, err := strconv.ParseInt(n, 10, 64)
	if err != nil || !validText(owner, id) {
		return patternCursor{}, errBadToken
	}
	return patternCursor{micros: micros, owner: owner, id: id}, nil
}

// ListPatterns lists by updated_at, then id, then owner, all descending.
func (s *Store) ListPatterns(ctx context.Context, tenant string, f store.PatternFilter, p store.Page) ([]*store.PatternRecord, string, error) {
	size := pageSize(p.Size)
	var c *patternCursor
	if p.Token != "" {
		pc, err := decodePatternCursor(p.Token)
		if err != nil {
			return nil, "", err
		}
		c = &pc
	}
	if !validText(tenant, f.TaskType) {
		return nil, "", nil
	}
	// The conditions are spelled out only when they apply, so that the
	// planner walks (tenant, updated_at DESC, id DESC) and stops at the
	// page instead of sorting the tenant's patterns; the cursor's
	// (updated_at, id) bound is the part that index can use.
	args := []any{tenant, size + 1}
	cond := ``
	if f.TaskType != "" {
		args = append(args, f.TaskType)
		cond += fmt.Sprintf(` AND p.task_type = $%d`, len(args))
	}
	if c != nil {
		args = append(args, time.UnixMicro(c.micros).UTC(), c.id, c.owner)
		n := len(args)
		cond += fmt.Sprintf(` AND (p.updated_at, p.id) <= ($%d, $%d) AND (p.updated_at, p.id, p.tenant) < ($%d, $%d, $%d)`,
			n-2, n-1, n-2, n-1, n)
	}
	q := `SELECT ` + fullCols + `, p.updated_at, p.id FROM memory_patterns p WHERE p.tenant = $1` + cond
	if f.IncludeShared {
		q = `(` + q + ` ORDER BY p.updated_at DESC, p.id DESC LIMIT $2)
UNION ALL
(SELECT ` + fullCols + `, p.updated_at, p.id FROM memory_pattern_grants g JOIN memory_patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
WHERE g.grantee = $1 AND g.owner <> $1` + cond + `)`
	}
	rows, err := s.pool.Query(ctx, q+`
ORDER BY 5 DESC, 6 DESC, 1 DESC
LIMIT $2`, args...)
	if err != nil {
		return nil, "", fmt.Errorf("memory store: list patterns: %w", err)
	}
	defer rows.Close()
	var out []*store.PatternRecord
	var last patternCursor
	for rows.Next() {
		var fr fullRow
		var u time.Time
		var id string
		if err := rows.Scan(append(fr.dest(), &u, &id)...); err != nil {
			return nil, "", fmt.Errorf("memory store: list patterns: %w", err)
		}
		if len(out) == size {
			return out, encodePatternCursor(last), nil
		}
		rec, err := fr.record()
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec)
		last = patternCursor{micros: u.UnixMicro(), owner: fr.tenant, id: id}
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("memory store: list patterns: %w", err)
	}
	return out, "", nil
}

// UpdatePattern edits one of the tenant's own patterns.
func (s *Store) UpdatePattern(ctx context.Context, tenant, id string, expectedVersion int64, edit func(p *patterns.Pattern) error) (*store.PatternRecord, error) {
	if edit == nil {
		return nil, errors.New("memory store: UpdatePattern needs an edit function")
	}
	if !validText(tenant, id) {
		return nil, notFound("pattern", id)
	}
	var out *store.PatternRecord
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var f fullRow
		err := tx.QueryRow(ctx, `SELECT `+fullCols+` FROM memory_patterns p WHERE p.tenant = $1 AND p.id = $2 FOR UPDATE`,
			tenant, id).Scan(f.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("pattern", id)
		}
		if err != nil {
			return fmt.Errorf("memory store: pattern: %w", err)
		}
		rec, err := f.record()
		if err != nil {
			return err
		}
		if expectedVersion != 0 && expectedVersion != rec.Version {
			return fmt.Errorf("%w: pattern %q is at version %d, not %d", store.ErrConflict, id, rec.Version, expectedVersion)
		}
		if err := edit(&rec.Pattern); err != nil {
			return err
		}
		rec.ID = id
		normalizePattern(&rec.Pattern, tenant)
		v, err := writePattern(ctx, tx, &rec.Pattern, false)
		if err != nil {
			return err
		}
		rec.Version = v
		out = rec
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeletePattern removes one of the tenant's own patterns and its grants.
func (s *Store) DeletePattern(ctx context.Context, tenant, id string) error {
	if !validText(tenant, id) {
		return notFound("pattern", id)
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM memory_patterns WHERE tenant = $1 AND id = $2`, tenant, id)
		if err != nil {
			return fmt.Errorf("memory store: delete pattern: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return notFound("pattern", id)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memory_pattern_grants WHERE owner = $1 AND pattern_id = $2`, tenant, id); err != nil {
			return fmt.Errorf("memory store: delete pattern: %w", err)
		}
		return nil
	})
}

// signatureKey is a signature's identity: the task type and its sorted,
// unique, lower-cased entity types.
func signatureKey(sig patterns.Signature) (string, patterns.Signature) {
	types := make([]string, 0, len(sig.EntityTypes))
	for _, t := range sig.EntityTypes {
		if t = strings.ToLower(strings.TrimSpace(cleanText(t))); t != "" {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	types = slices.Compact(types)
	norm := patterns.Signature{TaskType: cleanText(sig.TaskType), EntityTypes: types}
	if len(types) == 0 {
		norm.EntityTypes = nil
	}
	return norm.TaskType + "\x1f" + strings.Join(types, "\x1f"), norm
}

// SuppressSignature suppresses a signature until the given time.
func (s *Store) SuppressSignature(ctx context.Context, tenant string, sig patterns.Signature, until time.Time) error {
	if !validText(tenant) {
		return errInvalidText
	}
	k, norm := signatureKey(sig)
	b, err := marshalJSONB(norm)
	if err != nil {
		return fmt.Errorf("memory store: suppress: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO memory_pattern_suppressions (tenant, sig_key, signature, until) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, sig_key) DO UPDATE SET signature = EXCLUDED.signature, until = EXCLUDED.until`,
		tenant, k, b, micro(until)); err != nil {
		return fmt.Errorf("memory store: suppress: %w", err)
	}
	return nil
}

// SuppressedSignatures lists the tenant's signatures suppressed at now.
func (s *Store) SuppressedSignatures(ctx context.Context, tenant string, now time.Time) ([]patterns.Signature, error) {
	if !validText(tenant) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT signature FROM memory_pattern_suppressions WHERE tenant = $1 AND until > $2
		ORDER BY sig_key`, tenant, micro(now))
	if err != nil {
		return nil, fmt.Errorf("memory store: suppressed: %w", err)
	}
	defer rows.Close()
	var out []patterns.Signature
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("memory store: suppressed: %w", err)
		}
		var sig patterns.Signature
		if err := json.Unmarshal(raw, &sig); err != nil {
			return nil, fmt.Errorf("memory store: suppressed: %w", err)
		}
		out = append(out, sig)
	}
	return out, rows.Err()
}

// GrantPattern shares one of the owner's patterns; a second grant returns
// the first.
func (s *Store) GrantPattern(ctx context.Context, g store.PatternGrant) (store.PatternGrant, error) {
	if g.Owner == "" || g.Grantee == "" || g.PatternID == "" {
		return store.PatternGrant{}, errors.New("memory store: a grant needs its owner, pattern and grantee")
	}
	if g.Owner == g.Grantee {
		return store.PatternGrant{}, errors.New("memory store: a pattern cannot be granted to its owner")
	}
	if !validText(g.Owner, g.PatternID) {
		return store.PatternGrant{}, notFound("pattern", g.PatternID)
	}
	if !validText(g.Grantee) {
		return store.PatternGrant{}, errInvalidText
	}
	at := micro(g.CreatedAt)
	if at.IsZero() {
		at = micro(time.Now())
	}
	var out store.PatternGrant
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var one int32
		err := tx.QueryRow(ctx, `SELECT 1 FROM memory_patterns WHERE tenant = $1 AND id = $2 FOR SHARE`, g.Owner, g.PatternID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("pattern", g.PatternID)
		}
		if err != nil {
			return fmt.Errorf("memory store: grant: %w", err)
		}
		var created time.Time
		// DO UPDATE with no change returns the stored row, inserted or not.
		if err := tx.QueryRow(ctx, `INSERT INTO memory_pattern_grants (owner, pattern_id, grantee, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (owner, pattern_id, grantee) DO UPDATE SET created_at = memory_pattern_grants.created_at
			RETURNING created_at`, g.Owner, g.PatternID, g.Grantee, at).Scan(&created); err != nil {
			return fmt.Errorf("memory store: grant: %w", err)
		}
		out = store.PatternGrant{Owner: g.Owner, PatternID: g.PatternID, Grantee: g.Grantee, CreatedAt: created.UTC()}
		return nil
	})
	return out, err
}

// RevokePatternGrant removes a grant.
func (s *Store) RevokePatternGrant(ctx context.Context, owner, patternID, grantee string) error {
	if !validText(owner, patternID, grantee) {
		return notFound("grant", patternID+" to "+grantee)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM memory_pattern_grants WHERE owner = $1 AND pattern_id = $2 AND grantee = $3`,
		owner, patternID, grantee)
	if err != nil {
		return fmt.Errorf("memory store: revoke: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return notFound("grant", patternID+" to "+grantee)
	}
	return nil
}

// ListPatternGrants lists the owner's grants, newest first.
func (s *Store) ListPatternGrants(ctx context.Context, owner, patternID string, limit int) ([]store.PatternGrant, error) {
	if limit <= 0 || !validText(owner, patternID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT pattern_id, grantee, created_at FROM memory_pattern_grants
		WHERE owner = $1 AND ($2 = '' OR pattern_id = $2)
		ORDER BY created_at DESC, pattern_id, grantee LIMIT $3`, owner, patternID, min(limit, maxGrantList))
	if err != nil {
		return nil, fmt.Errorf("memory store: grants: %w", err)
	}
	defer rows.Close()
	var out []store.PatternGrant
	for rows.Next() {
		g := store.PatternGrant{Owner: owner}
		if err := rows.Scan(&g.PatternID, &g.Grantee, &g.CreatedAt); err != nil {
			return nil, fmt.Errorf("memory store: grants: %w", err)
		}
		g.CreatedAt = g.CreatedAt.UTC()
		out = append(out, g)
	}
	return out, rows.Err()
}

// GetTrace reads a recorded trace.
func (s *Store) GetTrace(ctx context.Context, tenant, runID string) (*store.TraceRecord, error) {
	if !validText(tenant, runID) {
		return nil, notFound("trace", runID)
	}
	tr := &store.TraceRecord{Tenant: tenant, RunID: runID}
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT conversation_id, pattern_id, created_at, trace FROM memory_pattern_traces
		WHERE tenant = $1 AND run_id = $2`, tenant, runID).Scan(&tr.ConversationID, &tr.PatternID, &tr.CreatedAt, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("trace", runID)
	}
	if err != nil {
		return nil, fmt.Errorf("memory store: trace: %w", err)
	}
	if err := json.Unmarshal(raw, &tr.Trace); err != nil {
		return nil, fmt.Errorf("memory store: trace body: %w", err)
	}
	tr.CreatedAt = tr.CreatedAt.UTC()
	return tr, nil
}

// PruneTraces deletes every tenant's traces recorded before t.
func (s *Store) PruneTraces(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM memory_pattern_traces WHERE created_at < $1`, micro(before))
	if err != nil {
		return 0, fmt.Errorf("memory store: prune traces: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
