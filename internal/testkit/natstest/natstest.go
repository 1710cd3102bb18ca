// Package natstest starts embedded NATS servers for tests.
package natstest

import (
	"testing"

	"github.com/baagent/baagent/internal/natsx"
)

// StartNATS starts an embedded NATS server with JetStream on a random
// loopback port, its store in a directory of the test's own, and shuts it
// down when the test ends.
func StartNATS(tb testing.TB) *natsx.EmbeddedServer {
	tb.Helper()
	return StartNATSIn(tb, tb.TempDir())
}

// StartNATSIn is StartNATS with a given store directory, for tests that
// restart the server on the same data.
func StartNATSIn(tb testing.TB, storeDir string) *natsx.EmbeddedServer {
	tb.Helper()
	srv, err := natsx.StartEmbedded(natsx.EmbeddedOptions{Port: -1, StoreDir: storeDir})
	if err != nil {
		tb.Fatalf("embedded NATS: %v", err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}
