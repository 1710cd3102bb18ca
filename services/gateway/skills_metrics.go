package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/internal/metrics"
)

// Skill write operations, the op label of baagent_gateway_skill_writes_total.
const (
	skillOpPut    = "put"
	skillOpDelete = "delete"
	skillOpState  = "state"
)

// skillMetrics are the collectors of tenant skill management; every label
// is a fixed set (op, api, and a gRPC code name).
type skillMetrics struct {
	writes      *prometheus.CounterVec // by op, api, code
	uploadBytes prometheus.Histogram
}

func newSkillMetrics(reg prometheus.Registerer) (*skillMetrics, error) {
	const ns, sub = "baagent", "gateway"
	m := &skillMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "skill_writes_total",
			Help: "Tenant skill writes by op (put, delete, state), api (grpc, http) and outcome code (OK, INVALID_ARGUMENT, ABORTED, …).",
		}, []string{"op", "api", "code"}),
		uploadBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "skill_upload_bytes",
			Help: "Size of the skills forwarded to the skills service (SKILL.md or archive), in bytes.",
			// 1 KiB to 16 MiB.
			Buckets: prometheus.ExponentialBuckets(1<<10, 4, 8),
		}),
	}
	for _, op := range []string{skillOpPut, skillOpDelete, skillOpState} {
		for _, api := range []string{apiGRPC, apiHTTP} {
			m.writes.WithLabelValues(op, api, "OK")
		}
	}
	if err := metrics.RegisterExclusive(reg, "gateway skills", m.writes, m.uploadBytes); err != nil {
		return nil, err
	}
	return m, nil
}

// observe counts one write and its outcome.
func (m *skillMetrics) observe(op, api string, err error) {
	m.writes.WithLabelValues(op, api, codeName(status.Code(err))).Inc()
}
