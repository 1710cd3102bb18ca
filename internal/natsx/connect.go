package natsx

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Reconnect pacing for Connect: a short wait with jitter so that many
// replicas reconnecting after a NATS restart do not arrive in lockstep.
const (
	reconnectWait   = time.Second
	reconnectJitter = 500 * time.Millisecond
)

// Connect dials serverURL (one or more comma-separated NATS URLs) as client name.
// The connection reconnects forever and logs disconnects, reconnects and
// closes, because a service should ride out a NATS restart rather than die.
// The first connect is retried until ctx is done, so services may start
// before NATS does; the error then names the URL (credentials redacted) and
// the last connect error.
func Connect(ctx context.Context, serverURL, name string, logger *slog.Logger) (*nats.Conn, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "nats", "client", name)
	shown := redactURLs(serverURL)

	connected := make(chan struct{}, 1)
	nc, err := nats.Connect(serverURL,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectJitter, reconnectJitter),
		nats.RetryOnFailedConnect(true),
		nats.ConnectHandler(func(c *nats.Conn) {
			log.Info("connected to NATS", "url", c.ConnectedUrlRedacted())
			select {
			case connected <- struct{}{}:
			default:
			}
		}),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", "err", err)
			} else {
				log.Info("disconnected from NATS")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("reconnected to NATS", "url", c.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(c *nats.Conn) {
			if err := c.LastError(); err != nil {
				log.Warn("NATS connection closed", "err", err)
			} else {
				log.Info("NATS connection closed")
			}
		}),
		nats.ErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{"err", err}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			log.Error("NATS async error", attrs...)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, err)
	}
	if nc.IsConnected() {
		return nc, nil
	}
	select {
	case <-connected:
		return nc, nil
	case <-ctx.Done():
		last := nc.LastError()
		nc.Close()
		if last != nil {
			return nil, fmt.Errorf("connect to NATS at %s: %w (last error: %v); is the server running and reachable?", shown, ctx.Err(), last)
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w; is the server running and reachable?", shown, ctx.Err())
	}
}

// redactURLs hides passwords and tokens in a comma-separated URL list so the
// list can appear in errors and logs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		if err != nil {
			if at := strings.LastIndex(p, "@"); at >= 0 {
				p = "xxxxx" + p[at:]
			}
			parts[i] = p
			continue
		}
		if u.User == nil {
			parts[i] = p
			continue
		}
		if _, hasPw := u.User.Password(); hasPw {
			parts[i] = u.Redacted()
		} else {
			// A lone user part is a token.
			u.User = url.User("xxxxx")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
