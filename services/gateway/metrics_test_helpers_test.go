package gateway

import "github.com/prometheus/client_golang/prometheus"

// hubMetricSlow exposes the slow-consumer counter to tests.
func (s *Server) hubMetricSlow(transport, reason string) prometheus.Collector {
	return s.hub.SlowCounter(transport, reason)
}
