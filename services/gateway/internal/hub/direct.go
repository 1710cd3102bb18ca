package hub

import (
	"context"
	"fmt"
	"time"
)

// Direct delivery. Waking one goroutine per client for every event costs
// the scheduler more than the write itself once a run has hundreds of
// viewers, and it is what stretches the tail of publish-to-client latency.
// So a client that is caught up (its goroutine is parked in Next with
// nothing to read) is written to by the run's fan-out goroutine directly,
// with a write that never blocks: one goroutine wakes per event for the
// whole run. Whatever the connection does not take at once is handed back
// to the client's own goroutine, which writes the rest under the write
// deadline and goes on as before, so a slow client is still cut by its
// deadline or queue bound without holding up the others.
//
// Exactly one side writes to a client at a time. The fan-out only claims a
// subscription that is parked (its goroutine holds nothing to write), and
// the goroutine does not return from Next while the subscription is
// claimed. Both flags change under the feed's lock.

// DirectWriter is the write side of a client connection that the feed may
// write to without blocking. A transport enables it once its stream has
// started (see Subscription.EnableDirect).
type DirectWriter interface {
	// TryWrite writes as much of frames (entries rendered by the framing
	// given to EnableDirect) as the connection accepts without
	// waiting and returns how many bytes that was. A full socket buffer is
	// not an error: it returns the bytes written so far (maybe 0) and nil.
	TryWrite(frames [][]byte) (int, error)
}

// Bounds of one direct write: the same order as a transport's own batch,
// well under IOV_MAX.
const (
	directMaxEntries = 64
	directMaxBytes   = 64 << 10
)

// EnableDirect lets the run's fan-out write this subscription's events to
// w, each as its rendering by Options.Framings[framing], while the owner
// is parked in Next. The owner must call it from its goroutine, after the
// stream's first bytes are written, and must write everything Next returns
// as Item.Frame(framing)[Item.Offset:].
func (s *Subscription) EnableDirect(w DirectWriter, framing int) {
	if framing < 0 || framing >= len(s.f.h.opts.Framings) {
		panic(fmt.Sprintf("gateway hub: EnableDirect with framing %d of %d", framing, len(s.f.h.opts.Framings)))
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.sink, s.framing = w, framing
}

// claim is one direct write in flight, owned by the fan-out goroutine.
type claim struct {
	s       *Subscription
	entries []*Entry // a sub-slice of the feed's buffer: never written to
	frames  [][]byte
	n       int
	err     error
	at      time.Time // when the write returned
}

// fanOut runs the direct writes of a feed until ctx ends. The feed's run
// goroutine owns it.
func (f *feed) fanOut(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	var claims []claim
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.fanWake:
		}
		claims = f.writeDirect(claims[:0])
		clear(claims) // do not keep subscriptions or entries alive
	}
}

// writeDirect claims every parked subscription with events to write, writes
// to each without blocking and records what went out. Subscriptions that
// need their own goroutine (a reset to send, a partial write to finish, the
// end of the stream) are woken.
func (f *feed) writeDirect(claims []claim) []claim {
	f.mu.Lock()
	for s := range f.subs {
		if s.sink == nil || !s.parked || s.claimed {
			continue
		}
		entries, ok := s.directEntriesLocked()
		if !ok {
			s.notify() // something only its goroutine can serve
			continue
		}
		if len(entries) == 0 {
			continue
		}
		s.claimed = true
		claims = append(claims, claim{s: s, entries: entries})
	}
	f.mu.Unlock()
	if len(claims) == 0 {
		return claims
	}

	writeClaims(claims)

	more := false
	f.mu.Lock()
	for i := range claims {
		claims[i].settleLocked()
		s := claims[i].s
		more = more || (s.parked && s.next <= f.lastSeq)
	}
	f.mu.Unlock()
	if more { // a write was bounded: the rest goes out in the next round
		f.wakeFanOut()
	}
	for i := range claims {
		claims[i].observe()
	}
	return claims
}

// directEntriesLocked returns the buffered entries the fan-out may write to
// s as they are: from s.next on, with no reset due before them and nothing
// half written. ok is false when s has something to serve that only its
// own goroutine can (a reset, a catch-up from JetStream, the end).
func (s *Subscription) directEntriesLocked() ([]*Entry, bool) {
	f := s.f
	switch {
	case s.err != nil, s.finished, s.next == 0, s.offset > 0,
		s.resetReason != "", s.noResetOnce, s.next <= f.trimmedThrough:
		return nil, false
	}
	i := f.searchLocked(s.next)
	if i == len(f.buf) {
		return nil, f.err == nil && !f.terminal
	}
	if f.buf[i].Seq != s.next {
		return nil, false // a gap: a reset is due
	}
	j, size := i, 0
	for j < len(f.buf) && j-i < directMaxEntries {
		n := len(f.buf[j].frames[s.framing])
		if size > 0 && size+n > directMaxBytes {
			break
		}
		size += n
		j++
	}
	return f.buf[i:j:j], true
}

// settleLocked moves the subscription past what was written and releases
// it; the rest of a partly written entry is left to its goroutine.
func (c *claim) settleLocked() {
	s := c.s
	s.claimed = false
	total := len(c.entries)
	left := c.n
	written := 0
	for _, e := range c.entries {
		size := len(e.frames[s.framing])
		if left < size {
			break
		}
		left -= size
		written++
	}
	for _, e := range c.entries[:written] {
		s.next = e.Seq + 1
		s.consumedCum = e.cum
		s.finished = e.Terminal
	}
	if written > 0 {
		s.wrote(c.entries[written-1].Cursor)
	}
	if written < total {
		s.offset = left // bytes of entry s.next already sent
	}
	c.entries = c.entries[:written]
	if c.err != nil {
		s.failLocked(fmt.Errorf("write to client: %w", c.err))
	}
	if s.err != nil || s.offset > 0 || written < total || s.finished || s.unparkWanted {
		// Handed back to the owner: appends wake it directly from now on,
		// until it parks again with nothing left to write.
		s.parked = false
		s.notify()
	}
}

// observe records the events that went out, outside the feed's lock.
func (c *claim) observe() {
	if len(c.entries) == 0 {
		return
	}
	s := c.s
	s.delivered.Add(float64(len(c.entries)))
	s.f.h.m.direct.Add(float64(len(c.entries)))
	for _, e := range c.entries {
		if !e.Published.IsZero() && e.Seq > s.attachSeq {
			s.lag.Observe(c.at.Sub(e.Published).Seconds())
		}
	}
}

// writeClaims writes each claim without blocking. Clients caught up to the
// same point get the same frames: they are gathered once per distinct
// start and framing.
func writeClaims(claims []claim) {
	var frames [][]byte
	var prev *claim
	for i := range claims {
		c := &claims[i]
		if prev == nil || prev.entries[0] != c.entries[0] || len(prev.entries) != len(c.entries) || prev.s.framing != c.s.framing {
			frames = make([][]byte, 0, len(c.entries))
			for _, e := range c.entries {
				frames = append(frames, e.frames[c.s.framing])
			}
		}
		c.frames = frames
		c.n, c.err = c.s.sink.TryWrite(frames)
		c.at = time.Now()
		prev = c
	}
}
