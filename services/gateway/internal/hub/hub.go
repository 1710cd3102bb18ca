// Package hub fans a run's events out to every client watching it. Each run
// being watched has one feed: one JetStream ordered consumer on the run's
// subject and one bounded in-memory buffer of decoded events, shared by all
// of the run's viewers whatever their transport. A subscription reads the
// feed by seq: it replays from its cursor (out of the buffer, or out of
// JetStream when the buffer no longer reaches back that far) and continues
// with live events with no gap and no duplicate, because both come from the
// same seq-ordered buffer. A cursor older than what JetStream retains gets
// an explicit stream_reset. A viewer whose unread live events exceed its
// queue bound is cut as a slow consumer; the others are unaffected. Feeds
// nobody watches are released after an idle timeout.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/natsx"
)

// Defaults for Options.
const (
	DefaultSendQueueBytes  = 1 << 20 // 1 MiB of unread live events per client
	DefaultFeedBufferBytes = 4 << 20 // 4 MiB of replay buffer per run
	DefaultMaxFeeds        = 1024
	DefaultIdleTimeout     = 30 * time.Second
	// DefaultReorderWait covers the orchestrator's repair of a failed
	// publish (an ack wait of 5 s, then a republish in order).
	DefaultReorderWait = 10 * time.Second
	// RetryAfter is the hint given to a client cut as a slow consumer.
	RetryAfter = time.Second
)

// Errors a subscription ends with besides io.EOF (after the terminal event).
var (
	// ErrSlowConsumer: the client fell behind by more than its queue bound;
	// it should reconnect with its last cursor after RetryAfter.
	ErrSlowConsumer = errors.New("slow_consumer: the client fell too far behind; resume from the last cursor received")
	// ErrClosed: the hub is shutting down.
	ErrClosed = errors.New("event hub is shutting down")
	// ErrTooManyFeeds: MaxFeeds runs are being watched and none is idle.
	ErrTooManyFeeds = errors.New("too many runs are being watched on this gateway; retry later")
)

// Options configures a [Hub].
type Options struct {
	// JetStream reads the event stream; required.
	JetStream jetstream.JetStream
	// Stream is the events stream name; "" means natsx.StreamEvents.
	Stream string
	// Logger receives the hub's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the baagent_gateway_* stream collectors; nil
	// registers none.
	Registerer prometheus.Registerer
	// SendQueueBytes bounds the live events a client has not yet read
	// (default 1 MiB); over it the client is cut as a slow consumer.
	SendQueueBytes int
	// FeedBufferBytes bounds one run's replay buffer (default 4 MiB, at
	// least twice SendQueueBytes). Older events are replayed from
	// JetStream.
	FeedBufferBytes int
	// MaxFeeds bounds the runs watched at once (default 1024).
	MaxFeeds int
	// IdleTimeout is how long a feed nobody watches is kept (default 30 s).
	IdleTimeout time.Duration
	// ReorderWait is how long an event that arrives ahead of a missing seq
	// is held back waiting for it (default 10 s); after that the gap is
	// accepted and clients that needed it get a stream_reset.
	ReorderWait time.Duration
	// Framings are the wire renderings of the transports that write an
	// entry's bytes as they are (see Framing); each entry is rendered once
	// per framing, for all its viewers. Entry.Frame(i) is Framings[i]'s.
	Framings []Framing
}

// Request is one subscription.
type Request struct {
	// Tenant and RunID name the run; the caller has checked that the tenant
	// owns it.
	Tenant, RunID string
	// Cursor is where to resume (see the cursor format in cursor.go).
	Cursor string
	// Transport labels the client's metrics: TransportGRPC, TransportSSE or
	// TransportWS.
	Transport string
	// RunEnded tells the hub the run is in a terminal state, so that a run
	// whose events have all expired ends with a stream_reset instead of
	// waiting forever.
	RunEnded bool
}

type feedKey struct{ tenant, runID string }

// Hub is the fan-out of run events. It is safe for concurrent use.
type Hub struct {
	opts Options
	log  *slog.Logger
	m    *metrics

	ctx    context.Context // ends when the hub closes; feeds run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // feed goroutines

	streamMu sync.Mutex
	stream   jetstream.Stream

	mu     sync.Mutex
	feeds  map[feedKey]*feed
	closed bool
}

// New returns a Hub. Call Run to release idle feeds, and Close (or end
// Run's context) to stop every feed.
func New(opts Options) (*Hub, error) {
	if opts.JetStream == nil {
		return nil, errors.New("gateway hub: Options.JetStream is required")
	}
	if len(opts.Framings) > MaxFramings {
		return nil, fmt.Errorf("gateway hub: %d Options.Framings, at most %d", len(opts.Framings), MaxFramings)
	}
	if opts.Stream == "" {
		opts.Stream = natsx.StreamEvents
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SendQueueBytes <= 0 {
		opts.SendQueueBytes = DefaultSendQueueBytes
	}
	if opts.FeedBufferBytes <= 0 {
		opts.FeedBufferBytes = DefaultFeedBufferBytes
	}
	if opts.FeedBufferBytes < 2*opts.SendQueueBytes {
		opts.FeedBufferBytes = 2 * opts.SendQueueBytes
	}
	if opts.MaxFeeds <= 0 {
		opts.MaxFeeds = DefaultMaxFeeds
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.ReorderWait <= 0 {
		opts.ReorderWait = DefaultReorderWait
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{
		opts: opts, log: opts.Logger.With("component", "event-hub"), m: m,
		ctx: ctx, cancel: cancel, feeds: map[feedKey]*feed{},
	}, nil
}

// Run releases idle feeds until ctx ends, then closes the hub.
func (h *Hub) Run(ctx context.Context) error {
	t := time.NewTicker(max(h.opts.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.Close()
			return nil
		case <-h.ctx.Done():
			return nil
		case now := <-t.C:
			h.releaseIdle(now, h.opts.IdleTimeout)
		}
	}
}

// Close stops every feed; open subscriptions end with ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// Feeds is the number of runs with an active feed.
func (h *Hub) Feeds() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

// Watching reports whether a feed for the run is active and has received
// events, which proves the run exists for the tenant (its events are on the
// tenant's subject).
func (h *Hub) Watching(tenant, runID string) bool {
	h.mu.Lock()
	f := h.feeds[feedKey{tenant, runID}]
	h.mu.Unlock()
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastSeq > 0
}

// releaseIdle stops feeds nobody has watched for idle.
func (h *Hub) releaseIdle(now time.Time, idle time.Duration) {
	var stop []*feed
	h.mu.Lock()
	for k, f := range h.feeds {
		if f.refs == 0 && now.Sub(f.idleSince) >= idle {
			delete(h.feeds, k)
			stop = append(stop, f)
		}
	}
	h.mu.Unlock()
	for _, f := range stop {
		f.stop()
	}
}

// Subscribe starts a subscription to a run's events. The caller owns it:
// call Next from one goroutine and Close when done.
func (h *Hub) Subscribe(ctx context.Context, req Request) (*Subscription, error) {
	if err := natsx.ValidateToken("tenant", req.Tenant); err != nil {
		return nil, err
	}
	if err := natsx.ValidateToken("run_id", req.RunID); err != nil {
		return nil, err
	}
	switch req.Transport {
	case TransportGRPC, TransportSSE, TransportWS:
	default:
		return nil, fmt.Errorf("gateway hub: unknown transport %q", req.Transport)
	}
	f, err := h.acquire(ctx, feedKey{req.Tenant, req.RunID})
	if err != nil {
		return nil, err
	}
	s := f.attach(req)
	h.m.clients.WithLabelValues(req.Transport).Inc()
	return s, nil
}

// acquire returns the run's started feed, creating it if needed, with one
// reference taken for the caller.
func (h *Hub) acquire(ctx context.Context, key feedKey) (*feed, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	f := h.feeds[key]
	if f == nil {
		if len(h.feeds) >= h.opts.MaxFeeds && !h.evictOneLocked() {
			h.mu.Unlock()
			return nil, ErrTooManyFeeds
		}
		subject, err := natsx.EventSubject(key.tenant, key.runID)
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		f = newFeed(h, key, subject)
		h.feeds[key] = f
		h.wg.Add(1)
		go f.run()
	}
	f.refs++
	h.mu.Unlock()

	select {
	case <-f.ready:
	case <-ctx.Done():
		h.release(f)
		return nil, ctx.Err()
	}
	if f.startErr != nil {
		h.release(f)
		return nil, f.startErr
	}
	return f, nil
}

// evictOneLocked stops the longest-idle feed nobody watches, if any.
func (h *Hub) evictOneLocked() bool {
	var victim *feed
	for _, f := range h.feeds {
		if f.refs == 0 && (victim == nil || f.idleSince.Before(victim.idleSince)) {
			victim = f
		}
	}
	if victim == nil {
		return false
	}
	delete(h.feeds, victim.key)
	victim.stop() // only cancels; the feed's goroutine is in h.wg
	return true
}

// release drops one reference to f.
func (h *Hub) release(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.refs--
	if f.refs == 0 {
		f.idleSince = time.Now()
	}
}

// forget removes a feed that failed, so the next subscriber starts afresh.
func (h *Hub) forget(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.feeds[f.key] == f {
		delete(h.feeds, f.key)
	}
}

// eventStream returns the events stream handle, looked up once.
func (h *Hub) eventStream(ctx context.Context) (jetstream.Stream, error) {
	h.streamMu.Lock()
	defer h.streamMu.Unlock()
	if h.stream != nil {
		return h.stream, nil
	}
	st, err := h.opts.JetStream.Stream(ctx, h.opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("event stream %s: %w", h.opts.Stream, err)
	}
	h.stream = st
	return st, nil
}
