package toolrunner

import (
	basemetrics "github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/services/toolrunner/quota"

	"github.com/prometheus/client_golang/prometheus"
)

// unknownTool labels calls of tools that do not exist, so that names the
// model invents cannot grow the label set.
const unknownTool = "unknown"

// metrics are the service's Prometheus collectors.
type metrics struct {
	calls         *prometheus.CounterVec // tool, outcome
	duration      *prometheus.HistogramVec
	errors        *prometheus.CounterVec // tool, type
	retries       *prometheus.CounterVec
	cacheHits     *prometheus.CounterVec
	keyed         *prometheus.CounterVec // outcome
	artifactBytes prometheus.Counter
	artifactsGone prometheus.Counter
	// quotaExceeded counts refusals by kind (workspace, artifact); per
	// tenant usage is logged with each refusal, never a label: tenants
	// are not a bounded label set.
	quotaExceeded *prometheus.CounterVec
	// Hooks (the tools file's `hooks:`; names bounded by the file).
	hookCalls    *prometheus.CounterVec   // hook, phase, outcome
	hookFailures *prometheus.CounterVec   // hook, reason
	hookDuration *prometheus.HistogramVec // hook, phase
	// compositions counts composition runs by composition and outcome
	// (success, error, approval_required); compositions come from the
	// tools file, a bounded set.
	compositions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, storeStats func() (int, int64), workspaceBytes func() int64) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "calls_total",
			Help: "Tool invocations by tool and outcome (success, error, cached, approval_required).",
		}, []string{"tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "call_duration_seconds",
			Help:    "Wall time of tool invocations, retries included.",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5, 15, 60, 300},
		}, []string{"tool"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "errors_total",
			Help: "Failed tool invocations by tool and ToolErrorType.",
		}, []string{"tool", "type"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "retries_total",
			Help: "Retried attempts by tool.",
		}, []string{"tool"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "cache_hits_total",
			Help: "Read-only invocations answered from the result cache (the tool's cache policy), by tool.",
		}, []string{"tool"}),
		keyed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "keyed_calls_total",
			Help: "Calls with side effects and an idempotency key, by outcome: executed, replayed (answered from the record), unknown (its execution died mid-call), unavailable (no record could be written; nothing ran), key_reused.",
		}, []string{"outcome"}),
		artifactBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "artifact_bytes_written_total",
			Help: "Bytes written to the artifact store.",
		}),
		artifactsGone: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "artifact_bytes_removed_total",
			Help: "Bytes removed from the artifact store (age, size, tenant quota, conversation end).",
		}),
		quotaExceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "quota_exceeded_total",
			Help: "Writes refused by a tenant's disk quota, by kind: workspace (file writes, new workspaces) or artifact (a tool result that could not be stored).",
		}, []string{"kind"}),
		compositions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "toolrunner", Name: "composition_runs_total",
			Help: "Tool composition runs by composition and outcome (success, error, approval_required).",
		}, []string{"composition", "outcome"}),
	}
	m.hookCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "baagent", Subsystem: "toolrunner", Name: "hook_calls_total",
		Help: "Tool hook calls by hook, phase and outcome: allow, deny, rewrite (pre), unchanged, modified (post), failed.",
	}, []string{"hook", "phase", "outcome"})
	m.hookFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "baagent", Subsystem: "toolrunner", Name: "hook_failures_total",
		Help: "Tool hook failures by hook and reason: timeout, or error (unreachable, bad answer, schema-invalid rewrite).",
	}, []string{"hook", "reason"})
	m.hookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "baagent", Subsystem: "toolrunner", Name: "hook_duration_seconds",
		Help:    "Latency of tool hook calls by hook and phase.",
		Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5, 30},
	}, []string{"hook", "phase"})
	for _, kind := range []string{quota.Workspace, quota.Artifact} {
		m.quotaExceeded.WithLabelValues(kind) // export zeros, so that rate() sees the first refusal
	}
	stored := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "baagent", Subsystem: "toolrunner", Name: "artifact_bytes",
		Help: "Bytes held in the artifact store.",
	}, func() float64 { _, b := storeStats(); return float64(b) })
	count := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "baagent", Subsystem: "toolrunner", Name: "artifacts",
		Help: "Artifacts held in the artifact store.",
	}, func() float64 { n, _ := storeStats(); return float64(n) })
	wsBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "baagent", Subsystem: "toolrunner", Name: "workspace_bytes",
		Help: "Workspace bytes charged to tenants' quotas (files in 4 KiB blocks, directories one block), summed over the tenants used since the process started: a tenant is counted on first use.",
	}, func() float64 { return float64(workspaceBytes()) })
	if err := basemetrics.RegisterExclusive(reg, "toolrunner", m.calls, m.duration, m.errors, m.retries, m.cacheHits, m.keyed, m.artifactBytes, m.artifactsGone, m.quotaExceeded, m.compositions, stored, count, wsBytes, m.hookCalls, m.hookFailures, m.hookDuration); err != nil {
		return nil, err
	}
	return m, nil
}
