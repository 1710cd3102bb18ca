// Package memory is the MemoryService: each tenant's knowledge graph of
// episodes, entities, relations and communities, with hybrid retrieval
// (see docs/concepts/memory.md).
//
// The server validates requests at the edge and keeps no state of its own
// beyond bounded in-process bookkeeping: episodes, the graph and the
// tenants' settings are in the [store.Store], shared by every replica.
// [Server.Run] runs the ingest workers (claim an episode's lease, extract,
// deduplicate, embed, write) and the community updater.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/memory/community"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.MemoryService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.MemoryService"

// Limits of the API (see memory.proto).
const (
	MaxContentBytes     = 64 << 10 // AddEpisodeRequest.content
	MaxQueryBytes       = 4 << 10  // SearchRequest.query
	MaxIdempotencyBytes = 128      // AddEpisodeRequest.idempotency_key
	MaxTopK             = 100
	DefaultTopK         = 10
	MaxRRFK             = 1000
	DefaultRRFK         = 60
	MaxDepth            = 3
	MaxGraphNodes       = 500
	DefaultGraphNodes   = 50
	MaxPageSize         = 500
	DefaultPageSize     = 50
	MaxEntityTypes      = 32  // SearchRequest.entity_types
	MaxTypeBytes        = 64  // an entity type
	MaxNamePrefixBytes  = 256 // ListEntitiesRequest.name_prefix
	// MaxDisabledConversations bounds a tenant's list of conversations
	// whose runs are not captured.
	MaxDisabledConversations = 10_000
)

// Default fusion weights.
const (
	DefaultVectorWeight  = 0.4
	DefaultKeywordWeight = 0.3
	DefaultGraphWeight   = 0.3
)

// Defaults of [Options].
const (
	DefaultWorkers            = 4
	DefaultLease              = 5 * time.Minute
	DefaultPollInterval       = 2 * time.Second
	DefaultExtractTimeout     = 90 * time.Second
	DefaultMaxAttempts        = 3
	DefaultMaxClaims          = 5
	DefaultDedupeThreshold    = 0.85
	DefaultCommunityInterval  = 5 * time.Minute
	DefaultMaxWaiters         = 4096
	DefaultMaxWait            = 5 * time.Minute
	DefaultChannelCandidates  = 50
	DefaultVectorCutoff       = 0.9
	DefaultKeywordCutoff      = 0.75
	DefaultGraphDepth         = 2
	DefaultMaxAnchorLookups   = 128
	DefaultKeywordAnchors     = 3
	DefaultEntityRelations    = 200
	DefaultEntityEpisodes     = 20
	DefaultHitRelations       = 5
	noExtractorMessage        = "no extraction model configured"
	abandonedAttemptsTemplate = "gave up after %d attempts: %s"
)

// Options configures a [Server]. Zero values take the defaults.
type Options struct {
	// Store holds the graph; required.
	Store store.Store
	// Embedder embeds entities and queries; required (offline, the
	// lexical embedding).
	Embedder embed.Embedder
	// Extractor turns episodes into entities and relations. When nil,
	// episodes are stored and then marked FAILED with "no extraction model
	// configured": they are kept (and listed) but add nothing to the graph.
	Extractor extract.Extractor
	// Summarizer names and summarises communities; nil leaves communities
	// without summaries.
	Summarizer community.Summarizer
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the baagent_memory_* collectors; nil registers
	// nothing.
	Registerer prometheus.Registerer

	// ReplicaID names this replica as the owner of the episodes it
	// leases; default hostname, pid and a random suffix.
	ReplicaID string
	// Workers is how many episodes this replica processes at once
	// (default 4).
	Workers int
	// Lease is how long a claimed episode stays this replica's; an
	// episode's processing is cut at 90% of it, so a replica that dies
	// mid-episode leaves it to another after at most Lease (default 5m).
	Lease time.Duration
	// PollInterval is how often idle workers look for episodes added
	// through other replicas or whose lease ran out (default 2s); episodes
	// added through this replica wake a worker at once.
	PollInterval time.Duration
	// ExtractTimeout bounds one extraction call (default 90s).
	ExtractTimeout time.Duration
	// MaxAttempts is how many times one claim tries a retryable failure
	// (extraction, embedding, the write) before giving the episode back
	// (default 3).
	MaxAttempts int
	// MaxClaims is how many claims an episode gets before it is marked
	// FAILED for good (default 5): a replica crash or shutdown mid-episode
	// costs one.
	MaxClaims int
	// Backoff spaces the attempts of one claim (default 1s doubling to
	// 15s, 20% jitter).
	Backoff retry.Backoff
	// DedupeThreshold is the cosine similarity from which an extracted
	// entity is merged into an existing entity of the same type (default
	// 0.85).
	DedupeThreshold float64

	// CommunityInterval is the pause between community passes (default
	// 5m); negative disables the updater.
	CommunityInterval time.Duration
	// CommunityTokensPerHour bounds the model tokens one tenant's community
	// summaries spend per clock hour on this replica (default 20000).
	CommunityTokensPerHour int

	// MaxWaiters bounds the AddEpisode calls waiting (wait=true) on this
	// replica for a notification; calls beyond it poll (default 4096).
	MaxWaiters int
	// MaxWait bounds a wait=true call without a deadline (default 5m).
	MaxWait time.Duration
	// ChannelCandidates is how many hits each search channel contributes
	// to the fusion, at least top_k (default 50).
	ChannelCandidates int
	// VectorCutoff and KeywordCutoff: in a hybrid search, the vector
	// (keyword) hits scoring below this share of their channel's best hit
	// are left out of the fusion (defaults 0.9 and 0.75, chosen on the
	// recall evaluation with the lexical embedding; negative keeps every
	// hit).
	VectorCutoff, KeywordCutoff float64
	// PatternIndex bounds the in-process index MatchPatterns scores from
	// (see PatternIndexOptions for the defaults).
	PatternIndex PatternIndexOptions
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReplicaID == "" {
		o.ReplicaID = defaultReplicaID()
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.ExtractTimeout <= 0 {
		o.ExtractTimeout = DefaultExtractTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxClaims <= 0 {
		o.MaxClaims = DefaultMaxClaims
	}
	if o.Backoff == (retry.Backoff{}) {
		o.Backoff = retry.Backoff{Initial: time.Second, Max: 15 * time.Second, Jitter: 0.2}
	}
	if o.DedupeThreshold <= 0 {
		o.DedupeThreshold = DefaultDedupeThreshold
	}
	if o.CommunityInterval == 0 {
		o.CommunityInterval = DefaultCommunityInterval
	}
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = DefaultMaxWaiters
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.ChannelCandidates <= 0 {
		o.ChannelCandidates = DefaultChannelCandidates
	}
	if o.VectorCutoff == 0 {
		o.VectorCutoff = DefaultVectorCutoff
	}
	if o.KeywordCutoff == 0 {
		o.KeywordCutoff = DefaultKeywordCutoff
	}
	return o
}

func defaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "memory"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Server implements baagentv1.MemoryServiceServer. It is safe for
// concurrent use.
type Server struct {
	baagentv1.UnimplementedMemoryServiceServer

	opts    Options
	log     *slog.Logger
	store   store.Store
	embed   embed.Embedder
	metrics *metrics
	waiters *waiters
	// wake has room for one signal: AddEpisode's "there is work" for the
	// claim loop, never blocking the RPC.
	wake chan struct{}
	// settingsMu serialises this replica's read-modify-write of settings.
	settingsMu sync.Mutex
	// budget caps the tokens of community summaries per tenant and hour.
	budget *community.Budget
	now    func() time.Time
	// patternIndex holds the tenants' pattern scoring heads.
	patternIndex *patternIndex
}

var _ baagentv1.MemoryServiceServer = (*Server)(nil)

// New returns a Server configured by opts and registers its metrics.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("memory: Options.Store is required")
	}
	if opts.Embedder == nil {
		return nil, errors.New("memory: Options.Embedder is required")
	}
	opts = opts.withDefaults()
	if opts.DedupeThreshold > 1 {
		return nil, fmt.Errorf("memory: dedupe threshold %v is above 1", opts.DedupeThreshold)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With("service", ServiceName),
		store:   opts.Store,
		embed:   opts.Embedder,
		metrics: m,
		waiters: newWaiters(opts.MaxWaiters),
		wake:    make(chan struct{}, 1),
		budget:  community.NewBudget(opts.CommunityTokensPerHour),
		now:     time.Now,
	}
	s.patternIndex = newPatternIndex(opts.PatternIndex, opts.Store, m, func() time.Time { return s.now() })
	return s, nil
}

// Register adds the MemoryService to gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterMemoryServiceServer(gs, s)
}

// Run runs the ingest workers, the community updater and the pruning of
// old interaction traces until ctx ends,
// then gives back the leases of the episodes in progress. It returns nil
// on a clean stop.
func (s *Server) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.runIngest(ctx) })
	g.Go(func() error { s.warmVectors(ctx); return nil })
	if s.opts.CommunityInterval > 0 {
		g.Go(func() error { return s.runCommunities(ctx) })
	}
	g.Go(func() error { return s.runTracePruning(ctx) })
	if s.patternIndex.enabled() {
		g.Go(func() error { return s.runPatternIndexReload(ctx) })
	}
	return g.Wait()
}

// Vector warm-up at start: the tenants whose graph changed within
// warmWindow, at most warmTenants of them.
const (
	warmWindow  = 30 * 24 * time.Hour
	warmTenants = 64
)

// warmVectors loads the vectors of recently active tenants into a store
// that searches them in process, so that their first search after a start
// does not pay for the load. It runs once, in the background; searches
// meanwhile load what they need themselves.
func (s *Server) warmVectors(ctx context.Context) {
	w, ok := s.store.(store.VectorWarmer)
	if !ok {
		return
	}
	tenants, err := s.store.TenantsChangedSince(ctx, time.Now().Add(-warmWindow))
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "memory: vector warm-up skipped", "err", err)
		}
		return
	}
	began := time.Now()
	warmed := 0
	for _, t := range tenants[:min(len(tenants), warmTenants)] {
		if err := w.WarmVectors(ctx, t); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.WarnContext(ctx, "memory: vector warm-up failed", "tenant", t, "err", err)
			continue
		}
		warmed++
	}
	s.log.InfoContext(ctx, "memory: vectors warmed", "tenants", warmed, "duration", time.Since(began))
}

// signalWork wakes the claim loop without blocking.
func (s *Server) signalWork() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// storeError turns a store error into a status: NotFound (for the tenant's
// missing rows and other tenants' alike) naming what, the context's own
// code, or Internal (logged, not shown).
func (s *Server) storeError(ctx context.Context, op, what string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s not found", what)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	s.log.ErrorContext(ctx, "memory store failed", "op", op, "err", err)
	return status.Errorf(codes.Internal, "%s: storage error", op)
}
