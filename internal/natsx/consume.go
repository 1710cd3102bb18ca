package natsx

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/retry"
)

// Consume pulls messages from cons one at a time and hands each to handle
// until ctx ends. A fetch that finds nothing waits again; one that fails is
// logged (as what) and retried after a second.
func Consume(ctx context.Context, cons jetstream.Consumer, log *slog.Logger, what string, handle func(jetstream.Msg)) {
	for ctx.Err() == nil {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				log.Warn(what+": fetch failed; retrying", "error", err)
				if !retry.Sleep(ctx, time.Second) {
					return
				}
			}
			continue
		}
		handle(msg)
	}
}
