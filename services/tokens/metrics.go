package tokens

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors.
type metrics struct {
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	exactFallbacks prometheus.Counter
}

// newMetrics builds the collectors and registers them on reg; a nil reg
// keeps them unregistered (they still count, which tests read).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "cache_hits_total",
			Help: "Message and tool-schema counts served from the count cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "cache_misses_total",
			Help: "Message and tool-schema counts that had to be encoded.",
		}),
		exactFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "tokens", Name: "exact_count_fallbacks_total",
			Help: "Provider counting API calls that failed, answered with the local estimate.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.cacheHits, m.cacheMisses, m.exactFallbacks} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("tokens: metrics already registered on this registerer (one Server per registry)")
			}
			return nil, err
		}
	}
	return m, nil
}
