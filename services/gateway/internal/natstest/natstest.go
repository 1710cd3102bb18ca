// Package natstest starts an embedded JetStream for the gateway's tests and
// publishes run events exactly the way the orchestrator does: protobuf
// envelopes on baagent.<tenant>.run.<run_id>.events with a contiguous seq
// from 1, cursor = seq and Nats-Msg-Id <run_id>:<seq>.
package natstest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// JetStream starts an embedded NATS server with the streams and buckets
// provisioned and returns a connection's JetStream handle. Everything stops
// when the test ends.
func JetStream(tb testing.TB) (jetstream.JetStream, *nats.Conn) {
	tb.Helper()
	return natstest.Connect(tb, natstest.StartNATS(tb).ClientURL(), "gateway-test")
}

// Start starts an embedded NATS server storing under dir, connects to it
// and provisions the streams and buckets, outside a test (the load
// generator's publisher process). The caller closes nc and shuts srv down.
func Start(ctx context.Context, dir string) (*natsx.EmbeddedServer, jetstream.JetStream, *nats.Conn, error) {
	srv, err := natsx.StartEmbedded(natsx.EmbeddedOptions{Port: -1, StoreDir: dir})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start embedded NATS: %w", err)
	}
	js, nc, err := Connect(ctx, srv.ClientURL())
	if err != nil {
		srv.Shutdown()
		return nil, nil, nil, err
	}
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, nil, nil, fmt.Errorf("provision: %w", err)
	}
	return srv, js, nc, nil
}

// Connect connects to the NATS server at url.
func Connect(ctx context.Context, url string) (jetstream.JetStream, *nats.Conn, error) {
	nc, err := natsx.Connect(ctx, url, "gateway-test", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc, nil
}

// Run publishes one run's events.
type Run struct {
	JS             jetstream.JetStream
	Tenant, RunID  string
	ConversationID string

	mu  sync.Mutex
	seq uint64
}

// NewRun returns a publisher for a run of tenant.
func NewRun(js jetstream.JetStream, tenant, runID string) *Run {
	return &Run{JS: js, Tenant: tenant, RunID: runID, ConversationID: "conv-" + runID}
}

// Seq is the seq of the last event published.
func (r *Run) Seq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// Publish fills the envelope of ev (ids, seq, cursor, ts, type) and
// publishes it; it returns the event's stream sequence.
func (r *Run) Publish(ctx context.Context, ev *baagentv1.Event) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos, err := r.publishAt(ctx, r.seq+1, ev)
	if err == nil {
		r.seq++
	}
	return pos, err
}

// PublishAt publishes ev with the given seq, out of the run's order (to
// test reordering and gaps); it does not move Seq.
func (r *Run) PublishAt(ctx context.Context, seq uint64, ev *baagentv1.Event) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.publishAt(ctx, seq, ev)
}

func (r *Run) publishAt(ctx context.Context, seq uint64, ev *baagentv1.Event) (uint64, error) {
	subject, err := natsx.EventSubject(r.Tenant, r.RunID)
	if err != nil {
		return 0, err
	}
	ev.RunId, ev.Tenant, ev.ConversationId = r.RunID, r.Tenant, r.ConversationID
	ev.Seq, ev.Cursor, ev.Ts = seq, strconv.FormatUint(seq, 10), timestamppb.Now()
	ev.Type = TypeOf(ev)
	data, err := proto.Marshal(ev)
	if err != nil {
		return 0, err
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, r.RunID+":"+strconv.FormatUint(seq, 10))
	ack, err := r.JS.PublishMsg(ctx, msg)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Text publishes a text_delta event.
func (r *Run) Text(ctx context.Context, s string) (uint64, error) {
	return r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: s}}})
}

// Complete publishes the terminal complete event.
func (r *Run) Complete(ctx context.Context, answer string) (uint64, error) {
	return r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: answer, Format: "markdown"}}})
}

var payloadOneof = (&baagentv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")

// TypeOf is the lowercase type of ev: its payload field's name.
func TypeOf(ev *baagentv1.Event) string {
	fd := ev.ProtoReflect().WhichOneof(payloadOneof)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}
