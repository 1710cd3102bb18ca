package hub

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Subscription is one client's position in a run's feed. Next and Close
// are called by the one goroutine that owns it (the client's writer).
type Subscription struct {
	f         *feed
	transport string
	wake      chan struct{}
	delivered prometheus.Counter  // the transport's, resolved once
	lag       prometheus.Observer // the transport's, resolved once

	// Guarded by f.mu.
	next        uint64 // seq wanted next
	attachSeq   uint64 // entries after this seq are live for this client
	attachCum   uint64 // f.cum when attached: replay is not charged to the queue
	consumedCum uint64 // cum of the last buffered entry read
	noResetOnce bool   // earliest: the first retained event needs no reset
	resetReason string // invalid cursor: reset before the first event
	requested   string // the cursor asked for, echoed in a reset
	finished    bool   // the terminal event (or final reset) was read
	err         error  // set when the feed cuts the client

	// Direct delivery (see direct.go), guarded by f.mu.
	sink         DirectWriter
	framing      int  // the index in Options.Framings of what sink takes
	parked       bool // the owner waits in Next with nothing to write
	claimed      bool // the fan-out is writing to the client
	unparkWanted bool // the owner is leaving and waits for the claim to end
	offset       int  // bytes of entry s.next the fan-out already wrote

	// resume is 1 + the cursor (a seq) of the last event written to the
	// client in full, 0 before any: set by the owner after its writes and
	// by the fan-out, read by Cursor, without the feed's lock.
	resume atomic.Uint64

	// Owned by the Next caller.
	closed    bool
	catchup   jetstream.MessagesContext // replay from JetStream, when behind the buffer
	catchNext *Entry                    // entry read from catchup, held behind a reset
}

// attach registers a subscription at its starting position.
func (f *feed) attach(req Request) *Subscription {
	c := parseCursor(req.Cursor)
	s := &Subscription{f: f, transport: req.Transport, wake: make(chan struct{}, 1), requested: c.raw,
		delivered: f.h.m.delivered.WithLabelValues(req.Transport), lag: f.h.m.lag.WithLabelValues(req.Transport)}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.attachSeq = max(f.lastSeq, f.initialLast)
	s.attachCum = f.cum
	switch c.kind {
	case cursorLive:
		s.next = s.attachSeq + 1
	case cursorEarliest:
		s.next, s.noResetOnce = 1, true
		f.h.m.replays.WithLabelValues("earliest").Inc()
	case cursorAfter:
		s.next = c.after + 1
		if c.after < s.attachSeq {
			f.h.m.replays.WithLabelValues("cursor").Inc()
		}
	case cursorInvalid:
		s.next, s.resetReason = 1, ReasonInvalid
	}
	if req.RunEnded && f.initialLast == 0 && f.lastSeq == 0 {
		// The run is over and nothing of it is retained: say so and end.
		s.resetReason, s.finished = ReasonEventsExpired, false
		s.next = 0
	}
	f.subs[s] = struct{}{}
	return s
}

// notify wakes the owner without blocking; called under f.mu.
func (s *Subscription) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// failLocked ends the subscription with err; called under f.mu.
func (s *Subscription) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.notify()
}

// Next returns the next item: replayed and live events in seq order, a
// stream_reset where a cursor could not be honoured, then io.EOF after the
// terminal event. It fails with ErrSlowConsumer when the client fell
// behind, ErrClosed when the hub stops, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (Item, error) {
	var one [1]Item
	items, _, err := s.NextBatch(ctx, nil, one[:0], 1, 0)
	if err != nil {
		return Item{}, err
	}
	return items[0], nil
}

// NextOrTick is Next that also returns, with ticked set, when tick fires
// while it waits, so a transport can send heartbeats from the same loop.
func (s *Subscription) NextOrTick(ctx context.Context, tick <-chan time.Time) (Item, bool, error) {
	var one [1]Item
	items, ticked, err := s.NextBatch(ctx, tick, one[:0], 1, 0)
	if err != nil || ticked {
		return Item{}, ticked, err
	}
	return items[0], false, nil
}

// NextBatch is NextOrTick for a batch: it waits for the next item like
// Next, then appends to dst every further item already buffered, up to
// maxItems items and about maxBytes of JSON (0: no byte bound), all under
// one lock. A transport thus wakes, locks, writes and flushes once per
// batch instead of once per event, which is what lets one run's events
// reach many clients cheaply. It returns dst with at least one item added,
// or ticked set (nothing added), or an error (nothing added; items already
// in the batch were served before it and the same error comes again).
func (s *Subscription) NextBatch(ctx context.Context, tick <-chan time.Time, dst []Item, maxItems, maxBytes int) ([]Item, bool, error) {
	items, err := s.wait(ctx, tick, dst, max(maxItems, 1), maxBytes)
	if errors.Is(err, errTicked) {
		return dst, true, nil
	}
	return items, false, err
}

var errTicked = errors.New("ticked")

func (s *Subscription) wait(ctx context.Context, tick <-chan time.Time, dst []Item, maxItems, maxBytes int) ([]Item, error) {
	if s.closed {
		return dst, ErrClosed
	}
	f := s.f
	for {
		if s.catchup != nil || s.catchNext != nil {
			it, ok, err := s.nextFromJetStream(ctx)
			if err != nil {
				return dst, err
			}
			if ok {
				return append(dst, it), nil
			}
			continue // the buffer reaches back far enough again
		}
		f.mu.Lock()
		if s.claimed {
			// The fan-out is writing to the client: nothing may be written
			// until it is done, and it wakes the owner if it has to.
			f.mu.Unlock()
			if err := s.park(ctx, tick); err != nil {
				return dst, err
			}
			continue
		}
		it, ok, err := s.nextLocked()
		if ok {
			dst = s.fillLocked(append(dst, it), maxItems, maxBytes)
		}
		needCatchup := !ok && err == nil && s.next <= f.trimmedThrough
		// Once parked, an append wakes the fan-out instead of the owner.
		s.parked = !ok && err == nil && !needCatchup
		f.mu.Unlock()
		if err != nil || ok {
			return dst, err
		}
		if needCatchup {
			if err := s.openCatchup(ctx); err != nil {
				return dst, err
			}
			continue
		}
		if err := s.park(ctx, tick); err != nil {
			return dst, err
		}
	}
}

// park waits for a wake-up. On a tick or the end of ctx the subscription
// stops being parked (waiting for a direct write in flight to finish), so
// the owner may write; a tick during a direct write, or with an event half
// written, is skipped.
func (s *Subscription) park(ctx context.Context, tick <-chan time.Time) error {
	f := s.f
	select {
	case <-s.wake:
		return nil
	case <-tick:
		f.mu.Lock()
		defer f.mu.Unlock()
		if s.claimed || s.offset > 0 {
			// The client is receiving data, or has half an event to finish
			// first: a heartbeat now is not needed, or would split it.
			return nil
		}
		s.parked = false
		return errTicked
	case <-ctx.Done():
		s.unpark()
		return ctx.Err()
	}
}

// unpark takes the subscription back from the fan-out before its owner
// leaves: it waits for a direct write in flight, which never blocks.
func (s *Subscription) unpark() {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for s.claimed {
		s.unparkWanted = true
		f.mu.Unlock()
		<-s.wake
		f.mu.Lock()
	}
	s.unparkWanted = false
	s.parked = false
}

// fillLocked appends the items already buffered after the last one in
// batch, within the bounds. Whatever stops it (nothing more yet, the end,
// an error, a catch-up from JetStream) is met again by the next wait.
func (s *Subscription) fillLocked(batch []Item, maxItems, maxBytes int) []Item {
	size := 0
	for _, it := range batch {
		size += len(it.JSON)
	}
	for len(batch) < maxItems && (maxBytes <= 0 || size < maxBytes) {
		it, ok, err := s.nextLocked()
		if err != nil || !ok {
			break
		}
		batch = append(batch, it)
		size += len(it.JSON)
	}
	return batch
}

// nextLocked serves the next item from the buffer if it can; ok is false
// when the caller must wait (or catch up from JetStream).
func (s *Subscription) nextLocked() (Item, bool, error) {
	f := s.f
	if s.err != nil {
		return Item{}, false, s.err
	}
	if s.finished {
		return Item{}, false, io.EOF
	}
	if s.next == 0 { // run ended with nothing retained
		s.finished = true
		return Item{Entry: resetEntry(f.h.opts.Framings, f.key.tenant, f.key.runID, "", s.requested, s.resetReason, 0)}, true, nil
	}
	if s.next <= f.trimmedThrough {
		if s.offset > 0 { // as below: the rest of a half-written entry is gone
			s.err = ErrSlowConsumer
			return Item{}, false, s.err
		}
		return Item{}, false, nil
	}
	i := f.searchLocked(s.next)
	if i == len(f.buf) {
		switch {
		case f.terminal:
			s.finished = true
			return Item{}, false, io.EOF
		case f.err != nil:
			return Item{}, false, f.err
		}
		return Item{}, false, nil
	}
	e := f.buf[i]
	offset := s.offset
	if offset > 0 && e.Seq != s.next {
		// The entry half written by the fan-out is gone: the client cannot
		// be given the rest of it. (Its queue bound, well under the
		// buffer's, cuts it long before that can happen.)
		s.err = ErrSlowConsumer
		return Item{}, false, s.err
	}
	if r := s.resetBefore(e); r != nil {
		return Item{Entry: r}, true, nil
	}
	s.offset = 0
	s.next = e.Seq + 1
	s.consumedCum = e.cum
	s.finished = e.Terminal
	return Item{Entry: e, Live: e.Seq > s.attachSeq, Offset: offset}, true, nil
}

// resetBefore returns the stream_reset due before e, if any, and moves the
// position to e. A reset is due when e is not the seq asked for (the events
// in between are no longer retained) or the cursor was invalid.
func (s *Subscription) resetBefore(e *Entry) *Entry {
	f := s.f
	reason := s.resetReason
	if reason == "" && e.Seq > s.next && !s.noResetOnce {
		reason = ReasonExpired
	}
	s.noResetOnce, s.resetReason = false, ""
	if reason == "" {
		return nil
	}
	s.next = e.Seq
	f.h.m.replays.WithLabelValues("reset").Inc()
	return resetEntry(f.h.opts.Framings, f.key.tenant, f.key.runID, e.Event.GetConversationId(), s.requested, reason, e.Seq)
}

// openCatchup starts reading the run's events from JetStream, for a client
// whose position is older than the buffer.
func (s *Subscription) openCatchup(ctx context.Context) error {
	f := s.f
	st, err := f.h.eventStream(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	start := f.firstStreamSeq
	f.mu.Unlock()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.subject}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if start > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(feedPullMessages))
	if err != nil {
		return err
	}
	s.catchup = it
	f.h.m.replays.WithLabelValues("jetstream_catchup").Inc()
	return nil
}

// nextFromJetStream serves the next item from the catch-up consumer; ok is
// false once the buffer covers the position again (the consumer is then
// closed).
func (s *Subscription) nextFromJetStream(ctx context.Context) (Item, bool, error) {
	f := s.f
	for {
		e := s.catchNext
		s.catchNext = nil
		if e == nil {
			f.mu.Lock()
			covered := s.next > f.trimmedThrough
			err := s.err
			f.mu.Unlock()
			if err != nil {
				return Item{}, false, err
			}
			if covered {
				s.stopCatchup()
				return Item{}, false, nil
			}
			msg, err := s.catchup.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil {
					return Item{}, false, ctx.Err()
				}
				return Item{}, false, err
			}
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			e, err = decodeEntry(f.h.opts.Framings, f.key.tenant, f.key.runID, msg.Data(), meta.Sequence.Stream, meta.Timestamp)
			if err != nil {
				continue
			}
		}
		f.mu.Lock()
		if e.Seq < s.next {
			f.mu.Unlock()
			continue
		}
		if r := s.resetBefore(e); r != nil {
			s.catchNext = e
			f.mu.Unlock()
			return Item{Entry: r}, true, nil
		}
		s.next = e.Seq + 1
		s.finished = e.Terminal
		f.mu.Unlock()
		if e.Terminal {
			s.stopCatchup()
		}
		return Item{Entry: e}, true, nil
	}
}

func (s *Subscription) stopCatchup() {
	if s.catchup != nil {
		s.catchup.Stop()
		s.catchup = nil
	}
}

// Cursor is the cursor of the last event written to the client in full (by
// the owner, as reported to DeliveredBatch, or by the fan-out): where the
// client resumes without a gap after the subscription ends. It is "" when
// nothing was written yet.
func (s *Subscription) Cursor() string {
	v := s.resume.Load()
	if v == 0 {
		return ""
	}
	return FormatCursor(v - 1)
}

// wrote records that the event with cursor c was written in full.
func (s *Subscription) wrote(c string) {
	if seq, err := strconv.ParseUint(c, 10, 64); err == nil {
		s.resume.Store(seq + 1)
	}
}

// Delivered records that the transport wrote it to the client.
func (s *Subscription) Delivered(it Item) {
	s.DeliveredBatch([]Item{it})
}

// DeliveredBatch records that the transport wrote items to the client, with
// one clock read for the batch.
func (s *Subscription) DeliveredBatch(items []Item) {
	if len(items) == 0 {
		return
	}
	s.delivered.Add(float64(len(items)))
	for i := len(items) - 1; i >= 0; i-- {
		if c := items[i].Cursor; c != "" {
			s.wrote(c)
			break
		}
	}
	var now time.Time
	for _, it := range items {
		if it.Live && !it.Published.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			s.lag.Observe(now.Sub(it.Published).Seconds())
		}
	}
}

// WriteTimedOut records that the client was cut because a write exceeded
// its deadline.
func (s *Subscription) WriteTimedOut() {
	s.f.h.m.slow.WithLabelValues(s.transport, SlowDeadline).Inc()
}

// Close ends the subscription and releases its share of the feed. It is
// idempotent.
func (s *Subscription) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.stopCatchup()
	f := s.f
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
	f.h.release(f)
	f.h.m.clients.WithLabelValues(s.transport).Dec()
}

// IsSlowConsumer reports whether err means the client was cut for falling
// behind.
func IsSlowConsumer(err error) bool { return errors.Is(err, ErrSlowConsumer) }
