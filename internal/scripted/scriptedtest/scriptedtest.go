// Package scriptedtest serves a scripted model for the length of a test.
package scriptedtest

import (
	"context"
	"testing"

	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/scripted"
)

// Serve runs srv on loopback until the test ends and returns a model client
// for it (one attempt per call, so failures surface at once) and its base
// URL.
func Serve(tb testing.TB, srv *scripted.Server) (*llm.Client, string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	base, done, err := srv.StartLoopback(ctx)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("scripted model: %v", err)
		}
	})
	c, err := llm.New(llm.Config{BaseURL: base, Model: scripted.ModelName, Retry: llm.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		tb.Fatal(err)
	}
	return c, base
}
