package natsx

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
// is none) and a run fails on a blip NATS has long recovered from, so the
// services' JetStream requests are bounded and retried with Call.
const (
	// AttemptTimeout bounds one request; JetStream answers in
	// milliseconds when it is up.
	AttemptTimeout = 3 * time.Second
	// retryBudget bounds all attempts when the caller set no deadline.
	retryBudget  = 30 * time.Second
	firstBackoff = 50 * time.Millisecond
	maxBackoff   = time.Second
)

// Call runs f with a per-attempt timeout (AttemptTimeout), retrying
// transient failures with capped exponential backoff until the caller's
// context or a 30 s budget ends. Only wrap requests that are safe to
// repeat: reads, and writes guarded by an expected last sequence or
// revision (a retried write whose first attempt was stored then fails that
// check, which the caller must recognise).
func Call[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	return CallEach(ctx, AttemptTimeout, f)
}

// CallEach is Call with the per-attempt timeout given.
func CallEach[T any](ctx context.Context, attempt time.Duration, f func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(retryBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	backoff := firstBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		v, err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !Transient(err) || time.Now().Add(backoff).After(deadline) {
			return v, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// Transient reports whether err may go away by itself: a lost or
// unanswered request, or a connection that is reconnecting.
func Transient(err error) bool {
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
