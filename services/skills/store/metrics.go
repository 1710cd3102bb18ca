package store

import (
	"github.com/prometheus/client_golang/prometheus"

	basemetrics "github.com/baagent/baagent/internal/metrics"
)

// metrics are the store's Prometheus metrics; labels are bounded sets
// chosen here, never tenant or skill names.
type metrics struct {
	ops      *prometheus.CounterVec
	watchLag prometheus.Histogram
	stored   prometheus.Gauge
	swept    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baagent_skills_store_operations_total",
			Help: "Writes to the skill store by operation (put, delete, settings) and result (ok, conflict, not_found, limit, error).",
		}, []string{"op", "result"}),
		watchLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "baagent_skills_store_watch_lag_seconds",
			Help:    "Time from a skill store write to this replica applying it.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		stored: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baagent_skills_store_skills",
			Help: "Stored (uploaded) skills this replica sees, all tenants.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baagent_skills_store_swept_total",
			Help: "Unreferenced skill revisions deleted by the sweep.",
		}),
	}
	if err := basemetrics.RegisterExclusive(reg, "skills store", m.collectors()...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ops, m.watchLag, m.stored, m.swept}
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}
