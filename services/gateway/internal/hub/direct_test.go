package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// fakeConn stands in for a client connection written by both the run's
// fan-out (TryWrite) and the subscription's owner (write). It records the
// byte stream the client would read and detects two writers at once.
type fakeConn struct {
	mu       sync.Mutex
	out      bytes.Buffer
	inUse    atomic.Bool
	overlaps atomic.Int64
	// accept, when set, is how many bytes a TryWrite takes (of want);
	// otherwise all of them.
	accept func(want int) int
	fail   error // TryWrite's error, when set
	tries  atomic.Int64
	// framing is what the owner writes of what Next returns, and the
	// fan-out too (framingLines if 0).
	framing int
}

func (c *fakeConn) enter() {
	if !c.inUse.CompareAndSwap(false, true) {
		c.overlaps.Add(1)
	}
}

func (c *fakeConn) leave() { c.inUse.Store(false) }

func (c *fakeConn) TryWrite(frames [][]byte) (int, error) {
	c.enter()
	defer c.leave()
	c.tries.Add(1)
	if c.fail != nil {
		return 0, c.fail
	}
	all := bytes.Join(frames, nil)
	n := len(all)
	if c.accept != nil {
		n = min(c.accept(n), n)
	}
	c.mu.Lock()
	c.out.Write(all[:n])
	c.mu.Unlock()
	return n, nil
}

// write is the owner's blocking write of what Next returned.
func (c *fakeConn) write(items []Item) {
	c.enter()
	defer c.leave()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range items {
		c.out.Write(it.Frame(c.framing)[it.Offset:])
	}
}

func (c *fakeConn) writeRaw(p []byte) {
	c.enter()
	defer c.leave()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Write(p)
}

func (c *fakeConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// ownSSE runs a subscription's owner the way the SSE transport does:
// direct delivery enabled, every batch Next returns written to conn, until
// the stream ends. It returns how many items the owner wrote itself.
func ownSSE(ctx context.Context, s *Subscription, conn *fakeConn) (int, error) {
	return ownSSETicking(ctx, s, conn, nil)
}

// ownResult is how an owner run by startOwner ended.
type ownResult struct {
	own int // events the owner wrote itself
	err error
}

// startOwner runs ownSSE in a goroutine; its result arrives on the channel.
func startOwner(ctx context.Context, s *Subscription, conn *fakeConn) <-chan ownResult {
	done := make(chan ownResult, 1)
	go func() {
		own, err := ownSSE(ctx, s, conn)
		done <- ownResult{own, err}
	}()
	return done
}

// heartbeat is what ownSSETicking writes on a tick, as the SSE transport
// does.
var heartbeat = []byte(": heartbeat\n\n")

// ownSSETicking is ownSSE with a heartbeat written on each tick.
func ownSSETicking(ctx context.Context, s *Subscription, conn *fakeConn, tick <-chan time.Time) (int, error) {
	s.EnableDirect(conn, conn.framing)
	own := 0
	var batch []Item
	for {
		var err error
		var ticked bool
		batch, ticked, err = s.NextBatch(ctx, tick, batch[:0], 16, 0)
		switch {
		case errors.Is(err, io.EOF):
			return own, nil
		case err != nil:
			return own, err
		case ticked:
			conn.writeRaw(heartbeat)
			continue
		}
		conn.write(batch)
		own += len(batch)
	}
}

// wantStream checks that the client read exactly the frames of seqs
// first..last, in order, once each.
func wantStream(t *testing.T, got []byte, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		n := 0
		for n < min(len(got), len(want)) && got[n] == want[n] {
			n++
		}
		t.Fatalf("the client read %d bytes, want %d; they differ from byte %d:\n got …%q\nwant …%q",
			len(got), len(want), n, got[n:min(len(got), n+80)], want[n:min(len(want), n+80)])
	}
}

// framesOf is the stream a reader of every event of r (seq 1 on) reads.
func framesOf(t *testing.T, ctx context.Context, h *Hub, r *natstest.Run) []byte {
	t.Helper()
	s := subscribe(t, ctx, h, r, Earliest)
	var b bytes.Buffer
	for {
		it, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return b.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		b.Write(it.Frame(framingLines))
	}
}

func TestDirectDeliveryWritesCaughtUpClientsFromTheFanOut(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-direct")
	publishTexts(t, ctx, r, 1)

	conn := &fakeConn{}
	s := subscribe(t, ctx, h, r, "")
	done := startOwner(ctx, s, conn)
	// Publish one event at a time once the owner is parked, so each goes
	// out through the fan-out.
	for i := range 20 {
		waitParked(t, s)
		if _, err := r.Text(ctx, "live "); err != nil {
			t.Fatal(err)
		}
		waitDelivered(t, conn, i+1)
	}
	waitParked(t, s)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("owner: %v", res.err)
	}
	own := res.own
	all := framesOf(t, ctx, h, r)
	first := bytes.Index(all, []byte("id: 2\n")) // live from seq 2
	wantStream(t, conn.bytes(), all[first:])
	if own != 0 {
		t.Errorf("the owner wrote %d events itself; every one was due to the fan-out", own)
	}
	if got := testutil.ToFloat64(h.DirectDeliveries()); got != 21 {
		t.Errorf("direct deliveries %v, want 21", got)
	}
	if n := conn.overlaps.Load(); n != 0 {
		t.Fatalf("%d writes overlapped", n)
	}
	if got := s.Cursor(); got != FormatCursor(r.Seq()) {
		t.Errorf("Cursor() = %q after the end, want %q", got, FormatCursor(r.Seq()))
	}
}

func TestDirectPartialWriteIsFinishedByTheOwner(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-partial")
	publishTexts(t, ctx, r, 1)

	// The socket takes 7 bytes of each direct write: the owner must write
	// the rest of the entry, from that offset, and nothing twice.
	conn := &fakeConn{accept: func(int) int { return 7 }}
	s := subscribe(t, ctx, h, r, "")
	done := startOwner(ctx, s, conn)
	for range 10 {
		waitParked(t, s)
		if _, err := r.Text(ctx, "a longer live event than seven bytes"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("owner: %v", res.err)
	}
	own := res.own
	all := framesOf(t, ctx, h, r)
	from := bytes.Index(all, []byte("id: 2\n"))
	if from < 0 {
		t.Fatalf("no frame with id 2 in %q", all)
	}
	wantStream(t, conn.bytes(), all[from:])
	if own == 0 || conn.tries.Load() == 0 {
		t.Fatalf("owner wrote %d, fan-out tried %d: want both", own, conn.tries.Load())
	}
}

func TestDirectWriteErrorEndsTheSubscription(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-broken")
	publishTexts(t, ctx, r, 1)

	broken := errors.New("connection reset by peer")
	conn := &fakeConn{fail: broken}
	s := subscribe(t, ctx, h, r, "")
	done := startOwner(ctx, s, conn)
	waitParked(t, s)
	if _, err := r.Text(ctx, "never arrives"); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if !errors.Is(res.err, broken) {
			t.Fatalf("owner ended with %v, want the write error", res.err)
		}
	case <-ctx.Done():
		t.Fatal("the owner was not told the direct write failed")
	}
}

func TestDirectOwnerGetsHeartbeatsAndLeavesCleanly(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-tick")
	publishTexts(t, ctx, r, 1)
	s := subscribe(t, ctx, h, r, "")
	s.EnableDirect(&fakeConn{}, framingLines)
	tick := make(chan time.Time, 1)
	tick <- time.Now()
	items, ticked, err := s.NextBatch(ctx, tick, nil, 4, 0)
	if err != nil || !ticked || len(items) != 0 {
		t.Fatalf("NextBatch on a tick: %d items, ticked %v, %v", len(items), ticked, err)
	}
	leave, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.NextBatch(leave, nil, nil, 4, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("NextBatch after the client left: %v", err)
	}
}

// TestDirectAndOwnerWritesNeverInterleave: many clients whose sockets take
// a random share of each direct write, with events published as fast as
// possible and heartbeats due all the time. Every client must read exactly
// the run's frames, in order, with no byte lost, repeated or interleaved
// (a heartbeat only ever between two frames), and no two writes at once;
// for framings of lines and of length-prefixed frames alike.
func TestDirectAndOwnerWritesNeverInterleave(t *testing.T) {
	t.Parallel()

	for _, f := range []struct {
		name    string
		framing int
	}{{"lines", framingLines}, {"length-prefixed", framingLength}} {
		t.Run(f.name, func(t *testing.T) { testNeverInterleave(t, f.framing) })
	}
}

func testNeverInterleave(t *testing.T, framing int) {
	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-race")
	publishTexts(t, ctx, r, 1)

	const clients, events = 8, 300
	conns := make([]*fakeConn, clients)
	errs := make(chan error, clients)
	for i := range conns {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		var rmu sync.Mutex
		conns[i] = &fakeConn{framing: framing, accept: func(want int) int {
			rmu.Lock()
			defer rmu.Unlock()
			if rng.IntN(3) == 0 {
				return rng.IntN(want + 1) // a full socket: some or none of it
			}
			return want
		}}
		s := subscribe(t, ctx, h, r, "")
		// Heartbeats as often as events: one must never land inside an
		// event the fan-out has half written.
		tick := time.NewTicker(time.Duration(100+i*37) * time.Microsecond)
		t.Cleanup(tick.Stop)
		go func() {
			_, err := ownSSETicking(ctx, s, conns[i], tick.C)
			errs <- err
		}()
	}
	for i := range events {
		if _, err := r.Text(ctx, "event "+FormatCursor(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatalf("owner: %v", err)
		}
	}
	var want [][]byte // the frames of seq 2 on
	for _, e := range entriesOf(t, ctx, h, r)[1:] {
		want = append(want, e.Frame(framing))
	}
	for ci, c := range conns {
		if n := c.overlaps.Load(); n != 0 {
			t.Fatalf("client %d: %d writes overlapped", ci, n)
		}
		if err := readFrames(c.bytes(), want); err != nil {
			t.Fatalf("client %d: %v", ci, err)
		}
	}
	if testutil.ToFloat64(h.DirectDeliveries()) == 0 {
		t.Fatal("no event went out through the fan-out")
	}
}

// readFrames checks that got is exactly the frames of want, in order, with
// heartbeats only between them.
func readFrames(got []byte, want [][]byte) error {
	at, i := 0, 0
	for at < len(got) {
		switch {
		case bytes.HasPrefix(got[at:], heartbeat):
			at += len(heartbeat)
		case i < len(want) && bytes.HasPrefix(got[at:], want[i]):
			at += len(want[i])
			i++
		case i < len(want):
			return fmt.Errorf("at byte %d, frame %d: read %q, want %q", at, i, got[at:min(len(got), at+60)], want[i][:min(len(want[i]), 60)])
		default:
			return fmt.Errorf("at byte %d: %q after the last frame", at, got[at:min(len(got), at+60)])
		}
	}
	if i != len(want) {
		return fmt.Errorf("read %d of %d frames", i, len(want))
	}
	return nil
}

// entriesOf is every entry of r, seq 1 on.
func entriesOf(t *testing.T, ctx context.Context, h *Hub, r *natstest.Run) []*Entry {
	t.Helper()
	s := subscribe(t, ctx, h, r, Earliest)
	var out []*Entry
	for {
		it, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it.Entry)
	}
}

// waitParked waits until s's owner waits in Next with nothing to write.
func waitParked(t *testing.T, s *Subscription) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "the owner parks", func() bool {
		s.f.mu.Lock()
		defer s.f.mu.Unlock()
		return s.parked && !s.claimed
	})
}

// waitDelivered waits until conn holds n event frames.
func waitDelivered(t *testing.T, conn *fakeConn, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "events reach the client", func() bool {
		return bytes.Count(conn.bytes(), []byte("\n\n")) >= n
	})
}

// TestCursorIsTheLastEventWrittenInFull: the resume cursor a cut client is
// told moves with what was written (reported by the owner, or done by the
// fan-out), not with what was only served: a batch whose write failed is
// not skipped on resume.
func TestCursorIsTheLastEventWrittenInFull(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-cursor")
	publishTexts(t, ctx, r, 3)
	s := subscribe(t, ctx, h, r, "1")
	if got := s.Cursor(); got != "" {
		t.Fatalf("Cursor() before any write = %q, want \"\"", got)
	}
	var items []Item // seqs 2 and 3, in as many batches as the feed has them
	for len(items) == 0 || items[len(items)-1].Seq < 3 {
		var err error
		if items, _, err = s.NextBatch(ctx, nil, items, 10, 0); err != nil {
			t.Fatalf("NextBatch after %d items: %v", len(items), err)
		}
	}
	if got := s.Cursor(); got != "" {
		t.Fatalf("Cursor() after serving, before the write = %q, want \"\"", got)
	}
	s.DeliveredBatch(items)
	if got := s.Cursor(); got != "3" {
		t.Fatalf("Cursor() after the write = %q, want 3", got)
	}
	// A caught-up client written by the fan-out.
	conn := &fakeConn{}
	s.EnableDirect(conn, framingLines)
	done := make(chan error, 1)
	go func() {
		_, _, err := s.NextBatch(ctx, nil, nil, 10, 0) // parks; the fan-out writes
		done <- err
	}()
	waitParked(t, s)
	if _, err := r.Text(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, conn, 1)
	testkit.Eventually(t, 10*time.Second, "the direct write is settled", func() bool { return s.Cursor() == "4" })
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("after the terminal event: %v", err)
	}
	if got := s.Cursor(); got != "5" {
		t.Fatalf("Cursor() at the end = %q, want 5", got)
	}
}
