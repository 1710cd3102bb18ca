package mcpauth

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts authorization flow outcomes; every label value is one of a
// fixed set, never client input. A nil *Metrics counts nothing.
type Metrics struct {
	startedC    *prometheus.CounterVec
	completedC  *prometheus.CounterVec
	refreshesC  *prometheus.CounterVec
	revokesC    prometheus.Counter
	registeredC prometheus.Counter
}

// NewMetrics registers the flow's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		startedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "mcp_oauth_started_total",
			Help: "MCP OAuth authorizations started, by result (ok, discovery_failed, registration_failed).",
		}, []string{"result"}),
		completedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "mcp_oauth_completed_total",
			Help: "MCP OAuth callbacks, by result (ok, bad_state, exchange_failed, denied).",
		}, []string{"result"}),
		refreshesC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "mcp_oauth_refreshes_total",
			Help: "MCP OAuth access token refreshes, by result (ok, raced, invalid_grant, error).",
		}, []string{"result"}),
		revokesC: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "mcp_oauth_revocations_total",
			Help: "MCP OAuth grants revoked.",
		}),
		registeredC: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "mcp_oauth_client_registrations_total",
			Help: "OAuth clients registered dynamically (RFC 7591) at MCP authorization servers.",
		}),
	}
	for _, c := range []prometheus.Collector{m.startedC, m.completedC, m.refreshesC, m.revokesC, m.registeredC} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) started(result string) {
	if m != nil {
		m.startedC.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) completed(result string) {
	if m != nil {
		m.completedC.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) refreshed(result string) {
	if m != nil {
		m.refreshesC.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) revoked() {
	if m != nil {
		m.revokesC.Inc()
	}
}

func (m *Metrics) registered() {
	if m != nil {
		m.registeredC.Inc()
	}
}
