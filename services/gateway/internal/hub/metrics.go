package hub

import (
	basemetrics "github.com/baagent/baagent/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// Transports label the per-client metrics; the set is fixed.
const (
	TransportGRPC = "grpc"
	TransportSSE  = "sse"
	TransportWS   = "websocket"
)

// Reasons a client is cut as a slow consumer.
const (
	SlowQueue    = "queue_full"
	SlowDeadline = "write_deadline"
)

// metrics are the hub's collectors (baagent_gateway_*). Labels are fixed
// sets (transport, reason, kind); no label carries a tenant or run id.
type metrics struct {
	clients    *prometheus.GaugeVec   // by transport
	delivered  *prometheus.CounterVec // by transport
	lag        *prometheus.HistogramVec
	slow       *prometheus.CounterVec // by transport, reason
	replays    *prometheus.CounterVec // by kind
	feeds      prometheus.Gauge
	feedBytes  prometheus.Gauge
	feedEvents prometheus.Counter
	badEvents  prometheus.Counter
	direct     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "baagent", "gateway"
	m := &metrics{
		clients: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "stream_clients",
			Help: "Clients streaming run events, by transport (grpc, sse, websocket).",
		}, []string{"transport"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "events_delivered_total",
			Help: "Events written to clients, by transport (replayed and live).",
		}, []string{"transport"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "delivery_lag_seconds",
			Help: "Time from JetStream storing a live event to its write to a client, by transport.",
			// Fine around the fan-out targets (5 ms, 25 ms p99).
			Buckets: []float64{.00025, .0005, .001, .002, .003, .005, .0075, .01, .015, .025, .05, .1, .25, .5, 1, 5},
		}, []string{"transport"}),
		slow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "slow_consumer_disconnects_total",
			Help: "Clients disconnected for falling behind, by transport and reason (queue_full, write_deadline).",
		}, []string{"transport", "reason"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "replays_total",
			Help: "Subscriptions that replayed retained events, by kind (cursor, earliest, reset, jetstream_catchup).",
		}, []string{"kind"}),
		feeds: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "run_feeds",
			Help: "Runs with an active JetStream consumer shared by their viewers.",
		}),
		feedBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_buffer_bytes",
			Help: "Bytes of events held in the runs' replay buffers.",
		}),
		feedEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_events_total",
			Help: "Events received from JetStream by the run feeds (after dedupe).",
		}),
		badEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_bad_events_total",
			Help: "Messages on a run's event subject that could not be decoded or did not match the run; skipped.",
		}),
		direct: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "direct_deliveries_total",
			Help: "Events written to caught-up clients by their run's fan-out without waking the client's goroutine (included in events_delivered_total).",
		}),
	}
	for _, t := range []string{TransportGRPC, TransportSSE, TransportWS} {
		m.clients.WithLabelValues(t)
		m.delivered.WithLabelValues(t)
		m.lag.WithLabelValues(t)
		for _, r := range []string{SlowQueue, SlowDeadline} {
			m.slow.WithLabelValues(t, r)
		}
	}
	for _, k := range []string{"cursor", "earliest", "reset", "jetstream_catchup"} {
		m.replays.WithLabelValues(k)
	}
	if err := basemetrics.RegisterExclusive(reg, "gateway hub", m.clients, m.delivered, m.lag, m.slow, m.replays, m.feeds, m.feedBytes, m.feedEvents, m.badEvents, m.direct); err != nil {
		return nil, err
	}
	return m, nil
}

// SlowCounter is the slow-consumer disconnect counter of a transport and
// reason, for tests and diagnostics.
func (h *Hub) SlowCounter(transport, reason string) prometheus.Counter {
	return h.m.slow.WithLabelValues(transport, reason)
}

// DirectDeliveries counts the events written by the runs' fan-out directly,
// for tests and diagnostics.
func (h *Hub) DirectDeliveries() prometheus.Counter { return h.m.direct }
