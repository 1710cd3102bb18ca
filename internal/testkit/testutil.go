// Package testkit holds helpers shared by the tests of several packages:
// an output buffer a test can read while something else writes it, waits
// on a condition with a deadline (tests never sleep a fixed time), and a
// server's Run kept going until the test ends.
package testkit

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/retry"
)

// SyncBuffer is a bytes.Buffer safe for a writer (a logger, a command's
// output) and a test to share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pollInterval is how often Eventually checks its condition.
const pollInterval = 5 * time.Millisecond

// Eventually checks cond until it holds, and fails the test naming what it
// waited for if it still does not after within.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s", what, within)
			return
		}
		<-t.C
	}
}

// contextPoll is how often EventuallyContext checks: quickly at first, then
// every 100 ms at most, since its checks may query another process.
var contextPoll = retry.Backoff{Initial: pollInterval, Max: 100 * time.Millisecond}

// EventuallyContext is Eventually bounded by ctx (for waits within a
// scenario's deadline), for a check that also describes the state it saw:
// if ctx ends before check reports done, the test fails naming what it
// waited for, ctx's error and the last state described.
func EventuallyContext(ctx context.Context, tb testing.TB, what string, check func() (done bool, state string)) {
	tb.Helper()
	for n := 0; ; n++ {
		done, state := check()
		if done {
			return
		}
		if !retry.Sleep(ctx, contextPoll.Delay(n)) {
			if state != "" {
				tb.Fatalf("waiting for %s: %v; last state:\n%s", what, ctx.Err(), state)
			} else {
				tb.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
			return
		}
	}
}

// Run runs run (a server's or an app's Run method) under a context derived
// from ctx, and when the test ends cancels it and waits for it to return,
// failing the test if it returns an error.
func Run(tb testing.TB, ctx context.Context, run func(context.Context) error) {
	tb.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
}

// ReportPercentiles reports the median and 99th percentile of a
// benchmark's per-operation times as p50-ns and p99-ns, beside the mean.
// It sorts times.
func ReportPercentiles(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns")
}

// LineMatchGrace is how long a line-by-line search may run past its
// deadline: it looks at its context between lines, so the bound is a few
// lines' matching. One match of pattern on line is timed here, now, on
// this machine (the race detector and a busy machine make one line of a
// slow expression cost seconds); the grace is ten such lines, and at
// least floor.
func LineMatchGrace(pattern, line string, floor time.Duration) time.Duration {
	re := regexp.MustCompile(pattern)
	start := time.Now()
	re.MatchString(line)
	return max(floor, 10*time.Since(start))
}
