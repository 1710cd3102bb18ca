package contextsvc

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A JetStream API request in flight when the NATS server restarts is lost
// with its connection, and one sent while JetStream is still recovering its
// store may get no responder. Without a bound per attempt such a request
// waits for the caller's whole deadline (JetStream's 5 s default when there
// is none) and a run fails on a blip NATS has long recovered from, so every
// request of the history store is bounded and retried.
const (
	// jsAttemptTimeout bounds one request; JetStream answers in
	// milliseconds when it is up.
	jsAttemptTimeout = 3 * time.Second
	// jsRetryBudget bounds all attempts when the caller set no deadline.
	jsRetryBudget  = 30 * time.Second
	jsFirstBackoff = 50 * time.Millisecond
	jsMaxBackoff   = time.Second
)

// jsCall runs f with a per-attempt timeout, retrying transient failures
// with capped exponential backoff until the caller's context or the retry
// budget ends. Every request it wraps is safe to repeat: reads, and
// publishes guarded by the subject's expected last sequence (a retried
// publish whose first attempt was stored fails that check and the append
// re-reads, finding its id).
func jsCall[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	return jsCallEach(ctx, jsAttemptTimeout, f)
}

// jsCallEach is jsCall with the per-attempt timeout given.
func jsCallEach[T any](ctx context.Context, attempt time.Duration, f func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(jsRetryBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	backoff := jsFirstBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		v, err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !transientJS(err) || time.Now().Add(backoff).After(deadline) {
			return v, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		backoff = min(2*backoff, jsMaxBackoff)
	}
}

// transientJS reports whether err may go away by itself: a lost or
// unanswered request, or a connection that is reconnecting.
func transientJS(err error) bool {
	for _, target := range []error{
		context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
