package external

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the capped exponential delay between reconnect or restart
// attempts of one server: Initial, then doubled per failed attempt up to Max,
// with ±20% jitter so that servers that fail together do not retry in step.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// Default backoff of reconnects and restarts.
const (
	DefaultBackoffInitial = 500 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
)

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoffInitial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoffMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// Delay is the delay before retry number attempt (0 for the first retry),
// without jitter.
func (b Backoff) Delay(attempt int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// jittered is Delay with ±20% jitter.
func (b Backoff) jittered(attempt int) time.Duration {
	d := b.Delay(attempt)
	spread := int64(d) / 5
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread) + time.Duration(rand.Int64N(2*spread+1))
}

// sleepCtx waits d or until ctx ends; it reports whether the full delay
// elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
