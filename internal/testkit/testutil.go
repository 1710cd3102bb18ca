// Package testkit holds helpers shared by the tests of several packages:
// an output buffer a test can read while something else writes it, and a
// wait on a condition with a deadline (tests never sleep a fixed time).
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
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
