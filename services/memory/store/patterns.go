package store

import (
	"context"
	"time"

	"github.com/baagent/baagent/core/patterns"
)

// PatternRecord is a stored interaction pattern: the rules' pattern (its
// Tenant is the owner) and the version every write increments.
type PatternRecord struct {
	patterns.Pattern
	Version int64
}

// TraceRecord is a recorded interaction trace (already scrubbed). It is
// stored once per (tenant, run id).
type TraceRecord struct {
	Tenant         string
	RunID          string
	ConversationID string
	// PatternID is the pattern the trace created or evolved; set by
	// LearnTrace from what learn returned.
	PatternID string
	Trace     patterns.Trace
	CreatedAt time.Time
}

// LearnFunc decides what a trace does to a tenant's patterns: given the
// candidates (see LearnTrace), it returns the pattern to write, changed in
// place or new, and whether it is new; nil when the trace changes nothing.
// It must not keep the candidates.
type LearnFunc func(candidates []*PatternRecord) (changed *PatternRecord, created bool, err error)

// LearnOutcome is what LearnTrace did.
type LearnOutcome struct {
	PatternID string
	Created   bool
	// Duplicate: the run's trace was recorded before; learn was not called
	// and nothing changed. PatternID is the first recording's.
	Duplicate bool
}

// PatternFilter narrows ListPatterns.
type PatternFilter struct {
	TaskType string
	// IncludeShared adds the patterns other tenants granted to this one.
	IncludeShared bool
}

// PatternGrant shares one pattern with another tenant, read-only.
type PatternGrant struct {
	Owner     string
	PatternID string
	Grantee   string
	CreatedAt time.Time
}

// PatternStore keeps interaction patterns, their traces, grants and
// suppressed signatures. Like the rest of Store, every method touches only
// the tenant's rows, plus, for reads only, patterns granted to it.
type PatternStore interface {
	// LearnTrace records tr once per (tenant, run id) and, in the same
	// transaction and serialised with every other LearnTrace of the tenant
	// (across replicas), calls learn with the tenant's own patterns whose
	// task type is taskType, plus the pattern used when it is not empty and
	// the tenant's (whatever its task type), and writes what learn returns:
	// inserted when created (Version 1), otherwise updated (Version + 1).
	// The candidates are whole patterns. A run id recorded before returns
	// Duplicate without calling learn. An error from learn rolls back.
	LearnTrace(ctx context.Context, tr *TraceRecord, taskType, used string, learn LearnFunc) (LearnOutcome, error)

	// PatternCandidates returns what retrieval scores: the tenant's
	// patterns whose task type is taskType or whose entities include one of
	// entities (lower-cased), and the patterns granted to the tenant that
	// qualify likewise, at most limit, most recently updated first. Only
	// the fields scoring and the quality gates read need be filled (ID,
	// Tenant, Name, Signature, Entities, the counters, SuccessRate and the
	// times) plus Version.
	PatternCandidates(ctx context.Context, tenant, taskType string, entities []string, limit int) ([]*PatternRecord, error)
	// PatternHeads returns the scoring heads (the fields PatternCandidates
	// fills) of the tenant's own patterns whose UpdatedAt is after since,
	// and of the patterns granted to the tenant that were updated or
	// granted after since; with the zero since, all of them. Ordered by
	// UpdatedAt (then id, then owner), at most limit. Every write of a
	// pattern's content sets its UpdatedAt (TouchPatterns does not), so a
	// cache of heads stays fresh by asking for what changed since its
	// last read; deletions and revoked grants are not reported.
	PatternHeads(ctx context.Context, tenant string, since time.Time, limit int) ([]*PatternRecord, error)
	// TouchPatterns sets LastQueriedAt to at on the tenant's own patterns
	// among ids (others' ids are ignored), without changing their version.
	TouchPatterns(ctx context.Context, tenant string, ids []string, at time.Time) error

	// GetPattern reads a pattern the tenant owns or was granted;
	// ErrNotFound otherwise.
	GetPattern(ctx context.Context, tenant, id string) (*PatternRecord, error)
	// GetPatterns reads many (own or granted); missing ids are left out.
	GetPatterns(ctx context.Context, tenant string, ids []string) ([]*PatternRecord, error)
	// ListPatterns is most recently updated first (then by id).
	ListPatterns(ctx context.Context, tenant string, f PatternFilter, p Page) ([]*PatternRecord, string, error)
	// UpdatePattern applies edit to one of the tenant's own patterns in a
	// transaction and writes it with Version + 1. With expectedVersion
	// not 0 and different from the stored version it returns ErrConflict
	// without calling edit. ErrNotFound for another tenant's pattern. An
	// error from edit rolls back and is returned.
	UpdatePattern(ctx context.Context, tenant, id string, expectedVersion int64, edit func(p *patterns.Pattern) error) (*PatternRecord, error)
	// DeletePattern removes one of the tenant's own patterns and its
	// grants; ErrNotFound when it has none such.
	DeletePattern(ctx context.Context, tenant, id string) error

	// SuppressSignature keeps a signature from being learned again until
	// the given time (a pattern marked useless); a later call replaces it.
	SuppressSignature(ctx context.Context, tenant string, sig patterns.Signature, until time.Time) error
	// SuppressedSignatures lists the tenant's signatures suppressed at now.
	SuppressedSignatures(ctx context.Context, tenant string, now time.Time) ([]patterns.Signature, error)

	// GrantPattern shares one of the owner's patterns with the grantee;
	// granting again returns the first grant. ErrNotFound when the owner
	// has no such pattern.
	GrantPattern(ctx context.Context, g PatternGrant) (PatternGrant, error)
	// RevokePatternGrant removes a grant; ErrNotFound when there is none.
	RevokePatternGrant(ctx context.Context, owner, patternID, grantee string) error
	// ListPatternGrants lists the owner's grants (of one pattern when
	// patternID is not empty), newest first, at most limit.
	ListPatternGrants(ctx context.Context, owner, patternID string, limit int) ([]PatternGrant, error)

	// GetTrace reads a recorded trace by run id; ErrNotFound otherwise.
	GetTrace(ctx context.Context, tenant, runID string) (*TraceRecord, error)
	// PruneTraces deletes every tenant's traces recorded before t (the
	// traces only guard against learning a run twice and are kept for a
	// while for inspection) and returns how many went.
	PruneTraces(ctx context.Context, before time.Time) (int, error)
}
