// Package store defines the memory service's storage: one interface with
// two implementations, SQLite (store/sqlite, the embedded default) and
// PostgreSQL (store/postgres, scale-out), both held to the conformance
// suite in store/storetest. Every method takes the tenant and touches only
// that tenant's rows: isolation is the store's job, not its callers'.
package store

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ErrNotFound is returned (wrapped) when a tenant has no such row.
var ErrNotFound = errors.New("memory store: not found")

// ErrConflict is returned (wrapped) when a write loses a race it cannot
// resolve by itself (an episode claimed by another replica, for example).
var ErrConflict = errors.New("memory store: conflict")

// MaxFindNames bounds the names of one FindEntitiesByNames call.
const MaxFindNames = 256

// NameKey is the key FindEntitiesByNames answers a name under: the name
// without surrounding space, Unicode-lower-cased.
func NameKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// EpisodeSource and EpisodeStatus mirror the proto enums' numbers.
type EpisodeSource int32

// Episode sources.
const (
	SourceRun   EpisodeSource = 1
	SourceUser  EpisodeSource = 2
	SourceAgent EpisodeSource = 3
)

// EpisodeStatus is where an episode's processing stands.
type EpisodeStatus int32

// Episode states.
const (
	StatusPending    EpisodeStatus = 1
	StatusProcessing EpisodeStatus = 2
	StatusSynced     EpisodeStatus = 3
	StatusFailed     EpisodeStatus = 4
)

// Episode is one unit of remembered text (an Episodic node).
type Episode struct {
	ID             string
	Tenant         string
	Source         EpisodeSource
	Content        string // already scrubbed
	ConversationID string
	RunID          string
	IdempotencyKey string // unique per tenant when not empty
	CreatedAt      time.Time
	Status         EpisodeStatus
	Error          string
	Attempts       int
	Redactions     int
	ProcessedAt    time.Time // zero until synced or failed
	EntityIDs      []string  // MENTIONS edges, filled by reads
}

// Entity is an Entity node. Embedding is L2-normalised.
type Entity struct {
	ID           string
	Tenant       string
	Name         string
	Type         string
	Summary      string
	Attributes   map[string]string
	Aliases      []string
	Embedding    []float32
	MentionCount int
	CommunityID  string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Relation is a RELATES_TO edge between two entities of one tenant.
type Relation struct {
	ID           string
	Tenant       string
	SourceID     string
	TargetID     string
	Type         string
	Fact         string
	Weight       float64
	EpisodeCount int
	UpdatedAt    time.Time
}

// Community is a Community node; its members point at it (BELONGS_TO).
type Community struct {
	ID          string
	Tenant      string
	Name        string
	Summary     string
	MemberIDs   []string
	MemberCount int
	UpdatedAt   time.Time
}

// Settings are a tenant's memory switches.
type Settings struct {
	CaptureRuns                  bool
	ToolsEnabled                 bool
	CaptureDisabledConversations []string
	// PatternsEnabled: interaction patterns are learned and offered. A
	// stored row written before the field existed reads as true.
	PatternsEnabled               bool
	PatternsDisabledConversations []string
}

// DefaultSettings are the switches of a tenant that never set any.
func DefaultSettings() Settings {
	return Settings{CaptureRuns: true, ToolsEnabled: true, PatternsEnabled: true}
}

// ExtractedEntity is an entity an episode mentions, resolved by the caller
// (deduplication) to an existing entity (MergeInto set) or a new one.
type ExtractedEntity struct {
	// MergeInto is the id of the existing entity this one is; empty for a
	// new entity. A merge adds Name to the aliases when it differs, merges
	// attributes (new values win), and replaces the summary when Summary is
	// not empty.
	MergeInto  string
	Name       string
	Type       string
	Summary    string
	Attributes map[string]string
	Embedding  []float32
}

// ExtractedRelation is a relation between two of the episode's entities,
// by their index in IngestResult.Entities.
type ExtractedRelation struct {
	Source, Target int
	Type           string
	Fact           string
	Confidence     float64 // in (0, 1]
}

// IngestResult is what extraction made of one episode.
type IngestResult struct {
	Entities  []ExtractedEntity
	Relations []ExtractedRelation
}

// IngestOutcome is what CompleteEpisode wrote.
type IngestOutcome struct {
	EntityIDs      []string // in the order of IngestResult.Entities
	CreatedIDs     []string // the subset that are new entities
	RelationIDs    []string
	ChangedSummary []string // entities whose summary or attributes changed
}

// Page is a listing's page.
type Page struct {
	Size  int    // 1..500
	Token string // opaque, from the previous page
}

// EpisodeFilter narrows ListEpisodes.
type EpisodeFilter struct {
	ConversationID string
	Status         EpisodeStatus // 0: any
}

// EntityFilter narrows ListEntities.
type EntityFilter struct {
	Type       string
	NamePrefix string // case-insensitive
}

// Scored is a search channel's hit: an entity id with the channel's score,
// best first.
type Scored struct {
	ID    string
	Score float64
}

// GraphHit is an entity reached by traversal from seed entities.
type GraphHit struct {
	ID     string
	Hops   int     // 1..depth
	Weight float64 // product of the edge weights along the best path
}

// Graph is a bounded neighbourhood.
type Graph struct {
	Entities    []*Entity // the centre first
	Relations   []*Relation
	Communities []*Community
	Truncated   bool
}

// Stats counts a tenant's memory.
type Stats struct {
	Episodes, EpisodesPending, EpisodesFailed int64
	Entities, Relations, Communities          int64
	CommunitiesUpdatedAt                      time.Time
}

// DeleteOutcome says what a delete took with it.
type DeleteOutcome struct {
	Episodes, Entities, Relations int
	// Traces are the interaction traces of the conversation
	// (DeleteConversation only).
	Traces int
}

// Store is a tenant-isolated knowledge-graph store. Implementations are
// safe for concurrent use by many goroutines and many replicas sharing one
// database.
type Store interface {
	// Backend names the implementation (`sqlite`, `postgres`,
	// `postgres+pgvector`).
	Backend() string

	// CreateEpisode stores a pending episode (ID and CreatedAt set by the
	// caller). With an IdempotencyKey already used by the tenant it stores
	// nothing and returns the first episode and false.
	CreateEpisode(ctx context.Context, ep *Episode) (*Episode, bool, error)
	GetEpisode(ctx context.Context, tenant, id string) (*Episode, error)
	// ListEpisodes is newest first.
	ListEpisodes(ctx context.Context, tenant string, f EpisodeFilter, p Page) ([]*Episode, string, error)
	// ClaimEpisodes leases up to limit pending episodes of any tenant (or
	// processing ones whose lease ran out) to owner, oldest first, marking
	// them processing and counting an attempt. Two replicas never hold the
	// same episode at once.
	ClaimEpisodes(ctx context.Context, owner string, limit int, lease time.Duration) ([]*Episode, error)
	// CompleteEpisode writes an episode's entities, MENTIONS and RELATES_TO
	// edges and marks it synced, in one transaction; ErrConflict when owner
	// no longer holds its lease.
	CompleteEpisode(ctx context.Context, tenant, id, owner string, r IngestResult) (IngestOutcome, error)
	// FailEpisode releases a claimed episode: back to pending when final is
	// false, failed with msg when true.
	FailEpisode(ctx context.Context, tenant, id, owner, msg string, final bool) error
	// DeleteEpisode removes the episode, its mentions, and the entities and
	// relations no remaining episode supports.
	DeleteEpisode(ctx context.Context, tenant, id string) (DeleteOutcome, error)
	// DeleteConversation does DeleteEpisode for every episode of a
	// conversation, and deletes the conversation's interaction traces.
	DeleteConversation(ctx context.Context, tenant, conversationID string) (DeleteOutcome, error)

	GetEntity(ctx context.Context, tenant, id string) (*Entity, error)
	// GetEntities reads many; missing ids are left out.
	GetEntities(ctx context.Context, tenant string, ids []string) ([]*Entity, error)
	// FindEntity finds an entity by exact name or alias
	// (case-insensitive) and type (any type when typ is empty).
	FindEntity(ctx context.Context, tenant, name, typ string) (*Entity, error)
	// FindEntitiesByNames is FindEntity (any type) for many names in one
	// round trip: for each name, the entity FindEntity(tenant, name, "")
	// returns, keyed by NameKey(name). Names no entity has are absent, as
	// are empty ones; duplicates (by NameKey) are looked up once. More than
	// MaxFindNames names is an error.
	FindEntitiesByNames(ctx context.Context, tenant string, names []string) (map[string]*Entity, error)
	// ListEntities is by name.
	ListEntities(ctx context.Context, tenant string, f EntityFilter, p Page) ([]*Entity, string, error)
	DeleteEntity(ctx context.Context, tenant, id string) (DeleteOutcome, error)
	// Relations of the entities, either direction, strongest first, at
	// most limit per entity.
	Relations(ctx context.Context, tenant string, entityIDs []string, limit int) ([]*Relation, error)
	// EntityEpisodes is the newest episodes mentioning the entity.
	EntityEpisodes(ctx context.Context, tenant, entityID string, limit int) ([]*Episode, error)

	// VectorSearch is the k entities nearest to vec (cosine), best first.
	VectorSearch(ctx context.Context, tenant string, vec []float32, k int, types []string) ([]Scored, error)
	// KeywordSearch is full-text search over names, aliases, summaries and
	// attributes, best first.
	KeywordSearch(ctx context.Context, tenant, query string, k int, types []string) ([]Scored, error)
	// Traverse walks RELATES_TO edges (either direction) up to depth hops
	// from the seeds, returning at most limit entities other than the seeds,
	// best path weight first.
	Traverse(ctx context.Context, tenant string, seeds []string, depth, limit int) ([]GraphHit, error)
	// Neighbourhood is the subgraph around centre, bounded in depth and
	// node count.
	Neighbourhood(ctx context.Context, tenant, centre string, depth, maxNodes int) (*Graph, error)

	// Edges streams every RELATES_TO edge of the tenant (community
	// detection); fn's error stops the walk.
	Edges(ctx context.Context, tenant string, fn func(r *Relation) error) error
	// ReplaceCommunities replaces the tenant's communities and memberships
	// in one transaction.
	ReplaceCommunities(ctx context.Context, tenant string, cs []*Community) error
	// SetCommunitySummary writes one community's name and summary.
	SetCommunitySummary(ctx context.Context, tenant, id, name, summary string) error
	GetCommunities(ctx context.Context, tenant string, ids []string) ([]*Community, error)
	// TenantsChangedSince lists tenants whose graph changed after t (the
	// community updater's work list).
	TenantsChangedSince(ctx context.Context, t time.Time) ([]string, error)

	Stats(ctx context.Context, tenant string) (Stats, error)
	GetSettings(ctx context.Context, tenant string) (Settings, error)
	PutSettings(ctx context.Context, tenant string, s Settings) error

	PatternStore

	Close() error
}

// VectorWarmer is a Store that searches vectors in process and can load a
// tenant's vectors ahead of its first search (which otherwise pays for the
// load: seconds for a tenant of 100,000 entities).
type VectorWarmer interface {
	WarmVectors(ctx context.Context, tenant string) error
}
