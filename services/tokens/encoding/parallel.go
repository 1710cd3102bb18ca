package encoding

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Cutting a text into parts that count exactly.
//
// pretok's CanCut finds the positions where a text can be cut with
// count(text) == count(text[:p]) + count(text[p:]) for the ordinary text of
// every encoding (the argument is in pretok/cut.go and
// docs/concepts/tokens.md). When special tokens are allowed, a cut must also
// not fall inside special-token text: <|fim_prefix|> has letter-to-
// punctuation pairs CanCut accepts.

// maxSpecialLen is the length of the longest special token's text of any
// encoding: a cut needs this many bytes on each side to be decided.
var maxSpecialLen = func() int {
	n := 0
	for _, toks := range specialTokens {
		for text := range toks {
			n = max(n, len(text))
		}
	}
	return n
}()

// cutContext is how many bytes after a candidate cut point must be known to
// decide it: the special-token window, and more than a character.
var cutContext = maxSpecialLen + 4

// spans reports whether special-token text occurs in text with p strictly
// inside it. Special tokens start with "<|" and hold no other "<", so two
// occurrences never overlap and the one spanning p, if any, is the
// occurrence starting at the last "<|" less than maxSpecialLen before p.
func (s specials) spans(text string, p int) bool {
	lo := max(0, p-maxSpecialLen+1)
	for off := lo; off < p; {
		i := strings.Index(text[off:p], specialPrefix)
		if i < 0 {
			return false
		}
		start := off + i
		for tok := range s.byText {
			if start+len(tok) > p && strings.HasPrefix(text[start:], tok) {
				return true
			}
		}
		off = start + 1
	}
	return false
}

// canCut reports whether p is a safe cut point of text for this encoding.
func (e *engine) canCut(text string, p int, allowSpecial bool) bool {
	if !e.split.CanCut(text, p) {
		return false
	}
	return !allowSpecial || !e.specials.spans(text, p)
}

// NextCut returns the first safe cut point p with from <= p < limit, or -1;
// limit is at most len(text). A safe cut point splits text into two parts
// whose counts add up to the count of text.
func (e *engine) NextCut(text string, from, limit int, allowSpecial bool) int {
	for p := max(from, 1); p < limit; p++ {
		if text[p]&0xC0 != 0x80 && e.canCut(text, p, allowSpecial) { // a cut lies before a character
			return p
		}
	}
	return -1
}

// LastCut returns the last safe cut point p with from <= p < limit, or -1.
func (e *engine) LastCut(text string, from, limit int, allowSpecial bool) int {
	for p := limit - 1; p >= max(from, 1); p-- {
		if text[p]&0xC0 != 0x80 && e.canCut(text, p, allowSpecial) {
			return p
		}
	}
	return -1
}

// Cutter is an [Encoder] that can cut texts at safe cut points. Every
// encoder of a [Set] is one.
type Cutter interface {
	Encoder
	// NextCut returns the first safe cut point p of text with
	// from <= p < limit, or -1. Deciding p reads text from p-4 to
	// p+maxSpecialLen.
	NextCut(text string, from, limit int, allowSpecial bool) int
	// LastCut returns the last safe cut point p with from <= p < limit, or -1.
	LastCut(text string, from, limit int, allowSpecial bool) int
}

// Cuts cuts text at safe cut points into parts of at least size bytes (the
// last part may be shorter; a part is longer where no cut point follows
// soon). It returns the part boundaries: 0, the cuts, len(text).
func Cuts(enc Cutter, text string, size int, allowSpecial bool) []int {
	size = max(size, 1)
	bounds := make([]int, 1, len(text)/size+2)
	for at := 0; len(text)-at > size; {
		p := enc.NextCut(text, at+size, len(text), allowSpecial)
		if p < 0 {
			break
		}
		bounds = append(bounds, p)
		at = p
	}
	return append(bounds, len(text))
}

// Pool counts large texts on several cores. It holds workers-1 helper
// slots shared by every call: a call counts parts itself and borrows the
// free slots for helper goroutines, so that concurrent calls together never
// run more than the pool's workers plus one per call. Safe for concurrent
// use.
type Pool struct {
	workers int
	helpers chan struct{}
	// partBytes is the smallest part a text is cut into (MinPartBytes;
	// tests lower it to cut small texts).
	partBytes int
}

// Default part sizes of a [Pool].
const (
	// MinPartBytes is the smallest part Pool.Count cuts: below this the
	// cost of a goroutine and a cold piece cache shows.
	MinPartBytes = 64 << 10
	// MaxPartBytes is the largest part: smaller parts balance the cores
	// better.
	MaxPartBytes = 1 << 20
)

// NewPool returns a pool of workers goroutines (GOMAXPROCS when workers
// is 0 or less).
func NewPool(workers int) *Pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return &Pool{workers: workers, helpers: make(chan struct{}, workers-1), partBytes: MinPartBytes}
}

// Workers is the number of goroutines one call may count on.
func (p *Pool) Workers() int { return p.workers }

// ErrNotCutter is returned by [Pool.Count] for an encoder that cannot cut.
var ErrNotCutter = errors.New("encoder cannot cut texts")

// Count returns enc.Count(text, allowSpecial), exactly, counting the parts
// of text on up to the pool's workers. It stops early, with ctx's error,
// when ctx ends.
func (p *Pool) Count(ctx context.Context, enc Encoder, text string, allowSpecial bool) (int, error) {
	c, ok := enc.(Cutter)
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotCutter, enc.Name())
	}
	// About four parts per worker, so that a slow part does not leave the
	// other cores idle at the end.
	size := min(max(len(text)/(4*p.workers), p.partBytes), MaxPartBytes)
	if len(text) < 2*size || p.workers == 1 {
		return enc.Count(text, allowSpecial)
	}
	bounds := Cuts(c, text, size, allowSpecial)
	parts := len(bounds) - 1
	var (
		next  atomic.Int64
		total atomic.Int64
		errMu sync.Mutex
		first error
	)
	work := func() {
		for {
			if ctx.Err() != nil {
				return
			}
			i := int(next.Add(1)) - 1
			if i >= parts {
				return
			}
			n, err := enc.Count(text[bounds[i]:bounds[i+1]], allowSpecial)
			if err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
				return
			}
			total.Add(int64(n))
		}
	}
	var wg sync.WaitGroup
	for range min(parts-1, p.workers-1) {
		select {
		case p.helpers <- struct{}{}:
		default:
			continue // every slot is busy with other calls: count with fewer
		}
		wg.Go(func() {
			defer func() { <-p.helpers }()
			work()
		})
	}
	work()
	wg.Wait()
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return int(total.Load()), nil
}

// Stream counts a text that arrives in chunks of bytes, with bounded
// memory: whenever a segment's worth of text has arrived, the text up to
// its last safe cut point is handed to the stream's counting goroutines,
// which count it while the next chunks arrive, and only the text after the
// cut is kept. Chunks may end inside a UTF-8 character. Bytes that are not
// UTF-8 count as Encoder.Count counts them (one U+FFFD per maximal invalid
// subsequence), the same as for the whole text.
//
// Each counting goroutine counts whole segments, one after another, so the
// cores never wait for each other until the end; the first goroutine is the
// stream's own, the others hold the pool's free helper slots for the
// stream's life. Memory: the text since the last cut (at most the tail
// limit plus a chunk), a segment per goroutine being counted and one per
// goroutine waiting. A Stream is used by one goroutine; [Stream.Close] or
// [Stream.Abort] must be called: they stop the counting goroutines.
type Stream struct {
	pool         *Pool
	enc          Cutter
	allowSpecial bool
	// segment is how much text is gathered before it is counted.
	segment int
	// maxTail bounds the text kept without a safe cut point.
	maxTail int
	buf     []byte
	// scanned is the length of buf's prefix known to hold no cut point.
	scanned int
	bytes   int64

	// The counting goroutines, started with the first segment: they count
	// what arrives on segs until segs is closed, add to total, keep the
	// first error, and give the buffers back on free. cancel ends their
	// context (the first Write's).
	cancel  context.CancelFunc
	segs    chan []byte
	free    chan []byte
	wg      sync.WaitGroup
	workers int
	total   atomic.Int64
	errMu   sync.Mutex
	err     error
	started bool
	closed  bool
}

// ErrNoCut is returned by [Stream.Write] when more than the stream's tail
// limit of text arrived without a safe cut point (megabytes of one
// unbroken word, of digits, of whitespace or of punctuation alone).
var ErrNoCut = errors.New("no safe cut point")

// NewStream returns a Stream counting with enc on the pool. segment is how
// many bytes are gathered before counting them; maxTail (at least segment)
// bounds the bytes kept when no safe cut point is found.
func (p *Pool) NewStream(enc Encoder, allowSpecial bool, segment, maxTail int) (*Stream, error) {
	c, ok := enc.(Cutter)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotCutter, enc.Name())
	}
	segment = max(segment, 1)
	maxTail = max(maxTail, segment)
	return &Stream{pool: p, enc: c, allowSpecial: allowSpecial, segment: segment, maxTail: maxTail}, nil
}

// Bytes is the number of bytes written so far.
func (s *Stream) Bytes() int64 { return s.bytes }

// Write adds the next chunk of the text, handing what can be counted to the
// counting goroutines. It blocks while they are all a segment behind.
func (s *Stream) Write(ctx context.Context, chunk []byte) error {
	if s.closed {
		return errors.New("encoding: Write after Close")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.bytes += int64(len(chunk))
	s.buf = append(s.buf, chunk...)
	if len(s.buf) < s.segment {
		return nil
	}
	// The last cutContext bytes cannot be decided yet: the characters or
	// special token after them may still be arriving.
	limit := len(s.buf) - cutContext
	text := unsafe.String(unsafe.SliceData(s.buf), len(s.buf))
	cut := s.enc.LastCut(text, s.scanned, limit, s.allowSpecial)
	if cut < 0 {
		s.scanned = max(limit, 0)
		if len(s.buf) > s.maxTail {
			return fmt.Errorf("%w in %d bytes of text", ErrNoCut, len(s.buf))
		}
		return nil
	}
	// The text before the cut goes to the counting goroutines with its
	// buffer; the tail moves to a recycled one.
	s.start(ctx)
	var next []byte
	select {
	case next = <-s.free:
	default:
		next = make([]byte, 0, s.segment+len(chunk))
	}
	next = append(next[:0], s.buf[cut:]...)
	if err := s.hand(ctx, s.buf[:cut]); err != nil {
		return err
	}
	s.buf = next
	s.scanned = max(limit-cut, 0)
	return nil
}

// hand gives seg to the counting goroutines.
func (s *Stream) hand(ctx context.Context, seg []byte) error {
	select {
	case s.segs <- seg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start starts the counting goroutines once: the stream's own and one per
// free helper slot of the pool.
func (s *Stream) start(ctx context.Context) {
	if s.started {
		return
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.workers = 1
	for range s.pool.workers - 1 {
		select {
		case s.pool.helpers <- struct{}{}:
			s.workers++
		default:
		}
	}
	s.segs = make(chan []byte, s.workers) // one waits per goroutine counting
	s.free = make(chan []byte, 2)
	for i := range s.workers {
		s.wg.Go(func() {
			if i > 0 {
				defer func() { <-s.pool.helpers }()
			}
			s.countSegments(ctx)
		})
	}
}

// countSegments counts the segments arriving on segs until it is closed.
func (s *Stream) countSegments(ctx context.Context) {
	for seg := range s.segs {
		if ctx.Err() != nil {
			s.fail(ctx.Err())
			continue // drain: Write must not block on a stopped stream
		}
		n, err := s.enc.Count(unsafe.String(unsafe.SliceData(seg), len(seg)), s.allowSpecial)
		if err != nil {
			s.fail(err)
			continue
		}
		s.total.Add(int64(n))
		// The engines keep no reference to the text (their caches copy),
		// so the buffer can be reused, unless a long stretch without a cut
		// point made it much larger than a segment.
		if cap(seg) > 4*s.segment {
			continue
		}
		select {
		case s.free <- seg[:0]:
		default:
		}
	}
}

func (s *Stream) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Close counts the rest of the text, waits for the counting goroutines and
// returns the count of the whole.
func (s *Stream) Close(ctx context.Context) (int, error) {
	if s.closed {
		return 0, errors.New("encoding: Stream closed twice")
	}
	s.closed = true
	if !s.started {
		// Nothing handed over: one text, counted in parts on the pool.
		n, err := s.pool.Count(ctx, s.enc, unsafe.String(unsafe.SliceData(s.buf), len(s.buf)), s.allowSpecial)
		s.buf = nil
		return n, err
	}
	// The rest, cut into a part per goroutine, goes to the goroutines too.
	text := unsafe.String(unsafe.SliceData(s.buf), len(s.buf))
	bounds := Cuts(s.enc, text, max(len(text)/s.workers, 1), s.allowSpecial)
	var err error
	for i := 0; i+1 < len(bounds) && err == nil; i++ {
		if bounds[i] < bounds[i+1] {
			err = s.hand(ctx, s.buf[bounds[i]:bounds[i+1]:bounds[i+1]])
		}
	}
	close(s.segs)
	s.wg.Wait()
	s.cancel()
	s.buf = nil
	if err == nil {
		err = s.err
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return 0, err
	}
	return int(s.total.Load()), nil
}

// Abort stops the counting goroutines without counting the rest and waits
// for them. It does nothing after Close or Abort.
func (s *Stream) Abort() {
	if s.closed {
		return
	}
	s.closed = true
	if s.started {
		s.cancel()
		close(s.segs)
		s.wg.Wait()
	}
	s.buf = nil
}
