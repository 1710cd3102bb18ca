package vecindex

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/metrics"
)

// indexMetrics are the index's Prometheus series, shared by the indexes
// of one process (a registry holds one set).
type indexMetrics struct {
	loads    prometheus.Counter
	changes  prometheus.Counter
	trains   prometheus.Counter
	searches *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*indexMetrics, error) {
	m := &indexMetrics{
		loads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baagent_memory_vecindex_loads_total",
			Help: "Tenants' vectors read in full into the in-process vector index (first search, eviction, pruned history).",
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baagent_memory_vecindex_changes_total",
			Help: "Vector changes applied incrementally to the in-process vector index.",
		}),
		trains: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baagent_memory_vecindex_trainings_total",
			Help: "IVF centroid trainings (a tenant crossing the exact-search size, or its size changing twofold).",
		}),
		searches: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baagent_memory_vecindex_search_seconds",
			Help:    "In-process vector searches (after the index is current), by path: exact or ivf.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
		}, []string{"path"}),
	}
	var err error
	if m.loads, err = metrics.RegisterShared(reg, m.loads); err != nil {
		return nil, err
	}
	if m.changes, err = metrics.RegisterShared(reg, m.changes); err != nil {
		return nil, err
	}
	if m.trains, err = metrics.RegisterShared(reg, m.trains); err != nil {
		return nil, err
	}
	if m.searches, err = metrics.RegisterShared(reg, m.searches); err != nil {
		return nil, err
	}
	return m, nil
}
