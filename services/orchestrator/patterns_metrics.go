package orchestrator

import "github.com/prometheus/client_golang/prometheus"

// patternMetrics are the interaction patterns' collectors
// (baagent_orchestrator_pattern_*), every label a fixed set.
type patternMetrics struct {
	matches   *prometheus.CounterVec // by outcome: reuse, reference, none, error, unimplemented
	decisions *prometheus.CounterVec // by answer: reuse, scratch, timed_out
	traces    *prometheus.CounterVec // by outcome: queued, failed
}

func newPatternMetrics(ns, sub string) patternMetrics {
	m := patternMetrics{
		matches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "pattern_matches_total",
			Help: "Interaction-pattern matches at the start of top-level runs, by outcome (reuse, reference, none, error, unimplemented).",
		}, []string{"outcome"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "pattern_decisions_total",
			Help: "Decisions whether to reuse a matched interaction pattern, by answer (reuse, scratch, timed_out).",
		}, []string{"answer"}),
		traces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "pattern_traces_total",
			Help: "Interaction traces of ended top-level runs queued for the memory service, by outcome (queued, failed).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{matchReuse, matchReference, matchNone, matchError, matchUnimplemented} {
		m.matches.WithLabelValues(o)
	}
	for _, a := range []string{decisionReuse, decisionScratch, decisionTimedOut} {
		m.decisions.WithLabelValues(a)
	}
	for _, o := range []string{traceQueued, traceFailed} {
		m.traces.WithLabelValues(o)
	}
	return m
}

func (m patternMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.matches, m.decisions, m.traces}
}
