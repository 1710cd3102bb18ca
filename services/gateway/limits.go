package gateway

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baagent/baagent/internal/metrics"
)

// Concurrency limits per API key. The rate limit bounds how fast a key
// opens streams and makes calls, not how many it holds: a key could keep
// thousands of event streams (each a connection, a goroutine and a
// subscription) or slow requests open. Each authenticated stream or call
// takes a slot of its key for as long as it lasts; a key with none free
// is answered ResourceExhausted (HTTP 429) naming the limit. Slots exist
// only while held and only for authenticated callers (configured keys, or
// the tenants of subject-less stream tokens), so the maps are bounded by
// the configuration, not by clients.

// Limits label the concurrency metrics.
const (
	limitStreams  = "streams"
	limitInFlight = "in_flight"
)

// keySlots counts what each key holds.
type keySlots struct {
	kind  string // limitStreams or limitInFlight
	max   int    // <= 0: no limit
	gauge prometheus.Gauge

	mu   sync.Mutex
	held map[[32]byte]int
}

func newKeySlots(kind string, max int, gauge prometheus.Gauge) *keySlots {
	return &keySlots{kind: kind, max: max, gauge: gauge, held: map[[32]byte]int{}}
}

func (k *keySlots) acquire(id [32]byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[id] >= k.max {
		return false
	}
	k.held[id]++
	k.gauge.Inc()
	return true
}

func (k *keySlots) release(id [32]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := k.held[id]; n > 1 {
		k.held[id] = n - 1
	} else {
		delete(k.held, id)
	}
	k.gauge.Dec()
}

// count is how many slots id holds.
func (k *keySlots) count(id [32]byte) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held[id]
}

// hold takes a slot of k for c, or refuses with ResourceExhausted naming
// the limit; done gives the slot back (once, however often it is called).
// Callers without a key (no keys configured, loopback only) are not
// limited.
func (s *Server) hold(c caller, k *keySlots, api string) (done func(), err error) {
	if !c.keyed || k.max <= 0 {
		return func() {}, nil
	}
	if !k.acquire(c.id) {
		s.edge.limited.WithLabelValues(k.kind, api).Inc()
		return nil, k.exhausted()
	}
	return sync.OnceFunc(func() { k.release(c.id) }), nil
}

func (k *keySlots) exhausted() error {
	info := &errdetails.ErrorInfo{Domain: "baagent.dev", Metadata: map[string]string{"limit": strconv.Itoa(k.max)}}
	var st *status.Status
	var err error
	if k.kind == limitStreams {
		info.Reason = "TOO_MANY_STREAMS"
		st = status.New(codes.ResourceExhausted, fmt.Sprintf(
			"stream limit: this API key already holds %d open event streams (gRPC StreamRunEvents and StartRunStream, SSE and WebSocket together), the most it may; close one first", k.max))
		st, err = st.WithDetails(info)
	} else {
		info.Reason = "TOO_MANY_REQUESTS_IN_FLIGHT"
		st = status.New(codes.ResourceExhausted, fmt.Sprintf(
			"in-flight limit: this API key already has %d requests in progress, the most it may; retry when one has finished", k.max))
		st, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	}
	if err != nil {
		return status.Error(codes.ResourceExhausted, "limit of "+strconv.Itoa(k.max)+" "+k.kind+" per API key reached")
	}
	return st.Err()
}

// edgeMetrics are the collectors of the edge's protections
// (baagent_gateway_*); every label is a fixed set.
type edgeMetrics struct {
	limited        *prometheus.CounterVec // by limit, api
	held           *prometheus.GaugeVec   // by limit
	authFailures   *prometheus.CounterVec // by api
	authThrottled  *prometheus.CounterVec // by api
	browserRefused *prometheus.CounterVec // by reason
	bodyTimeouts   prometheus.Counter
}

// Reasons a browser request is refused (see origin.go).
const (
	refusedHost        = "host"
	refusedOrigin      = "origin"
	refusedContentType = "content_type"
)

func newEdgeMetrics(reg prometheus.Registerer) (*edgeMetrics, error) {
	const ns, sub = "baagent", "gateway"
	m := &edgeMetrics{
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "concurrency_limited_total",
			Help: "Streams and requests refused because their API key held as many as it may, by limit (streams, in_flight) and api (grpc, http).",
		}, []string{"limit", "api"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "key_slots_held",
			Help: "Event streams and requests in progress counted against API keys' limits, by limit (streams, in_flight).",
		}, []string{"limit"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "auth_failures_total",
			Help: "Requests with an invalid API key or stream token, by api (grpc, http).",
		}, []string{"api"}),
		authThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "auth_throttled_total",
			Help: "Requests refused unchecked because their address presented too many invalid credentials, by api (grpc, http).",
		}, []string{"api"}),
		browserRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "browser_requests_refused_total",
			Help: "HTTP requests refused as cross-site or DNS rebinding, by reason (host, origin, content_type).",
		}, []string{"reason"}),
		bodyTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "body_read_timeouts_total",
			Help: "HTTP requests whose body did not arrive within the body read timeout.",
		}),
	}
	for _, l := range []string{limitStreams, limitInFlight} {
		m.held.WithLabelValues(l)
		for _, a := range []string{apiGRPC, apiHTTP} {
			m.limited.WithLabelValues(l, a)
		}
	}
	for _, a := range []string{apiGRPC, apiHTTP} {
		m.authFailures.WithLabelValues(a)
		m.authThrottled.WithLabelValues(a)
	}
	for _, r := range []string{refusedHost, refusedOrigin, refusedContentType} {
		m.browserRefused.WithLabelValues(r)
	}
	if err := metrics.RegisterExclusive(reg, "gateway", m.limited, m.held, m.authFailures, m.authThrottled, m.browserRefused, m.bodyTimeouts); err != nil {
		return nil, err
	}
	return m, nil
}
