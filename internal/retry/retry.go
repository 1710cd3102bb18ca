// Package retry holds the one backoff policy the services use between
// attempts (model calls, tool-runner calls, reconnects and restarts), and a
// context-aware sleep, so that every retry loop waits the same way.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential delay: Initial before the first retry,
// multiplied by Multiplier per further attempt up to Max, with ±Jitter of
// each delay drawn at random so that clients failing together do not retry
// in step. Zero fields take the defaults below.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64 // ≥ 1; 0 means DefaultMultiplier
	Jitter     float64 // fraction of the delay, 0..1; 0 means none
}

// Defaults of a zero Backoff.
const (
	DefaultInitial    = 500 * time.Millisecond
	DefaultMax        = 30 * time.Second
	DefaultMultiplier = 2.0
)

// WithDefaults fills zero fields and makes Max at least Initial.
func (b Backoff) WithDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultInitial
	}
	if b.Max <= 0 {
		b.Max = DefaultMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = DefaultMultiplier
	}
	b.Jitter = min(max(b.Jitter, 0), 1)
	return b
}

// Delay is the delay before retry number attempt (0 for the first retry),
// without jitter.
func (b Backoff) Delay(attempt int) time.Duration {
	b = b.WithDefaults()
	d := float64(b.Initial)
	for i := 0; i < attempt && d < float64(b.Max); i++ {
		d *= b.Multiplier
	}
	return min(time.Duration(d), b.Max)
}

// Jittered is Delay with the policy's jitter applied.
func (b Backoff) Jittered(attempt int) time.Duration {
	b = b.WithDefaults()
	d := b.Delay(attempt)
	spread := int64(float64(d) * b.Jitter)
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread) + time.Duration(rand.Int64N(2*spread+1))
}

// Sleep waits d or until ctx ends, and reports whether the full delay
// elapsed. A delay of zero or less returns at once (true unless ctx has
// ended).
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
