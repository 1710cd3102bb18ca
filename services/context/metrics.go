package contextsvc

import (
	basemetrics "github.com/baagent/baagent/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors (baagent_context_*).
type metrics struct {
	compressions       *prometheus.CounterVec
	tokensSaved        prometheus.Counter
	prunedOutputs      prometheus.Counter
	summaryCacheHits   prometheus.Counter
	summaryCacheMisses prometheus.Counter
	summaries          prometheus.Counter
	summarizerFailures prometheus.Counter
	summaryQueueFull   prometheus.Counter
	countCacheHits     prometheus.Counter
	countCacheMisses   prometheus.Counter
	appended           prometheus.Counter
	duplicates         prometheus.Counter
	repairs            *prometheus.CounterVec
	buildSeconds       prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "baagent", Subsystem: "context", Name: name, Help: help})
	}
	m := &metrics{
		compressions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "context", Name: "compressions_total",
			Help: "Windows built with compression, by strategy applied (none = tool outputs pruned only).",
		}, []string{"strategy"}),
		tokensSaved:        c("tokens_saved_total", "Tokens removed from windows by compression and pruning."),
		prunedOutputs:      c("pruned_tool_outputs_total", "Old tool outputs pruned from windows."),
		summaryCacheHits:   c("summary_cache_hits_total", "Summaries served from the summary cache."),
		summaryCacheMisses: c("summary_cache_misses_total", "Summaries wanted but not in the cache (extract used meanwhile)."),
		summaries:          c("summaries_total", "Summaries computed by the summarizer model."),
		summarizerFailures: c("summarizer_failures_total", "Summaries that failed (extract used instead)."),
		summaryQueueFull:   c("summary_queue_full_total", "Summaries not started because the queue was full."),
		countCacheHits:     c("count_cache_hits_total", "Message token counts served from the count cache."),
		countCacheMisses:   c("count_cache_misses_total", "Message token counts asked of the tokens service."),
		appended:           c("appended_messages_total", "Messages appended to history."),
		duplicates:         c("duplicate_messages_total", "Appended messages skipped because their id was stored."),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "context", Name: "window_repairs_total",
			Help: "History messages left out of a window to keep it a valid chat request.",
		}, []string{"kind"}),
		buildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "context", Name: "build_window_seconds",
			Help:    "Time to build a context window.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	if err := basemetrics.RegisterExclusive(reg, "context",
		m.compressions, m.tokensSaved, m.prunedOutputs, m.summaryCacheHits, m.summaryCacheMisses,
		m.summaries, m.summarizerFailures, m.summaryQueueFull, m.countCacheHits, m.countCacheMisses,
		m.appended, m.duplicates, m.repairs, m.buildSeconds,
	); err != nil {
		return nil, err
	}
	return m, nil
}
