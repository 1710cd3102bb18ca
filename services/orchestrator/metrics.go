package orchestrator

import (
	"github.com/prometheus/client_golang/prometheus"

	basemetrics "github.com/baagent/baagent/internal/metrics"
)

// metrics are the service's Prometheus collectors (baagent_orchestrator_*).
// No label carries client input (models, tools and tenants are unbounded
// sets), so cardinality stays fixed; the cost metrics' tenant and model
// labels are bounded per replica (cost_metrics.go).
type metrics struct {
	runs          *prometheus.CounterVec // by outcome
	runsActive    prometheus.Gauge
	waits         *prometheus.CounterVec // by kind
	resumed       prometheus.Counter
	steps         prometheus.Counter
	stepOverhead  prometheus.Histogram
	modelLatency  prometheus.Histogram
	modelTokens   *prometheus.CounterVec // by direction
	toolCalls     *prometheus.CounterVec // by outcome
	toolDuration  prometheus.Histogram
	eventFailures prometheus.Counter
	cost          *costMetrics // baagent_model_*: bounded tenant and model labels

	convOps           *prometheus.CounterVec // by op and outcome
	convIndexFailures prometheus.Counter

	memoryCaptures *prometheus.CounterVec // by outcome (queued, failed)

	patterns patternMetrics // baagent_orchestrator_pattern_* (patterns_metrics.go)
}

// Outcomes of a tool call, the label of tool_calls_total.
const (
	toolOK          = "success"
	toolFailed      = "error"        // the tool ran (or was refused) and failed
	toolInvalidArgs = "invalid_args" // arguments that are not a JSON object
	toolUnknown     = "unknown_tool" // a name the model was not offered
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "baagent", "orchestrator"
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "runs_total",
			Help: "Runs that ended, by outcome (completed, failed, cancelled).",
		}, []string{"outcome"}),
		runsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "runs_active",
			Help: "Runs executing on this replica.",
		}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "input_waits_total",
			Help: "Runs paused for the user's input, by kind (clarification, decision, doom_loop, permission, plan, pattern).",
		}, []string{"kind"}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "runs_resumed_total",
			Help: "Runs resumed from a checkpoint (after a crash, a shutdown or the user's input).",
		}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "steps_total",
			Help: "ReAct steps executed (one model call each).",
		}),
		stepOverhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "step_overhead_seconds",
			Help:    "Time of a ReAct step spent outside the model call and the tools themselves (platform overhead).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		modelLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "model_latency_seconds",
			Help:    "Duration of one streamed model call, request to last chunk.",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "model_tokens_total",
			Help: "Tokens reported by the model endpoint, by direction (input, output).",
		}, []string{"direction"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "tool_calls_total",
			Help: "Tool calls requested by the model, by outcome (success, error, invalid_args, unknown_tool).",
		}, []string{"outcome"}),
		toolDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "tool_call_duration_seconds",
			Help:    "Duration of a tool call as seen by the orchestrator, RPC included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		eventFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "event_publish_failures_total",
			Help: "Run events that could not be published to JetStream after retries.",
		}),
		cost: newCostMetrics(),
		convOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "conversation_ops_total",
			Help: "Conversation API calls, by op (list, get, messages, end, delete) and outcome (ok, refused, error).",
		}, []string{"op", "outcome"}),
		convIndexFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "conversation_index_failures_total",
			Help: "Conversation index updates that failed after a run was accepted, ended or refused (the entry's activity or counts may lag).",
		}),
	}
	for _, o := range []string{"completed", "failed", "cancelled"} {
		m.runs.WithLabelValues(o)
	}
	for _, d := range []string{"input", "output"} {
		m.modelTokens.WithLabelValues(d)
	}
	for _, o := range []string{toolOK, toolFailed, toolInvalidArgs, toolUnknown} {
		m.toolCalls.WithLabelValues(o)
	}
	m.memoryCaptures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "memory_captures_total",
		Help: "Completed top-level runs queued to become memory episodes, by outcome (queued, failed).",
	}, []string{"outcome"})
	for _, o := range []string{captureQueued, captureFailed} {
		m.memoryCaptures.WithLabelValues(o)
	}
	m.patterns = newPatternMetrics(ns, sub)
	if err := basemetrics.RegisterExclusive(reg, "orchestrator", m.collectors()...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.runs, m.runsActive, m.waits, m.resumed, m.steps, m.stepOverhead, m.modelLatency, m.modelTokens, m.toolCalls, m.toolDuration, m.eventFailures, m.convOps, m.convIndexFailures, m.memoryCaptures},
		append(m.cost.collectors(), m.patterns.collectors()...)...)
}
