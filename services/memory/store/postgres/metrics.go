package postgres

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/metrics"
)

// storeMetrics are the PostgreSQL store's series; shared by the stores of
// one registry.
type storeMetrics struct {
	claimed         prometheus.Counter
	completeSeconds prometheus.Observer
	vectorsLoaded   prometheus.Counter
	vectorCatchup   prometheus.Observer
	learnSeconds    prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*storeMetrics, error) {
	claimed, err := metrics.RegisterShared(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baagent_memory_postgres_episodes_claimed_total",
		Help: "Episodes leased to this replica by the PostgreSQL memory store.",
	}))
	if err != nil {
		return nil, err
	}
	complete, err := metrics.RegisterShared(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baagent_memory_postgres_complete_episode_seconds",
		Help:    "Time of the PostgreSQL transaction writing an episode's entities and relations.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}))
	if err != nil {
		return nil, err
	}
	loaded, err := metrics.RegisterShared(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baagent_memory_postgres_vectors_loaded_total",
		Help: "Entity vectors and removals read from PostgreSQL into the in-process vector index.",
	}))
	if err != nil {
		return nil, err
	}
	catchup, err := metrics.RegisterShared(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baagent_memory_postgres_vector_catchup_seconds",
		Help:    "Time to read one batch of a tenant's vectors or vector changes for the in-process index.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}))
	if err != nil {
		return nil, err
	}
	learn, err := metrics.RegisterShared(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baagent_memory_postgres_learn_trace_seconds",
		Help:    "Time of the PostgreSQL transaction learning one interaction trace, the wait for the tenant's pattern lock included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}))
	if err != nil {
		return nil, err
	}
	return &storeMetrics{claimed: claimed, completeSeconds: complete, vectorsLoaded: loaded, vectorCatchup: catchup, learnSeconds: learn}, nil
}
