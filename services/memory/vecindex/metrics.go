package vecindex

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/metrics"
)

// The index's Prometheus series, shared by every index of the process
// (the SQLite store's, a PostgreSQL store's without pgvector); they are
// exported once RegisterMetrics put them on a registry.
var (
	loadsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baagent_memory_vecindex_loads_total",
		Help: "Tenants' vectors read in full into the in-process vector index (first search, eviction, pruned history).",
	})
	changesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baagent_memory_vecindex_changes_total",
		Help: "Vector changes applied incrementally to the in-process vector index.",
	})
	trainingsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baagent_memory_vecindex_trainings_total",
		Help: "IVF centroid trainings (a tenant crossing the exact-search size, or its size changing twofold).",
	})
	searchSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baagent_memory_vecindex_search_seconds",
		Help:    "In-process vector searches (after the index is current), by path: exact or ivf.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
	}, []string{"path"})
)

// RegisterMetrics puts the index's series on reg; registering them again
// on the same registry is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{loadsTotal, changesTotal, trainingsTotal, searchSeconds} {
		if _, err := metrics.RegisterShared(reg, c); err != nil {
			return err
		}
	}
	return nil
}
