package skills

import (
	basemetrics "github.com/baagent/baagent/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus metrics. Labels are bounded sets
// chosen by the service (layer, result), never skill, tenant or other
// client-supplied names.
type metrics struct {
	loaded          *prometheus.GaugeVec
	invalid         *prometheus.GaugeVec
	reloads         *prometheus.CounterVec
	reloadSeconds   prometheus.Histogram
	activations     *prometheus.CounterVec
	countFallbacks  prometheus.Counter
	lastReloadStamp prometheus.Gauge
	loadWarnings    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		loaded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baagent_skills_loaded",
			Help: "Valid skills loaded, by layer (system, tenant, project; summed over tenants and projects).",
		}, []string{"layer"}),
		invalid: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baagent_skills_invalid",
			Help: "Skills and tenant configurations refused by validation, by layer. ListSkills with include_invalid says why.",
		}, []string{"layer"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baagent_skills_reloads_total",
			Help: "Loads of the skills root, by result (ok, error).",
		}, []string{"result"}),
		reloadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "baagent_skills_reload_seconds",
			Help:    "Time to load the skills root.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baagent_skills_activations_total",
			Help: "ActivateSkill calls by result (ok, already_active, cycle, depth, mismatch, model_disabled, unavailable, not_found).",
		}, []string{"result"}),
		countFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baagent_skills_token_count_fallbacks_total",
			Help: "Catalog token counts that fell back to the local estimate because the token counter failed.",
		}),
		loadWarnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baagent_skills_load_warnings_total",
			Help: "Violations skills were loaded despite (an over-long description, an unknown key, …), by layer; counted when a skill is loaded with new warnings. ListSkills shows them.",
		}, []string{"layer"}),
		lastReloadStamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baagent_skills_last_reload_timestamp_seconds",
			Help: "Unix time of the last successful load of the skills root.",
		}),
	}
	if err := basemetrics.RegisterExclusive(reg, "skills", m.collectors()...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.loaded, m.invalid, m.reloads, m.reloadSeconds, m.activations, m.countFallbacks, m.lastReloadStamp, m.loadWarnings}
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}
