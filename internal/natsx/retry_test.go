package natsx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A request lost with its connection times out per attempt and is retried;
// a permanent error is returned at once.
func TestCallRetriesLostRequests(t *testing.T) {
	calls := 0
	began := time.Now()
	v, err := CallEach(context.Background(), 50*time.Millisecond, func(ctx context.Context) (int, error) {
		calls++
		if calls < 3 {
			<-ctx.Done() // never answered
			return 0, ctx.Err()
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls != 3 {
		t.Fatalf("got %d, %v after %d calls", v, err, calls)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("took %s", d)
	}

	calls = 0
	_, err = CallEach(context.Background(), time.Second, func(context.Context) (int, error) {
		calls++
		return 0, jetstream.ErrMsgNotFound
	})
	if !errors.Is(err, jetstream.ErrMsgNotFound) || calls != 1 {
		t.Fatalf("permanent error: %v after %d calls", err, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began = time.Now()
	_, err = CallEach(ctx, 50*time.Millisecond, func(ctx context.Context) (int, error) {
		return 0, nats.ErrNoResponders
	})
	if !errors.Is(err, nats.ErrNoResponders) || time.Since(began) > 2*time.Second {
		t.Fatalf("caller's deadline: %v after %s", err, time.Since(began))
	}
}
