package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationLock is the advisory lock key under which migrations run, so
// that replicas starting together apply each migration once ("bamemory" in
// ASCII, as an int64).
const migrationLock int64 = 0x62616d656d6f7279

// migrations are applied in order; each runs in one transaction and is
// recorded in memory_schema_version. Never edit one that has shipped:
// append a new one.
//
// Every primary key and index starts with the tenant column, except the
// claim queue's partial index and the tenants table's change time, which
// serve the cross-tenant ClaimEpisodes and TenantsChangedSince, and the
// traces' creation time, which serves the cross-tenant PruneTraces (the
// pattern grants start with the owner or the grantee, both tenants). The
// GIN indexes of tenant-prefixed keys (the patterns' entities, the
// entities' aliases) have no tenant column; each of their keys starts with
// the tenant.
var migrations = []string{
	// 1: the graph.
	`
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- Unstemmed words without English stop words: "the" must not match half
-- of a tenant's entities.
CREATE TEXT SEARCH DICTIONARY memory_simple_dict (TEMPLATE = pg_catalog.simple, STOPWORDS = english);
CREATE TEXT SEARCH CONFIGURATION memory_simple (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION memory_simple ALTER MAPPING FOR
	asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part, hword_numpart
	WITH memory_simple_dict;

CREATE TABLE memory_tenants (
	tenant                 text PRIMARY KEY,
	seq                    bigint NOT NULL DEFAULT 0,
	tomb_floor             bigint NOT NULL DEFAULT 0,
	graph_changed_at       timestamptz,
	communities_updated_at timestamptz
);

CREATE TABLE memory_settings (
	tenant                 text PRIMARY KEY,
	capture_runs           boolean NOT NULL,
	tools_enabled          boolean NOT NULL,
	disabled_conversations text[] NOT NULL DEFAULT '{}'
);

CREATE TABLE memory_episodes (
	tenant          text NOT NULL,
	id              text NOT NULL,
	source          integer NOT NULL,
	content         text NOT NULL,
	conversation_id text NOT NULL DEFAULT '',
	run_id          text NOT NULL DEFAULT '',
	idempotency_key text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL,
	status          integer NOT NULL,
	error           text NOT NULL DEFAULT '',
	attempts        integer NOT NULL DEFAULT 0,
	redactions      integer NOT NULL DEFAULT 0,
	processed_at    timestamptz,
	lease_owner     text NOT NULL DEFAULT '',
	lease_until     timestamptz,
	PRIMARY KEY (tenant, id)
);
CREATE UNIQUE INDEX memory_episodes_idem ON memory_episodes (tenant, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX memory_episodes_newest ON memory_episodes (tenant, created_at DESC, id DESC);
CREATE INDEX memory_episodes_conversation ON memory_episodes (tenant, conversation_id, created_at DESC, id DESC);
CREATE INDEX memory_episodes_claim ON memory_episodes (created_at, id) WHERE status IN (1, 2);

CREATE TABLE memory_entities (
	tenant        text NOT NULL,
	id            text NOT NULL,
	name          text NOT NULL,
	type          text NOT NULL,
	summary       text NOT NULL DEFAULT '',
	attributes    jsonb NOT NULL DEFAULT '{}',
	aliases       text[] NOT NULL DEFAULT '{}',
	aliases_lower text[] NOT NULL DEFAULT '{}',
	alias_text    text NOT NULL DEFAULT '',
	attr_text     text NOT NULL DEFAULT '',
	embedding     real[],
	mention_count integer NOT NULL DEFAULT 0,
	community_id  text NOT NULL DEFAULT '',
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL,
	seq           bigint NOT NULL,
	-- Hyphens are indexed as spaces: the default parser reads "ORD-1002"
	-- as the word "ord" and the number "-1002", and "2025-01-03" as
	-- "2025", "-01" and "-03", which a query for the code or the date (its
	-- words as a phrase) would never match.
	tsv tsvector GENERATED ALWAYS AS (
		setweight(to_tsvector('memory_simple'::regconfig, translate(name || ' ' || alias_text, '-', ' ')), 'A') ||
		setweight(to_tsvector('english'::regconfig, translate(name || ' ' || alias_text, '-', ' ')), 'A') ||
		setweight(to_tsvector('memory_simple'::regconfig, translate(summary || ' ' || attr_text, '-', ' ')), 'B') ||
		setweight(to_tsvector('english'::regconfig, translate(summary || ' ' || attr_text, '-', ' ')), 'B')
	) STORED,
	PRIMARY KEY (tenant, id)
);
CREATE UNIQUE INDEX memory_entities_name ON memory_entities (tenant, type, lower(name));
CREATE INDEX memory_entities_lname ON memory_entities (tenant, lower(name), id);
CREATE INDEX memory_entities_aliases ON memory_entities USING gin (tenant, aliases_lower);
CREATE INDEX memory_entities_tsv ON memory_entities USING gin (tenant, tsv);
CREATE INDEX memory_entities_seq ON memory_entities (tenant, seq);
CREATE INDEX memory_entities_community ON memory_entities (tenant, community_id) WHERE community_id <> '';

CREATE TABLE memory_entity_tombstones (
	tenant text NOT NULL,
	id     text NOT NULL,
	seq    bigint NOT NULL,
	PRIMARY KEY (tenant, id)
);
CREATE INDEX memory_entity_tombstones_seq ON memory_entity_tombstones (tenant, seq);

CREATE TABLE memory_mentions (
	tenant     text NOT NULL,
	episode_id text NOT NULL,
	entity_id  text NOT NULL,
	pos        integer NOT NULL,
	PRIMARY KEY (tenant, episode_id, entity_id)
);
CREATE INDEX memory_mentions_entity ON memory_mentions (tenant, entity_id, episode_id);

CREATE TABLE memory_relations (
	tenant        text NOT NULL,
	id            text NOT NULL,
	source_id     text NOT NULL,
	target_id     text NOT NULL,
	type          text NOT NULL,
	fact          text NOT NULL DEFAULT '',
	weight        double precision NOT NULL,
	episode_count integer NOT NULL DEFAULT 0,
	updated_at    timestamptz NOT NULL,
	PRIMARY KEY (tenant, id)
);
CREATE UNIQUE INDEX memory_relations_key ON memory_relations (tenant, source_id, target_id, type);
CREATE INDEX memory_relations_source ON memory_relations (tenant, source_id, weight DESC);
CREATE INDEX memory_relations_target ON memory_relations (tenant, target_id, weight DESC);

CREATE TABLE memory_relation_episodes (
	tenant      text NOT NULL,
	relation_id text NOT NULL,
	episode_id  text NOT NULL,
	confidence  double precision NOT NULL,
	PRIMARY KEY (tenant, relation_id, episode_id)
);
CREATE INDEX memory_relation_episodes_episode ON memory_relation_episodes (tenant, episode_id);

CREATE TABLE memory_communities (
	tenant       text NOT NULL,
	id           text NOT NULL,
	name         text NOT NULL DEFAULT '',
	summary      text NOT NULL DEFAULT '',
	member_count integer NOT NULL DEFAULT 0,
	updated_at   timestamptz NOT NULL,
	PRIMARY KEY (tenant, id)
);
`,
	// 2: interaction patterns, their traces, grants and suppressions, and
	// the pattern switches of the settings (a row written before them
	// reads the defaults: enabled, no conversation excluded).
	`
ALTER TABLE memory_settings
	ADD COLUMN patterns_enabled boolean NOT NULL DEFAULT true,
	ADD COLUMN patterns_disabled_conversations text[] NOT NULL DEFAULT '{}';

-- The scoring fields as columns (candidates read only those), the whole
-- pattern in body. last_queried_at and version are the truth; body's
-- copies of them are not read. entity_keys are the lower-cased
-- entities; tenant_keys the same prefixed with the tenant and U+001F,
-- which the GIN index serves to "shares an entity" (tenant_keys && $n):
-- a GIN index on (tenant, entity_keys) intersects the tenant's whole
-- posting list with the entities' on every query.
CREATE TABLE memory_patterns (
	tenant               text NOT NULL,
	id                   text NOT NULL,
	task_type            text NOT NULL,
	entity_types         text[] NOT NULL DEFAULT '{}',
	entities             text[] NOT NULL DEFAULT '{}',
	entity_keys          text[] NOT NULL DEFAULT '{}',
	tenant_keys          text[] NOT NULL DEFAULT '{}',
	name                 text NOT NULL DEFAULT '',
	usage_count          integer NOT NULL DEFAULT 0,
	success_count        integer NOT NULL DEFAULT 0,
	failure_count        integer NOT NULL DEFAULT 0,
	consecutive_failures integer NOT NULL DEFAULT 0,
	success_rate         double precision NOT NULL DEFAULT 0,
	avg_duration_ms      bigint NOT NULL DEFAULT 0,
	-- the zero time is stored as 0001-01-01 UTC
	created_at           timestamptz NOT NULL,
	updated_at           timestamptz NOT NULL,
	last_queried_at      timestamptz NOT NULL,
	last_used_at         timestamptz NOT NULL,
	version              bigint NOT NULL,
	body                 jsonb NOT NULL,
	PRIMARY KEY (tenant, id)
);
CREATE INDEX memory_patterns_task ON memory_patterns (tenant, task_type, updated_at DESC);
CREATE INDEX memory_patterns_updated ON memory_patterns (tenant, updated_at DESC, id DESC);
-- fastupdate off: a pending list (unsorted, scanned by every query until
-- a vacuum merges it) made lookups ten times slower; patterns are written
-- once per run, not often enough for it to pay.
CREATE INDEX memory_patterns_entities ON memory_patterns USING gin (tenant_keys) WITH (fastupdate = off);

CREATE TABLE memory_pattern_traces (
	tenant          text NOT NULL,
	run_id          text NOT NULL,
	conversation_id text NOT NULL DEFAULT '',
	pattern_id      text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL,
	trace           jsonb NOT NULL,
	PRIMARY KEY (tenant, run_id)
);
CREATE INDEX memory_pattern_traces_created ON memory_pattern_traces (created_at);
CREATE INDEX memory_pattern_traces_conversation ON memory_pattern_traces (tenant, conversation_id);

CREATE TABLE memory_pattern_grants (
	owner      text NOT NULL,
	pattern_id text NOT NULL,
	grantee    text NOT NULL,
	created_at timestamptz NOT NULL,
	PRIMARY KEY (owner, pattern_id, grantee)
);
CREATE INDEX memory_pattern_grants_grantee ON memory_pattern_grants (grantee, pattern_id);
CREATE INDEX memory_pattern_grants_newest ON memory_pattern_grants (owner, created_at DESC);

CREATE TABLE memory_pattern_suppressions (
	tenant    text NOT NULL,
	sig_key   text NOT NULL,
	signature jsonb NOT NULL,
	until     timestamptz NOT NULL,
	PRIMARY KEY (tenant, sig_key)
);
`,
	// 3: aliases keyed by tenant, for FindEntitiesByNames. The (tenant,
	// aliases_lower) GIN index checks every entity of the tenant once per
	// name asked for (42 names of a 3,000-entity tenant: ~25 ms); this one
	// holds tenant U+001F alias keys, so many names are one index probe
	// (~0.3 ms), without reading other tenants' aliases.
	`
CREATE FUNCTION memory_tenant_keys(tenant text, keys text[]) RETURNS text[]
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	AS $$ SELECT coalesce(array_agg(tenant || E'\x1f' || k), '{}') FROM unnest(keys) AS k $$;
CREATE INDEX memory_entities_alias_keys ON memory_entities
	USING gin (memory_tenant_keys(tenant, aliases_lower)) WITH (fastupdate = off);
`,
}

// Migrate brings the schema up to date. It holds a session advisory lock
// while it works, so concurrent callers (replicas starting together) wait
// for each other and each migration is applied exactly once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("memory postgres: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("memory postgres: migration lock: %w", err)
	}
	defer func() {
		// On a broken connection the lock ends with the session.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS memory_schema_version (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("memory postgres: version table: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM memory_schema_version").Scan(&current); err != nil {
		return fmt.Errorf("memory postgres: schema version: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("memory postgres: schema version %d is newer than this binary's %d", current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO memory_schema_version (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return fmt.Errorf("memory postgres: migration %d: %w", v, err)
		}
	}
	return nil
}

// SchemaVersion is the newest migration this binary knows.
func SchemaVersion() int { return len(migrations) }
