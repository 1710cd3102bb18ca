package encoding

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
)

// smallPool is a pool cutting texts into parts of about part bytes, so that
// small test texts are counted in many parts.
func smallPool(workers, part int) *Pool {
	p := NewPool(workers)
	p.partBytes = part
	return p
}

// cutterOf returns the encoder called name as a Cutter.
func cutterOf(t testing.TB, set *Set, name string) Cutter {
	t.Helper()
	e, err := set.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := e.(Cutter)
	if !ok {
		t.Fatalf("%s is not a Cutter", name)
	}
	return c
}

// partsCount counts text cut every size bytes or more, part by part.
func partsCount(t testing.TB, c Cutter, text string, size int, allowSpecial bool) int {
	t.Helper()
	bounds := Cuts(c, text, size, allowSpecial)
	total := 0
	for i := range len(bounds) - 1 {
		if bounds[i] >= bounds[i+1] && len(text) > 0 {
			t.Fatalf("bounds not increasing: %v", bounds)
		}
		n, err := c.Count(text[bounds[i]:bounds[i+1]], allowSpecial)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// streamCount counts text through a Stream, in chunks of random sizes up to
// maxChunk (a chunk may end inside a character).
func streamCount(t testing.TB, p *Pool, c Cutter, text string, allowSpecial bool, rng *rand.Rand, maxChunk, segment int) int {
	t.Helper()
	s, err := p.NewStream(c, allowSpecial, segment, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for rest := text; len(rest) > 0; {
		n := min(1+rng.IntN(maxChunk), len(rest))
		if err := s.Write(ctx, []byte(rest[:n])); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if s.Bytes() != int64(len(text)) {
		t.Errorf("Bytes() = %d, want %d", s.Bytes(), len(text))
	}
	n, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPoolCountExact counts mixed text, the hard cases and text with
// invalid UTF-8 serially, in parts, on a pool and as a stream, for every
// encoding with and without special tokens.
func TestPoolCountExact(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	mixed := testcorpus.Mixed(7, 300_000)
	atoms := strings.Join(testcorpus.Atoms(8, 2000, 12), "")
	invalid := strings.ReplaceAll(mixed[:60_000], "e", "e\xff\xe4\xb8") + "\xf0\x9f"
	specials := strings.Repeat("word<|endoftext|>x<|fim_prefix|>y <|endofprompt|>", 500)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, name := range Names() {
		c := cutterOf(t, set, name)
		for _, text := range []string{mixed, atoms, invalid, specials} {
			for _, allow := range []bool{false, true} {
				want, err := c.Count(text, allow)
				if err != nil {
					t.Fatal(err)
				}
				if got := partsCount(t, c, text, 37, allow); got != want {
					t.Errorf("%s allow=%v: parts of 37 bytes count %d, serial %d", name, allow, got, want)
				}
				got, err := smallPool(3, 1000).Count(context.Background(), c, text, allow)
				if err != nil || got != want {
					t.Errorf("%s allow=%v: pool count %d, %v; serial %d", name, allow, got, err, want)
				}
				if got := streamCount(t, smallPool(2, 512), c, text, allow, rng, 700, 2000); got != want {
					t.Errorf("%s allow=%v: stream count %d, serial %d", name, allow, got, want)
				}
			}
		}
	}
}

// TestCutsAvoidSpecialTokens: with special tokens allowed, no cut falls
// inside one, although CanCut alone accepts positions in them.
func TestCutsAvoidSpecialTokens(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	for _, name := range Names() {
		e := cutterOf(t, set, name).(*engine)
		for tok := range specialTokens[name] {
			text := "a" + tok + " b"
			inside := 0
			for p := 2; p < 1+len(tok); p++ {
				if e.split.CanCut(text, p) {
					inside++
				}
				if e.canCut(text, p, true) {
					t.Errorf("%s: cut at %d inside %q with special tokens allowed", name, p, tok)
				}
			}
			if strings.Contains(tok, "_") && inside == 0 {
				t.Errorf("%s: %q: expected the ordinary rules to accept a position inside it", name, tok)
			}
		}
	}
}

// TestStreamNoCut: a text with no safe cut point longer than the tail limit
// fails with ErrNoCut instead of growing the buffer without bound.
func TestStreamNoCut(t *testing.T) {
	t.Parallel()

	c := cutterOf(t, newTestSet(t), O200kBase)
	s, err := NewPool(2).NewStream(c, false, 1000, 4000)
	if err != nil {
		t.Fatal(err)
	}
	digits := []byte(strings.Repeat("1234567890", 100))
	var werr error
	for range 10 {
		if werr = s.Write(context.Background(), digits); werr != nil {
			break
		}
	}
	if !errors.Is(werr, ErrNoCut) {
		t.Fatalf("Write of 10000 digits = %v, want ErrNoCut", werr)
	}
	if len(s.buf) > 4000+len(digits) {
		t.Errorf("buffer grew to %d bytes", len(s.buf))
	}
}

// TestStreamBoundedBuffer: a long text with cut points keeps the buffer
// near the segment size.
func TestStreamBoundedBuffer(t *testing.T) {
	t.Parallel()

	c := cutterOf(t, newTestSet(t), Cl100kBase)
	s, err := NewPool(2).NewStream(c, false, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	text := testcorpus.Mixed(10, 200_000)
	for i := 0; i < len(text); i += 1000 {
		if err := s.Write(context.Background(), []byte(text[i:min(i+1000, len(text))])); err != nil {
			t.Fatal(err)
		}
		if cap(s.buf) > 64<<10 {
			t.Fatalf("buffer capacity %d after %d bytes", cap(s.buf), i)
		}
	}
	got, err := s.Close(context.Background())
	want, _ := c.Count(text, false)
	if err != nil || got != want {
		t.Fatalf("stream count %d, %v; want %d", got, err, want)
	}
}

// TestStreamAbort: Abort stops the counting goroutine mid-text, and a
// cancelled context fails Write.
func TestStreamAbort(t *testing.T) {
	t.Parallel()

	c := cutterOf(t, newTestSet(t), O200kBase)
	text := []byte(testcorpus.Mixed(14, 100_000))
	s, err := smallPool(2, 1000).NewStream(c, false, 4000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50_000; i += 5000 {
		if err := s.Write(context.Background(), text[i:i+5000]); err != nil {
			t.Fatal(err)
		}
	}
	if !s.started {
		t.Fatal("no segment was handed to the counting goroutine")
	}
	s.Abort()
	s.Abort()
	if _, err := s.Close(context.Background()); err == nil {
		t.Error("Close after Abort succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s2, _ := smallPool(2, 1000).NewStream(c, false, 4000, 1<<20)
	if err := s2.Write(ctx, text[:5000]); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s2.Write(ctx, text[5000:10000]); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context = %v", err)
	}
	if _, err := s2.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a cancelled context = %v", err)
	}
}

// TestPoolCancelled: a cancelled context stops the count with its error.
func TestPoolCancelled(t *testing.T) {
	t.Parallel()

	c := cutterOf(t, newTestSet(t), O200kBase)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := smallPool(2, 1000).Count(ctx, c, testcorpus.Mixed(11, 50_000), false); !errors.Is(err, context.Canceled) {
		t.Fatalf("Count with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestPoolConcurrent runs many counts on one pool at once: each is exact
// and the helper slots are all given back.
func TestPoolConcurrent(t *testing.T) {
	t.Parallel()

	c := cutterOf(t, newTestSet(t), O200kBase)
	p := smallPool(3, 2000)
	text := testcorpus.Mixed(12, 100_000)
	want, _ := c.Count(text, false)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			n, err := p.Count(context.Background(), c, text, false)
			if err == nil && n != want {
				err = errors.New("wrong count")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(p.helpers) != 0 {
		t.Errorf("%d helper slots still taken", len(p.helpers))
	}
}

// FuzzCountParts checks, on arbitrary bytes (invalid UTF-8 included), that
// the serial count equals the sum of the parts' counts, the pool's count
// and the count of a stream fed in random chunks, for each pattern's
// encoding with and without special tokens.
func FuzzCountParts(f *testing.F) {
	for _, s := range testcorpus.Atoms(13, 32, 16) {
		f.Add(s, uint64(1))
	}
	f.Add("x\n\ny don't 1234 (word) a   b e\u0301 中文，中文 <|fim_prefix|> \xff\xe4\xb8", uint64(2))
	set, err := NewSet()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if len(text) > 8192 {
			text = text[:8192]
		}
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		size := 1 + rng.IntN(32)
		for _, name := range []string{O200kBase, Cl100kBase, R50kBase} {
			c := cutterOf(t, set, name)
			for _, allow := range []bool{false, true} {
				want, _ := c.Count(text, allow)
				if got := partsCount(t, c, text, size, allow); got != want {
					t.Fatalf("%s allow=%v: parts of %d bytes count %d, serial %d", name, allow, size, got, want)
				}
				if got, err := smallPool(2, size).Count(context.Background(), c, text, allow); err != nil || got != want {
					t.Fatalf("%s allow=%v: pool count %d, %v; serial %d", name, allow, got, err, want)
				}
				if got := streamCount(t, smallPool(2, size), c, text, allow, rng, 1+rng.IntN(64), 1+rng.IntN(128)); got != want {
					t.Fatalf("%s allow=%v: stream count %d, serial %d", name, allow, got, want)
				}
			}
		}
	})
}
