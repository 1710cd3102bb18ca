package memory

import (
	"github.com/prometheus/client_golang/prometheus"

	basemetrics "github.com/baagent/baagent/internal/metrics"
)

// Episode outcomes, the values of baagent_memory_episodes_total{outcome}.
const (
	outcomeStored    = "stored"    // AddEpisode stored a new episode
	outcomeDuplicate = "duplicate" // AddEpisode found its idempotency key
	outcomeSkipped   = "skipped"   // capture switched off
	outcomeSynced    = "synced"    // entities and relations written
	outcomeFailed    = "failed"    // failed for good
	outcomeRetried   = "retried"   // an attempt failed and is retried
	outcomeReleased  = "released"  // given back (shutdown, attempts of a claim spent)
	outcomeConflict  = "conflict"  // the lease was lost to another replica
)

// metrics are the service's Prometheus collectors.
type metrics struct {
	episodes         *prometheus.CounterVec
	ingestDuration   prometheus.Histogram
	extractionTokens *prometheus.CounterVec
	entities         *prometheus.CounterVec
	searchDuration   *prometheus.HistogramVec
	channelHits      *prometheus.CounterVec
	communityPasses  *prometheus.CounterVec
	summaryTokens    prometheus.Counter
	summaries        *prometheus.CounterVec
	// Interaction patterns.
	patternMatchDuration prometheus.Histogram
	patternCandidates    *prometheus.CounterVec
	patternTraces        *prometheus.CounterVec
	tracesPruned         prometheus.Counter
	// The pattern index (patternindex.go).
	patternIndexLookups   *prometheus.CounterVec
	patternIndexHeads     prometheus.Gauge
	patternIndexEvictions prometheus.Counter
}

// newMetrics builds the collectors and registers them on reg; a nil reg
// keeps them unregistered (they still count, which tests read).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		episodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "episodes_total",
			Help: "Episodes by outcome: stored, duplicate (idempotency key seen), skipped (capture off), synced, failed (for good), retried (an attempt failed), released (lease given back), conflict (lease lost to another replica).",
		}, []string{"outcome"}),
		ingestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "ingest_duration_seconds",
			Help:    "Time from claiming an episode to writing its entities or failing it, model time included.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}),
		extractionTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "extraction_tokens_total",
			Help: "Model tokens spent extracting entities and relations, by kind (prompt, completion).",
		}, []string{"kind"}),
		entities: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "extracted_entities_total",
			Help: "Extracted entities by resolution: new, name (merged by name or alias), vector (merged by embedding similarity), episode (a duplicate within the episode).",
		}, []string{"resolution"}),
		searchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "search_duration_seconds",
			Help:    "Search latency by mode (hybrid, vector, keyword, graph), hydration included.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"mode"}),
		channelHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "search_channel_hits_total",
			Help: "Candidates each search channel (vector, keyword, graph) contributed to the fusion.",
		}, []string{"channel"}),
		communityPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "community_passes_total",
			Help: "Community detection passes over one tenant, by result (ok, error).",
		}, []string{"result"}),
		summaryTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "community_summary_tokens_total",
			Help: "Model tokens spent writing community summaries.",
		}),
		summaries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "community_summaries_total",
			Help: "Community summaries by result: written, kept (members unchanged), over_budget (left for a later pass), error.",
		}, []string{"result"}),
		patternMatchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_match_duration_seconds",
			Help:    "MatchPatterns latency: settings, entity lookup, candidates, scoring and reading the winners.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1},
		}),
		patternCandidates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_candidates_total",
			Help: "Patterns MatchPatterns offered, by mode (reuse, reference).",
		}, []string{"mode"}),
		patternTraces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_traces_total",
			Help: "Recorded interaction traces by outcome: created (a new pattern), evolved, unchanged, duplicate (run seen before), skipped (patterns off).",
		}, []string{"outcome"}),
		tracesPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_traces_pruned_total",
			Help: "Interaction traces deleted after their retention.",
		}),
		patternIndexLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_index_lookups_total",
			Help: "MatchPatterns candidate lookups by result: hit (held heads, after reading the changes), reload (the tenant read whole first), bypass (more heads than the index holds: read from the store).",
		}, []string{"result"}),
		patternIndexHeads: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_index_heads",
			Help: "Pattern scoring heads the index holds on this replica, plus one per tenant held.",
		}),
		patternIndexEvictions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "pattern_index_evictions_total",
			Help: "Tenants dropped from the pattern index, least recently matched first, to stay within its cap.",
		}),
	}
	if err := basemetrics.RegisterExclusive(reg, "memory", m.episodes, m.ingestDuration, m.extractionTokens,
		m.entities, m.searchDuration, m.channelHits, m.communityPasses, m.summaryTokens, m.summaries,
		m.patternMatchDuration, m.patternCandidates, m.patternTraces, m.tracesPruned,
		m.patternIndexLookups, m.patternIndexHeads, m.patternIndexEvictions); err != nil {
		return nil, err
	}
	return m, nil
}
