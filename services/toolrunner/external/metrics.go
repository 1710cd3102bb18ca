package external

import (
	basemetrics "github.com/baagent/baagent/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the per-source health metrics; label `source` is the source
// name (`provider:fx`, `mcp:fs`), so cardinality is bounded by the
// configuration.
type metrics struct {
	up           *prometheus.GaugeVec
	tools        *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	listFailures *prometheus.CounterVec
	refused      *prometheus.GaugeVec
	mcpTransport *prometheus.GaugeVec

	oauthSessions *prometheus.GaugeVec
	authRequired  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_source_up",
			Help: "1 while an external tool source (ToolProvider or MCP server) is connected and its tools are offered, else 0.",
		}, []string{"source"}),
		tools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_source_tools",
			Help: "Tools an external source offers now (0 while it is down).",
		}, []string{"source"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_source_restarts_total",
			Help: "Times an external source came back up after being down (ToolProvider reconnects, MCP server restarts).",
		}, []string{"source"}),
		listFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_source_list_failures_total",
			Help: "Failed attempts to connect to an external source or to list its tools (DescribeTools, MCP initialize or tools/list).",
		}, []string{"source"}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_source_refused_tools",
			Help: "Tools of an external source that are not offered because their name is invalid or taken by a built-in or another source.",
		}, []string{"source"}),
		mcpTransport: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_mcp_transport",
			Help: "1 for the transport (stdio, streamable, sse, websocket) each configured MCP server is reached over.",
		}, []string{"source", "transport"}),
		oauthSessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_mcp_oauth_sessions",
			Help: "Open per-tenant sessions with an auth: oauth MCP server.",
		}, []string{"source"}),
		authRequired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "external_mcp_oauth_refused_total",
			Help: "Times an auth: oauth MCP server refused a tenant's token (401) or no token could be had; the tenant's grant is dropped.",
		}, []string{"source"}),
	}
	if err := basemetrics.RegisterExclusive(reg, "external tools", m.up, m.tools, m.restarts, m.listFailures, m.refused, m.mcpTransport, m.oauthSessions, m.authRequired); err != nil {
		return nil, err
	}
	return m, nil
}

// init makes every series of a source visible from the start (at 0).
func (m *metrics) initSource(source string) {
	m.up.WithLabelValues(source).Set(0)
	m.tools.WithLabelValues(source).Set(0)
	m.restarts.WithLabelValues(source)
	m.listFailures.WithLabelValues(source)
	m.refused.WithLabelValues(source).Set(0)
}
