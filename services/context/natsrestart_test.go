package contextsvc

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
)

// Regression (fault suite, NATS restarted mid-run): an append and a window
// build while the NATS server is restarting on the same store succeed once
// it is back, instead of failing the run after JetStream's 5 s timeout.
func TestHistorySurvivesNATSRestart(t *testing.T) {
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	start := func() *natsx.EmbeddedServer {
		srv, err := natsx.StartEmbedded(natsx.EmbeddedOptions{Host: "127.0.0.1", Port: port, StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start()
	defer func() { srv.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := natsx.Connect(ctx, srv.ClientURL(), "context-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, &natsEnv{srv: srv, nc: nc, js: js}, Options{})
	msg := func(i int) *baagentv1.ChatMessage {
		return &baagentv1.ChatMessage{Id: fmt.Sprintf("m%d", i), Role: baagentv1.Role_ROLE_USER, Content: fmt.Sprintf("message %d", i)}
	}
	appendAll(t, e.client, "acme", "conv", []*baagentv1.ChatMessage{msg(0)})

	for round := 1; round <= 3; round++ {
		srv.Shutdown()
		done := make(chan error, 1)
		go func() {
			_, err := e.client.Append(ctx, &baagentv1.AppendRequest{Tenant: "acme", ConversationId: "conv", Messages: []*baagentv1.ChatMessage{msg(round)}})
			done <- err
		}()
		// NATS comes back while the append waits.
		select {
		case err := <-done:
			t.Fatalf("round %d: append returned while NATS was down: %v", round, err)
		case <-time.After(300 * time.Millisecond):
		}
		srv = start()
		if err := <-done; err != nil {
			t.Fatalf("round %d: append across a NATS restart: %v", round, err)
		}
	}
	got := readAll(t, e.client, "acme", "conv", 100)
	if want := []string{"m0", "m1", "m2", "m3"}; fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v (each once, in order)", ids(got), want)
	}
}
