package testkit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { fmt.Fprintf(&b, "w%d\n", i) })
	}
	wg.Wait()
	if got := len(b.String()); got != 4*3 {
		t.Fatalf("%d bytes written, want 12: %q", got, b.String())
	}
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Eventually(t, 10*time.Second, "three increments", func() bool { return n.Load() == 3 })
}

// fatalRecorder records a Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventuallyFailsAfterItsDeadline(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	calls := 0
	Eventually(rec, 20*time.Millisecond, "never", func() bool { calls++; return calls > 1000000 })
	if rec.msg != "never: not within 20ms" {
		t.Fatalf("failure %q, want it to name the condition and the bound", rec.msg)
	}
}

func TestEventuallyContextWaitsForTheCheck(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	EventuallyContext(ctx, t, "three increments", func() (bool, string) { return n.Load() == 3, "" })
}

func TestEventuallyContextFailsWithTheLastState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	rec := &fatalRecorder{TB: t}
	calls := 0
	EventuallyContext(ctx, rec, "never", func() (bool, string) { calls++; return false, fmt.Sprintf("call %d", calls) })
	if want := fmt.Sprintf("waiting for never: context deadline exceeded; last state:\ncall %d", calls); rec.msg != want {
		t.Fatalf("failure %q, want %q", rec.msg, want)
	}
	rec.msg = ""
	EventuallyContext(ctx, rec, "nothing", func() (bool, string) { return false, "" })
	if rec.msg != "waiting for nothing: context deadline exceeded" {
		t.Fatalf("failure without a state: %q", rec.msg)
	}
}
