// Package natstest starts embedded NATS servers for tests.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// Connect connects to the NATS server at url under the connection name
// name, provisions the platform's streams and buckets, and returns the
// JetStream handle and the connection, which is closed when the test ends.
func Connect(tb testing.TB, url, name string) (jetstream.JetStream, *nats.Conn) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := natsx.Connect(ctx, url, name, nil)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		tb.Fatalf("provision: %v", err)
	}
	return js, nc
}
