package gateway

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baagent/baagent/internal/metrics"
)

// Rate limiting. Every authenticated call (gRPC, HTTP/JSON, and each
// stream opened over SSE, WebSocket or gRPC) takes one token from its API
// key's bucket; an empty bucket answers ResourceExhausted (HTTP 429) with
// the time until the next token as the retry hint. Callers are
// authenticated first, so buckets exist only for configured keys (and for
// the tenants of stream tokens, which come from configured keys too); the
// map is bounded anyway, and buckets that have refilled are dropped, since
// a fresh bucket is the same thing.

// Rate limit settings. Options.RateLimit 0 means no limit, so that the
// option maps one to one onto its configuration setting (where 0 turns
// limiting off); DefaultRateLimit is the configuration's default.
const (
	DefaultRateLimit = 50  // requests per second per API key
	DefaultRateBurst = 100 // requests an idle key may make at once
	// DefaultMaxRateBuckets bounds the limiter's buckets.
	DefaultMaxRateBuckets = 10000
)

// rateLimiter is a token bucket per caller identity.
type rateLimiter struct {
	rate       float64 // tokens per second
	burst      float64
	maxBuckets int
	now        func() time.Time

	mu      sync.Mutex
	buckets map[[32]byte]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time // when a token was last asked for
}

// newRateLimiter returns a limiter of rate tokens/s and burst (0: the
// larger of DefaultRateBurst and rate), or nil (no limit) when rate is not
// positive.
func newRateLimiter(r float64, burst, maxBuckets int, now func() time.Time) *rateLimiter {
	if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return nil
	}
	if burst <= 0 {
		burst = max(DefaultRateBurst, int(math.Ceil(r)))
	}
	if maxBuckets <= 0 {
		maxBuckets = DefaultMaxRateBuckets
	}
	return &rateLimiter{rate: r, burst: float64(burst), maxBuckets: maxBuckets, now: now, buckets: map[[32]byte]*bucket{}}
}

// allow takes a token for id; when there is none it returns false and how
// long until there is one.
func (l *rateLimiter) allow(id [32]byte) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[id]
	if b == nil {
		if len(l.buckets) >= l.maxBuckets {
			l.evictLocked(now)
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.rate), int(l.burst))}
		l.buckets[id] = b
	}
	b.used = now
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	wait := time.Duration((1 - b.lim.TokensAt(now)) / l.rate * float64(time.Second))
	return false, max(wait, time.Millisecond)
}

// evictLocked makes room: it drops every bucket that has refilled (it
// would be created again identical), and if none has, the one used least
// recently.
func (l *rateLimiter) evictLocked(now time.Time) {
	var oldestID [32]byte
	var oldest *bucket
	for id, b := range l.buckets {
		if b.lim.TokensAt(now) >= l.burst {
			delete(l.buckets, id)
			continue
		}
		if oldest == nil || b.used.Before(oldest.used) {
			oldestID, oldest = id, b
		}
	}
	if len(l.buckets) >= l.maxBuckets && oldest != nil {
		delete(l.buckets, oldestID)
	}
}

// size is the number of buckets held.
func (l *rateLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// APIs label the rate-limited counter.
const (
	apiGRPC = "grpc"
	apiHTTP = "http"
)

func newRateLimitedCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "baagent", Subsystem: "gateway", Name: "rate_limited_total",
		Help: "Requests and stream opens refused because their API key was over its rate limit, by api (grpc, http).",
	}, []string{"api"})
	for _, a := range []string{apiGRPC, apiHTTP} {
		c.WithLabelValues(a)
	}
	if err := metrics.RegisterExclusive(reg, "gateway", c); err != nil {
		return nil, err
	}
	return c, nil
}

// limit takes a token for the caller, or refuses with ResourceExhausted
// and the time until the next token (HTTP: 429 with Retry-After).
func (s *Server) limit(c caller, api string) error {
	if s.limiter == nil || !c.keyed {
		return nil
	}
	ok, wait := s.limiter.allow(c.id)
	if ok {
		return nil
	}
	s.rateLimited.WithLabelValues(api).Inc()
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(
		"rate limit: this API key may make %g requests per second (bursts of %g); retry after %s",
		s.limiter.rate, s.limiter.burst, wait.Round(time.Millisecond)))
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: "RATE_LIMITED", Domain: "baagent.dev"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)},
	); err == nil {
		st = d
	}
	return st.Err()
}
