package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
)

// Interaction patterns live in four tables (migration 3): patterns (the
// scoring fields as columns, the whole pattern as JSON), pattern_entities
// (the "shares an entity" index of candidates), pattern_traces (once per
// run id), pattern_grants and pattern_suppressions. Every write goes
// through the one writer connection, so LearnTrace is serialised with
// every other write, of the tenant and of all others.

// scoreCols are the columns PatternCandidates reads, in scanScore's order.
const scoreCols = `p.tenant, p.id, p.name, p.task_type, p.entity_types, p.entities,
	p.usage_count, p.success_count, p.failure_count, p.consecutive_failures, p.success_rate, p.avg_duration_ms,
	p.created_at, p.updated_at, p.last_queried_at, p.last_used_at, p.version`

// fullCols are the columns a whole pattern is read from.
const fullCols = `p.tenant, p.last_queried_at, p.version, p.body`

// maxGrantList bounds ListPatternGrants.
const maxGrantList = 500

type rowScanner interface{ Scan(dest ...any) error }

func scanScore(r rowScanner) (*store.PatternRecord, error) {
	var (
		rec                           store.PatternRecord
		types, ents                   string
		created, updated, queried     int64
		used                          int64
		usage, succ, fail, consecFail int64
	)
	p := &rec.Pattern
	if err := r.Scan(&p.Tenant, &p.ID, &p.Name, &p.Signature.TaskType, &types, &ents,
		&usage, &succ, &fail, &consecFail, &p.SuccessRate, &p.AvgDurationMs,
		&created, &updated, &queried, &used, &rec.Version); err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern: %w", err)
	}
	if err := decodeStrings(types, &p.Signature.EntityTypes); err != nil {
		return nil, err
	}
	if err := decodeStrings(ents, &p.Entities); err != nil {
		return nil, err
	}
	p.UsageCount, p.SuccessCount, p.FailureCount, p.ConsecutiveFailures = int(usage), int(succ), int(fail), int(consecFail)
	p.CreatedAt, p.UpdatedAt, p.LastQueriedAt, p.LastUsedAt = fromNanos(created), fromNanos(updated), fromNanos(queried), fromNanos(used)
	return &rec, nil
}

func scanFull(r rowScanner) (*store.PatternRecord, error) {
	var (
		rec     store.PatternRecord
		tenant  string
		queried int64
		body    string
	)
	if err := r.Scan(&tenant, &queried, &rec.Version, &body); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(body), &rec.Pattern); err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern body: %w", err)
	}
	rec.Tenant = tenant
	rec.LastQueriedAt = fromNanos(queried)
	return &rec, nil
}

// listSep joins the scoring columns' lists; a name holding it has it
// replaced by a space there (body keeps the name as it is).
const listSep = "\x1f"

func decodeStrings(s string, out *[]string) error {
	if s == "" {
		*out = nil
		return nil
	}
	*out = strings.Split(s, listSep)
	return nil
}

func encodeStrings(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return strings.ReplaceAll(xs[0], listSep, " ")
	}
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(listSep)
		}
		b.WriteString(strings.ReplaceAll(x, listSep, " "))
	}
	return b.String()
}

// utc drops the monotonic reading and the location, as a stored time
// reads back.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// normalizePattern puts a pattern about to be written in its stored form.
func normalizePattern(p *patterns.Pattern, tenant string) {
	p.Tenant = tenant
	p.CreatedAt, p.UpdatedAt = utc(p.CreatedAt), utc(p.UpdatedAt)
	p.LastQueriedAt, p.LastUsedAt = utc(p.LastQueriedAt), utc(p.LastUsedAt)
}

// patternEntities are the lower-cased, unique, non-empty entity names of
// a pattern, as pattern_entities holds them.
func patternEntities(es []string) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		if e = key(e); e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// writePattern inserts (version 1) or updates (version+1) a pattern and
// its entity rows inside tx; it returns the version written.
func writePattern(ctx context.Context, tx *sql.Tx, p *patterns.Pattern, created bool) (int64, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return 0, fmt.Errorf("memory sqlite: pattern: %w", err)
	}
	args := []any{p.Signature.TaskType, encodeStrings(p.Signature.EntityTypes), encodeStrings(p.Entities), p.Name,
		p.UsageCount, p.SuccessCount, p.FailureCount, p.ConsecutiveFailures, p.SuccessRate, p.AvgDurationMs,
		nanos(p.CreatedAt), nanos(p.UpdatedAt), nanos(p.LastQueriedAt), nanos(p.LastUsedAt), string(body),
		p.Tenant, p.ID}
	var version int64
	if created {
		_, err = tx.ExecContext(ctx, `INSERT INTO patterns (task_type, entity_types, entities, name,
			usage_count, success_count, failure_count, consecutive_failures, success_rate, avg_duration_ms,
			created_at, updated_at, last_queried_at, last_used_at, body, tenant, id, version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`, args...)
		if err != nil {
			if strings.Contains(err.Error(), "UNIQUE") || strings.Contains(err.Error(), "PRIMARY KEY") {
				return 0, fmt.Errorf("%w: pattern %q exists", store.ErrConflict, p.ID)
			}
			return 0, fmt.Errorf("memory sqlite: insert pattern: %w", err)
		}
		version = 1
	} else {
		err = tx.QueryRowContext(ctx, `UPDATE patterns SET task_type = ?, entity_types = ?, entities = ?, name = ?,
			usage_count = ?, success_count = ?, failure_count = ?, consecutive_failures = ?, success_rate = ?, avg_duration_ms = ?,
			created_at = ?, updated_at = ?, last_queried_at = ?, last_used_at = ?, body = ?, version = version + 1
			WHERE tenant = ? AND id = ? RETURNING version`, args...).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, notFound("pattern", p.ID)
		}
		if err != nil {
			return 0, fmt.Errorf("memory sqlite: update pattern: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM pattern_entities WHERE tenant = ? AND pattern_id = ?`, p.Tenant, p.ID); err != nil {
			return 0, fmt.Errorf("memory sqlite: pattern entities: %w", err)
		}
	}
	for _, e := range patternEntities(p.Entities) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO pattern_entities (tenant, entity, pattern_id) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, p.Tenant, e, p.ID); err != nil {
			return 0, fmt.Errorf("memory sqlite: pattern entities: %w", err)
		}
	}
	return version, nil
}

// LearnTrace records the trace and applies learn's decision, in one write
// transaction.
func (s *Store) LearnTrace(ctx context.Context, tr *store.TraceRecord, taskType, used string, learn store.LearnFunc) (store.LearnOutcome, error) {
	if tr == nil || tr.Tenant == "" || tr.RunID == "" {
		return store.LearnOutcome{}, errors.New("memory sqlite: a trace needs its tenant and run id")
	}
	if learn == nil {
		return store.LearnOutcome{}, errors.New("memory sqlite: LearnTrace needs a learn function")
	}
	created := utc(tr.CreatedAt)
	if created.IsZero() {
		created = s.o.Now().UTC()
	}
	traceJSON, err := json.Marshal(tr.Trace)
	if err != nil {
		return store.LearnOutcome{}, fmt.Errorf("memory sqlite: trace: %w", err)
	}
	var out store.LearnOutcome
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		out = store.LearnOutcome{}
		var first string
		switch err := tx.QueryRowContext(ctx, `SELECT pattern_id FROM pattern_traces WHERE tenant = ? AND run_id = ?`,
			tr.Tenant, tr.RunID).Scan(&first); {
		case err == nil:
			out = store.LearnOutcome{PatternID: first, Duplicate: true}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("memory sqlite: trace: %w", err)
		}
		// Two halves, not an OR, and sorted here: each half uses its
		// index (an ORDER BY id would walk the tenant's patterns).
		rows, err := tx.QueryContext(ctx, `SELECT `+fullCols+`, p.id FROM patterns p WHERE p.tenant = ? AND p.task_type = ?
			UNION ALL SELECT `+fullCols+`, p.id FROM patterns p WHERE p.tenant = ? AND p.id = ? AND p.task_type <> ?`,
			tr.Tenant, taskType, tr.Tenant, used, taskType)
		if err != nil {
			return fmt.Errorf("memory sqlite: learn candidates: %w", err)
		}
		cands, err := collectFull(rows)
		if err != nil {
			return err
		}
		slices.SortFunc(cands, func(a, b *store.PatternRecord) int { return strings.Compare(a.ID, b.ID) })
		changed, isNew, err := learn(cands)
		if err != nil {
			return err
		}
		if changed != nil {
			if changed.ID == "" {
				return errors.New("memory sqlite: learn returned a pattern without an id")
			}
			normalizePattern(&changed.Pattern, tr.Tenant)
			v, err := writePattern(ctx, tx, &changed.Pattern, isNew)
			if err != nil {
				return err
			}
			changed.Version = v
			out.PatternID, out.Created = changed.ID, isNew
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pattern_traces (tenant, run_id, conversation_id, pattern_id, created_at, trace)
			VALUES (?, ?, ?, ?, ?, ?)`, tr.Tenant, tr.RunID, tr.ConversationID, out.PatternID, nanos(created), string(traceJSON)); err != nil {
			return fmt.Errorf("memory sqlite: insert trace: %w", err)
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

// collectFull reads rows of fullCols and the id.
func collectFull(rows *sql.Rows) ([]*store.PatternRecord, error) {
	defer func() { _ = rows.Close() }()
	var out []*store.PatternRecord
	for rows.Next() {
		var (
			rec     store.PatternRecord
			tenant  string
			queried int64
			body    string
			id      string
		)
		if err := rows.Scan(&tenant, &queried, &rec.Version, &body, &id); err != nil {
			return nil, fmt.Errorf("memory sqlite: pattern: %w", err)
		}
		if err := json.Unmarshal([]byte(body), &rec.Pattern); err != nil {
			return nil, fmt.Errorf("memory sqlite: pattern body: %w", err)
		}
		rec.Tenant, rec.LastQueriedAt = tenant, fromNanos(queried)
		out = append(out, &rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern: %w", err)
	}
	return out, nil
}

// PatternCandidates reads the scoring fields of the tenant's patterns of
// the task type or sharing an entity, and of the granted ones that
// qualify likewise, newest first (then by id and owner, descending).
func (s *Store) PatternCandidates(ctx context.Context, tenant, taskType string, entities []string, limit int) ([]*store.PatternRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	ents := patternEntities(entities)
	if len(ents) > 500 {
		ents = ents[:500]
	}
	entArgs := make([]any, len(ents))
	for i, e := range ents {
		entArgs[i] = e
	}
	// Three disjoint parts, so UNION ALL: the task type's range of the
	// tenant's patterns (the table is clustered by task type), the
	// tenant's other patterns sharing an entity, and the granted ones.
	q := `SELECT ` + scoreCols + ` FROM patterns p WHERE p.tenant = ? AND p.task_type = ?`
	args := []any{tenant, taskType}
	if len(ents) > 0 {
		// Driven by the entity rows (CROSS JOIN keeps that order): an IN
		// filter would walk every pattern of the tenant.
		q += ` UNION ALL SELECT ` + scoreCols + ` FROM (SELECT DISTINCT pattern_id FROM pattern_entities
			WHERE tenant = ? AND entity IN (` + placeholders(len(ents)) + `)) e
			CROSS JOIN patterns p ON p.tenant = ? AND p.id = e.pattern_id WHERE p.task_type <> ?`
		args = append(args, tenant)
		args = append(args, entArgs...)
		args = append(args, tenant, taskType)
	}
	q += ` UNION ALL SELECT ` + scoreCols + ` FROM pattern_grants g JOIN patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
		WHERE g.grantee = ? AND g.owner <> ? AND (p.task_type = ?`
	args = append(args, tenant, tenant, taskType)
	if len(ents) > 0 {
		q += ` OR EXISTS (SELECT 1 FROM pattern_entities e WHERE e.tenant = p.tenant AND e.pattern_id = p.id
			AND e.entity IN (` + placeholders(len(ents)) + `))`
		args = append(args, entArgs...)
	}
	q += `) ORDER BY 14 DESC, 2 DESC, 1 DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern candidates: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := make([]*store.PatternRecord, 0, min(limit, 256))
	for rows.Next() {
		rec, err := scanScore(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern candidates: %w", err)
	}
	return out, nil
}

// TouchPatterns sets last_queried_at on the tenant's own patterns.
func (s *Store) TouchPatterns(ctx context.Context, tenant string, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, part := range chunks(ids, 500) {
			args := []any{nanos(utc(at)), tenant}
			for _, id := range part {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE patterns SET last_queried_at = ? WHERE tenant = ? AND id IN (`+
				placeholders(len(part))+`)`, args...); err != nil {
				return fmt.Errorf("memory sqlite: touch patterns: %w", err)
			}
		}
		return nil
	})
}

// ownOrGranted selects the whole patterns among ids the tenant owns or was
// granted; the tenant's own first for an id both have.
func (s *Store) ownOrGranted(ctx context.Context, tenant string, ids []string) ([]*store.PatternRecord, error) {
	var out []*store.PatternRecord
	seen := make(map[string]bool, len(ids))
	for _, part := range chunks(ids, 400) {
		args := []any{tenant}
		for _, id := range part {
			args = append(args, id)
		}
		args = append(args, tenant, tenant)
		for _, id := range part {
			args = append(args, id)
		}
		// INDEXED BY: with an IN list the planner otherwise walks the
		// tenant's range of the primary key (all its patterns).
		rows, err := s.r.QueryContext(ctx, `SELECT `+fullCols+`, 0 FROM patterns p INDEXED BY patterns_id WHERE p.tenant = ? AND p.id IN (`+placeholders(len(part))+`)
			UNION ALL SELECT `+fullCols+`, 1 FROM pattern_grants g JOIN patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
			WHERE g.grantee = ? AND g.owner <> ? AND g.pattern_id IN (`+placeholders(len(part))+`)
			ORDER BY 5`, args...)
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: patterns: %w", err)
		}
		err = func() error {
			defer func() { _ = rows.Close() }()
			for rows.Next() {
				var (
					rec     store.PatternRecord
					tenant  string
					queried int64
					body    string
					shared  int
				)
				if err := rows.Scan(&tenant, &queried, &rec.Version, &body, &shared); err != nil {
					return fmt.Errorf("memory sqlite: patterns: %w", err)
				}
				if err := json.Unmarshal([]byte(body), &rec.Pattern); err != nil {
					return fmt.Errorf("memory sqlite: pattern body: %w", err)
				}
				rec.Tenant, rec.LastQueriedAt = tenant, fromNanos(queried)
				if seen[rec.ID] {
					continue
				}
				seen[rec.ID] = true
				out = append(out, &rec)
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: patterns: %w", err)
		}
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

// GetPatterns reads many patterns, in the order of ids; missing ones are
// left out.
func (s *Store) GetPatterns(ctx context.Context, tenant string, ids []string) ([]*store.PatternRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	found, err := s.ownOrGranted(ctx, tenant, ids)
	if err != nil {
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

// ListPatterns lists by updated_at, then id, then owner, all descending.
func (s *Store) ListPatterns(ctx context.Context, tenant string, f store.PatternFilter, p store.Page) ([]*store.PatternRecord, string, error) {
	size := pageSize(p)
	c, err := decodeCursor(p.Token)
	if err != nil {
		return nil, "", err
	}
	cond := ``
	var condArgs []any
	if f.TaskType != "" {
		cond += ` AND p.task_type = ?`
		condArgs = append(condArgs, f.TaskType)
	}
	if c != nil {
		cond += ` AND (p.updated_at < ? OR (p.updated_at = ? AND (p.id < ? OR (p.id = ? AND p.tenant < ?))))`
		condArgs = append(condArgs, c.N, c.N, c.I, c.I, c.K)
	}
	q := `SELECT ` + fullCols + `, p.updated_at, p.id FROM patterns p WHERE p.tenant = ?` + cond
	args := append([]any{tenant}, condArgs...)
	if f.IncludeShared {
		q += ` UNION ALL SELECT ` + fullCols + `, p.updated_at, p.id FROM pattern_grants g JOIN patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
			WHERE g.grantee = ? AND g.owner <> ?` + cond
		args = append(args, tenant, tenant)
		args = append(args, condArgs...)
	}
	q += ` ORDER BY 5 DESC, 6 DESC, 1 DESC LIMIT ?`
	args = append(args, size+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("memory sqlite: list patterns: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []*store.PatternRecord
	var last cursor
	for rows.Next() {
		var (
			rec     store.PatternRecord
			owner   string
			queried int64
			body    string
			upd     int64
			id      string
		)
		if err := rows.Scan(&owner, &queried, &rec.Version, &body, &upd, &id); err != nil {
			return nil, "", fmt.Errorf("memory sqlite: list patterns: %w", err)
		}
		if len(out) == size {
			return out, encodeCursor(last), nil
		}
		if err := json.Unmarshal([]byte(body), &rec.Pattern); err != nil {
			return nil, "", fmt.Errorf("memory sqlite: pattern body: %w", err)
		}
		rec.Tenant, rec.LastQueriedAt = owner, fromNanos(queried)
		out = append(out, &rec)
		last = cursor{K: owner, N: upd, I: id}
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("memory sqlite: list patterns: %w", err)
	}
	return out, "", nil
}

// UpdatePattern edits one of the tenant's own patterns.
func (s *Store) UpdatePattern(ctx context.Context, tenant, id string, expectedVersion int64, edit func(p *patterns.Pattern) error) (*store.PatternRecord, error) {
	if edit == nil {
		return nil, errors.New("memory sqlite: UpdatePattern needs an edit function")
	}
	var out *store.PatternRecord
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rec, err := scanFull(tx.QueryRowContext(ctx, `SELECT `+fullCols+` FROM patterns p WHERE p.tenant = ? AND p.id = ?`, tenant, id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("pattern", id)
		}
		if err != nil {
			return fmt.Errorf("memory sqlite: pattern: %w", err)
		}
		if expectedVersion != 0 && expectedVersion != rec.Version {
			return fmt.Errorf("%w: pattern %q is at version %d, not %d", store.ErrConflict, id, rec.Version, expectedVersion)
		}
		if err := edit(&rec.Pattern); err != nil {
			return err
		}
		// The identity is the store's, whatever edit did.
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM patterns WHERE tenant = ? AND id = ?`, tenant, id)
		if err != nil {
			return fmt.Errorf("memory sqlite: delete pattern: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("pattern", id)
		}
		for _, q := range []string{
			`DELETE FROM pattern_entities WHERE tenant = ? AND pattern_id = ?`,
			`DELETE FROM pattern_grants WHERE owner = ? AND pattern_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, tenant, id); err != nil {
				return fmt.Errorf("memory sqlite: delete pattern: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.eraseFreed(ctx)
	return nil
}

// signatureKey is a signature's identity: the task type and its sorted,
// unique, lower-cased entity types.
func signatureKey(sig patterns.Signature) (string, patterns.Signature) {
	types := make([]string, 0, len(sig.EntityTypes))
	for _, t := range sig.EntityTypes {
		if t = key(t); t != "" {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	types = slices.Compact(types)
	norm := patterns.Signature{TaskType: sig.TaskType, EntityTypes: types}
	if len(types) == 0 {
		norm.EntityTypes = nil
	}
	return sig.TaskType + "\x1f" + strings.Join(types, "\x1f"), norm
}

// SuppressSignature suppresses a signature until the given time.
func (s *Store) SuppressSignature(ctx context.Context, tenant string, sig patterns.Signature, until time.Time) error {
	k, norm := signatureKey(sig)
	b, err := json.Marshal(norm)
	if err != nil {
		return fmt.Errorf("memory sqlite: suppress: %w", err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO pattern_suppressions (tenant, sig_key, signature, until) VALUES (?, ?, ?, ?)
			ON CONFLICT (tenant, sig_key) DO UPDATE SET signature = excluded.signature, until = excluded.until`,
			tenant, k, string(b), nanos(utc(until))); err != nil {
			return fmt.Errorf("memory sqlite: suppress: %w", err)
		}
		return nil
	})
}

// SuppressedSignatures lists the tenant's signatures suppressed at now.
func (s *Store) SuppressedSignatures(ctx context.Context, tenant string, now time.Time) ([]patterns.Signature, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT signature FROM pattern_suppressions WHERE tenant = ? AND until > ? ORDER BY sig_key`,
		tenant, nanos(utc(now)))
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: suppressed: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []patterns.Signature
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("memory sqlite: suppressed: %w", err)
		}
		var sig patterns.Signature
		if err := json.Unmarshal([]byte(raw), &sig); err != nil {
			return nil, fmt.Errorf("memory sqlite: suppressed: %w", err)
		}
		out = append(out, sig)
	}
	return out, rows.Err()
}

// GrantPattern shares one of the owner's patterns; a second grant returns
// the first.
func (s *Store) GrantPattern(ctx context.Context, g store.PatternGrant) (store.PatternGrant, error) {
	if g.Owner == "" || g.Grantee == "" || g.PatternID == "" {
		return store.PatternGrant{}, errors.New("memory sqlite: a grant needs its owner, pattern and grantee")
	}
	if g.Owner == g.Grantee {
		return store.PatternGrant{}, errors.New("memory sqlite: a pattern cannot be granted to its owner")
	}
	at := utc(g.CreatedAt)
	if at.IsZero() {
		at = s.o.Now().UTC()
	}
	var out store.PatternGrant
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM patterns WHERE tenant = ? AND id = ?`, g.Owner, g.PatternID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("pattern", g.PatternID)
		}
		if err != nil {
			return fmt.Errorf("memory sqlite: grant: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pattern_grants (owner, pattern_id, grantee, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, g.Owner, g.PatternID, g.Grantee, nanos(at)); err != nil {
			return fmt.Errorf("memory sqlite: grant: %w", err)
		}
		var created int64
		if err := tx.QueryRowContext(ctx, `SELECT created_at FROM pattern_grants WHERE owner = ? AND pattern_id = ? AND grantee = ?`,
			g.Owner, g.PatternID, g.Grantee).Scan(&created); err != nil {
			return fmt.Errorf("memory sqlite: grant: %w", err)
		}
		out = store.PatternGrant{Owner: g.Owner, PatternID: g.PatternID, Grantee: g.Grantee, CreatedAt: fromNanos(created)}
		return nil
	})
	return out, err
}

// RevokePatternGrant removes a grant.
func (s *Store) RevokePatternGrant(ctx context.Context, owner, patternID, grantee string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM pattern_grants WHERE owner = ? AND pattern_id = ? AND grantee = ?`, owner, patternID, grantee)
		if err != nil {
			return fmt.Errorf("memory sqlite: revoke: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("grant", patternID+" to "+grantee)
		}
		return nil
	})
}

// ListPatternGrants lists the owner's grants, newest first.
func (s *Store) ListPatternGrants(ctx context.Context, owner, patternID string, limit int) ([]store.PatternGrant, error) {
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, maxGrantList)
	q := `SELECT pattern_id, grantee, created_at FROM pattern_grants WHERE owner = ?`
	args := []any{owner}
	if patternID != "" {
		q += ` AND pattern_id = ?`
		args = append(args, patternID)
	}
	q += ` ORDER BY created_at DESC, pattern_id, grantee LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: grants: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []store.PatternGrant
	for rows.Next() {
		g := store.PatternGrant{Owner: owner}
		var at int64
		if err := rows.Scan(&g.PatternID, &g.Grantee, &at); err != nil {
			return nil, fmt.Errorf("memory sqlite: grants: %w", err)
		}
		g.CreatedAt = fromNanos(at)
		out = append(out, g)
	}
	return out, rows.Err()
}

// GetTrace reads a recorded trace.
func (s *Store) GetTrace(ctx context.Context, tenant, runID string) (*store.TraceRecord, error) {
	tr := &store.TraceRecord{Tenant: tenant, RunID: runID}
	var at int64
	var raw string
	err := s.r.QueryRowContext(ctx, `SELECT conversation_id, pattern_id, created_at, trace FROM pattern_traces
		WHERE tenant = ? AND run_id = ?`, tenant, runID).Scan(&tr.ConversationID, &tr.PatternID, &at, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("trace", runID)
	}
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: trace: %w", err)
	}
	if err := json.Unmarshal([]byte(raw), &tr.Trace); err != nil {
		return nil, fmt.Errorf("memory sqlite: trace body: %w", err)
	}
	tr.CreatedAt = fromNanos(at)
	return tr, nil
}

// PruneTraces deletes every tenant's traces recorded before t.
func (s *Store) PruneTraces(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM pattern_traces WHERE created_at < ?`, nanos(utc(before)))
		if err != nil {
			return fmt.Errorf("memory sqlite: prune traces: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.eraseFreed(ctx)
	}
	return int(n), nil
}

// deleteConversationTraces deletes a conversation's traces inside tx.
func deleteConversationTraces(ctx context.Context, tx *sql.Tx, tenant, conversationID string) (int, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM pattern_traces WHERE tenant = ? AND conversation_id = ?`, tenant, conversationID)
	if err != nil {
		return 0, fmt.Errorf("memory sqlite: delete traces: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
