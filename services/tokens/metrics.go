package tokens

import (
	basemetrics "github.com/baagent/baagent/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors.
type metrics struct {
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	exactFallbacks prometheus.Counter
	parallelCounts prometheus.Counter
	streams        *prometheus.CounterVec
	streamBytes    prometheus.Counter
}

// newMetrics builds the collectors and registers them on reg; a nil reg
// keeps them unregistered (they still count, which tests read).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "cache_hits_total",
			Help: "Message and tool-schema counts served from the count cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "cache_misses_total",
			Help: "Message and tool-schema counts that had to be encoded.",
		}),
		exactFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "exact_count_fallbacks_total",
			Help: "Provider counting API calls that failed, answered with the local estimate.",
		}),
		parallelCounts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "parallel_counts_total",
			Help: "CountTokens texts at or above the parallel threshold, cut at safe points and counted on several cores.",
		}),
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "count_streams_total",
			Help: "CountTokensStream calls by result: ok, invalid (bad model or too much text), no_cut (no safe cut point within the tail limit), cancelled, error.",
		}, []string{"result"}),
		streamBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "count_stream_bytes_total",
			Help: "Text bytes received by CountTokensStream.",
		}),
	}
	if err := basemetrics.RegisterExclusive(reg, "tokens", m.cacheHits, m.cacheMisses, m.exactFallbacks,
		m.parallelCounts, m.streams, m.streamBytes); err != nil {
		return nil, err
	}
	return m, nil
}
