package llm

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baagent/baagent/internal/retry"
)

// backoff is the wait before retry number n (1 for the first retry): the
// base doubles per retry up to max (which caps even an initial wait above
// it), and the wait is drawn from [base/2, base].
func backoff(p RetryPolicy, n int, rnd func() float64) time.Duration {
	base := min(retry.Backoff{Initial: p.InitialBackoff, Max: p.MaxBackoff}.Delay(n-1), p.MaxBackoff)
	half := base / 2
	return half + time.Duration(rnd()*float64(base-half))
}

// ParseRetryAfter reads how long the server asked to wait: retry-after-ms
// (milliseconds, sent by some providers) or Retry-After (seconds or an HTTP
// date). Zero means it did not say.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 1e6 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// attemptInfo collects what the transport saw of one attempt's response,
// which go-openai's errors do not carry.
type attemptInfo struct {
	mu         sync.Mutex
	retryAfter time.Duration
}

func (a *attemptInfo) set(d time.Duration) {
	a.mu.Lock()
	a.retryAfter = d
	a.mu.Unlock()
}

func (a *attemptInfo) get() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retryAfter
}

type attemptInfoKey struct{}

// headerDoer records Retry-After of failed responses in the attemptInfo the
// request's context carries.
type headerDoer struct {
	client *http.Client
}

func (d headerDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.client.Do(req)
	if err == nil && resp.StatusCode >= 400 {
		if info, ok := req.Context().Value(attemptInfoKey{}).(*attemptInfo); ok {
			info.set(ParseRetryAfter(resp.Header, time.Now()))
		}
	}
	return resp, err
}

// sleepCtx waits d or until ctx ends, and then returns ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if !retry.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

func defaultRand() float64 { return rand.Float64() }
