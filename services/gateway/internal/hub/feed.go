package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// feedPullMessages is how many messages the feed's consumer keeps in flight.
const feedPullMessages = 512

// feed is one run's shared view of its events: the JetStream consumer, the
// seq-ordered buffer every subscription reads, and the subscriptions.
type feed struct {
	h       *Hub
	key     feedKey
	subject string
	ready   chan struct{} // closed once started (or failed to)
	ctx     context.Context
	stopFn  context.CancelFunc

	startErr error // set before ready is closed

	// Guarded by h.mu.
	refs      int
	idleSince time.Time

	mu             sync.Mutex
	buf            []*Entry // increasing seq; gaps only where JetStream lost events
	bufBytes       uint64
	cum            uint64 // bytes of every entry appended so far
	lastSeq        uint64 // seq of the last entry appended
	initialLast    uint64 // last seq stored when the feed started
	trimmedThrough uint64 // highest seq dropped from buf for space (0: none)
	firstStreamSeq uint64 // stream sequence of the first entry received
	conversationID string
	terminal       bool
	err            error // why the feed stopped, once it has
	subs           map[*Subscription]struct{}

	fanWake chan struct{} // wakes the direct fan-out (capacity 1)
}

func newFeed(h *Hub, key feedKey, subject string) *feed {
	ctx, cancel := context.WithCancel(h.ctx)
	return &feed{
		h: h, key: key, subject: subject, ready: make(chan struct{}),
		ctx: ctx, stopFn: cancel, idleSince: time.Now(), subs: map[*Subscription]struct{}{},
		fanWake: make(chan struct{}, 1),
	}
}

// stop ends the feed's consumer; it does not wait.
func (f *feed) stop() { f.stopFn() }

// run starts the consumer and appends what it delivers until the hub
// closes or the feed is stopped. Hub.acquire starts it and counts it in
// h.wg.
func (f *feed) run() {
	defer f.h.wg.Done()
	defer f.stopFn()
	ctx := f.ctx

	it, err := f.start(ctx)
	if err != nil {
		f.startErr = fmt.Errorf("watch run %s: %w", f.key.runID, err)
		f.h.forget(f)
		close(f.ready)
		f.fail(f.startErr)
		return
	}
	f.h.m.feeds.Inc()
	defer f.h.m.feeds.Dec()
	close(f.ready)
	defer context.AfterFunc(ctx, it.Stop)()
	fanDone := make(chan struct{})
	go f.fanOut(ctx, fanDone)
	defer func() {
		f.stopFn()
		<-fanDone
	}()

	var r reorder
	for {
		var opts []jetstream.NextOpt
		if len(r.held) > 0 {
			opts = append(opts, jetstream.NextMaxWait(max(time.Until(r.since.Add(f.h.opts.ReorderWait)), time.Millisecond)))
		}
		msg, err := it.Next(opts...)
		if errors.Is(err, nats.ErrTimeout) {
			f.flushHeld(&r) // the missing events are not coming: accept the gap
			continue
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				err = ErrClosed
			}
			f.h.forget(f)
			f.fail(err)
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			f.h.m.badEvents.Inc()
			continue
		}
		e, err := decodeEntry(f.h.opts.Framings, f.key.tenant, f.key.runID, msg.Data(), meta.Sequence.Stream, meta.Timestamp)
		if err != nil {
			f.h.m.badEvents.Inc()
			f.h.log.Warn("skipping event", "tenant", f.key.tenant, "run_id", f.key.runID, "err", err)
			continue
		}
		f.offer(e, &r)
	}
}

// maxHeld bounds the events held back while waiting for a missing seq.
const maxHeld = 1024

// reorder holds events that arrived ahead of a missing seq. The
// orchestrator repairs a failed publish by re-appending events stored too
// early, so for a short while the stream can hold seq k+1 before k; the
// feed waits up to ReorderWait for k before accepting the gap. It is owned
// by the feed's goroutine.
type reorder struct {
	held  map[uint64]*Entry
	since time.Time
}

// offer appends e in seq order, holding it back if an earlier seq is
// missing.
func (f *feed) offer(e *Entry, r *reorder) {
	f.mu.Lock()
	last := f.lastSeq
	f.mu.Unlock()
	switch {
	case e.Seq <= last:
		return // duplicate
	case last == 0 || e.Seq == last+1:
		// The first event may be past 1 when older ones expired.
		f.append(e)
		for last = e.Seq; r.held[last+1] != nil; last++ {
			f.append(r.held[last+1])
			delete(r.held, last+1)
		}
		if len(r.held) == 0 {
			r.since = time.Time{}
		}
		return
	}
	if r.held == nil {
		r.held = map[uint64]*Entry{}
	}
	if len(r.held) >= maxHeld {
		f.flushHeld(r)
		f.append(e)
		return
	}
	if len(r.held) == 0 {
		r.since = time.Now()
	}
	r.held[e.Seq] = e
}

// flushHeld appends every held event in seq order, accepting the gap
// before them (subscribers that needed the missing seqs get a reset).
func (f *feed) flushHeld(r *reorder) {
	seqs := make([]uint64, 0, len(r.held))
	for s := range r.held {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		f.append(r.held[s])
	}
	clear(r.held)
	r.since = time.Time{}
}

// start reads where the run's events end now (so live subscribers know
// where live begins before the consumer has caught up) and opens the
// ordered consumer from the first retained event.
func (f *feed) start(ctx context.Context) (jetstream.MessagesContext, error) {
	st, err := f.h.eventStream(ctx)
	if err != nil {
		return nil, err
	}
	var last uint64
	raw, err := st.GetLastMsgForSubject(ctx, f.subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return nil, fmt.Errorf("read last event: %w", err)
	default:
		var ev baagentv1.Event
		if err := proto.Unmarshal(raw.Data, &ev); err != nil {
			return nil, fmt.Errorf("decode last event: %w", err)
		}
		last = ev.GetSeq()
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{f.subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(feedPullMessages))
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	f.mu.Lock()
	f.initialLast = last
	f.mu.Unlock()
	return it, nil
}

// append adds a delivered event, drops duplicates (a consumer reset can
// redeliver), trims the buffer, cuts subscribers whose unread live events
// exceed their bound and wakes the rest.
func (f *feed) append(e *Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Seq <= f.lastSeq || f.terminal {
		return
	}
	f.cum += e.size
	e.cum = f.cum
	f.buf = append(f.buf, e)
	f.bufBytes += e.size
	f.h.m.feedBytes.Add(float64(e.size))
	f.lastSeq = e.Seq
	if f.firstStreamSeq == 0 {
		f.firstStreamSeq = e.streamSeq
		f.conversationID = e.Event.GetConversationId()
	}
	f.terminal = e.Terminal
	f.h.m.feedEvents.Inc()
	f.trimLocked()

	limit := uint64(f.h.opts.SendQueueBytes)
	fan := false
	for s := range f.subs {
		// A client the fan-out is writing to is not behind: its position
		// moves once the writes of this round are settled.
		if !s.claimed && f.cum-max(s.consumedCum, s.attachCum) > limit {
			s.failLocked(ErrSlowConsumer)
			delete(f.subs, s)
			f.h.m.slow.WithLabelValues(s.transport, SlowQueue).Inc()
			continue
		}
		if s.sink != nil && s.parked {
			fan = true // written by the fan-out, or woken by it
			continue
		}
		s.notify()
	}
	if fan {
		f.wakeFanOut()
	}
}

// wakeFanOut asks the fan-out goroutine to look for direct writes.
func (f *feed) wakeFanOut() {
	select {
	case f.fanWake <- struct{}{}:
	default:
	}
}

// trimLocked drops the oldest entries once the buffer is over its bound,
// down to three quarters of it, copying the rest so the dropped entries
// can be collected.
func (f *feed) trimLocked() {
	limit := uint64(f.h.opts.FeedBufferBytes)
	if f.bufBytes <= limit || len(f.buf) < 2 {
		return
	}
	target := limit * 3 / 4
	i, freed := 0, uint64(0)
	for i < len(f.buf)-1 && f.bufBytes-freed > target {
		freed += f.buf[i].size
		i++
	}
	f.trimmedThrough = f.buf[i-1].Seq
	f.buf = append([]*Entry(nil), f.buf[i:]...)
	f.bufBytes -= freed
	f.h.m.feedBytes.Sub(float64(freed))
}

// fail records why the feed stopped and wakes its subscribers, which end
// with that error once they have read what is buffered... unless the run
// ended, in which case they finish normally.
func (f *feed) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
	for s := range f.subs {
		s.notify()
	}
	f.h.m.feedBytes.Sub(float64(f.bufBytes))
	f.bufBytes = 0
}

// search returns the index of the first buffered entry with seq >= seq.
func (f *feed) searchLocked(seq uint64) int {
	return sort.Search(len(f.buf), func(i int) bool { return f.buf[i].Seq >= seq })
}
