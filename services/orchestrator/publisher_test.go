package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
)

// faultySink wraps JetStream and makes chosen events' pipelined publishes
// fail: dropped ones are never sent (so later events are stored before
// them: a hole), lostAck ones are stored but reported as failed, and
// refused ones are refused by PublishMsgAsync itself; silent ones are
// stored but their ack never comes (as after a NATS restart).
type faultySink struct {
	jetstream.JetStream
	mu      sync.Mutex
	dropped map[uint64]bool
	lostAck map[uint64]bool
	refused map[uint64]bool
	silent  map[uint64]bool
}

func eventSeqOf(msg *nats.Msg) uint64 {
	id := msg.Header.Get(jetstream.MsgIDHeader)
	parts := strings.Split(id, ":")
	n, _ := strconv.ParseUint(parts[1], 10, 64)
	return n
}

type failedFuture struct {
	msg *nats.Msg
	err chan error
}

func (f *failedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f *failedFuture) Err() <-chan error            { return f.err }
func (f *failedFuture) Msg() *nats.Msg               { return f.msg }

func (s *faultySink) PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	seq := eventSeqOf(msg)
	s.mu.Lock()
	drop, lost, refuse, silent := s.dropped[seq], s.lostAck[seq], s.refused[seq], s.silent[seq]
	s.mu.Unlock()
	fail := func() jetstream.PubAckFuture {
		f := &failedFuture{msg: msg, err: make(chan error, 1)}
		f.err <- errors.New("injected failure")
		return f
	}
	switch {
	case refuse:
		return nil, errors.New("injected refusal")
	case drop:
		return fail(), nil
	case lost:
		if _, err := s.JetStream.PublishMsg(context.Background(), msg); err != nil {
			return nil, err
		}
		return fail(), nil
	case silent:
		if _, err := s.JetStream.PublishMsg(context.Background(), msg); err != nil {
			return nil, err
		}
		return &failedFuture{msg: msg}, nil // neither ack nor error, ever
	}
	return s.JetStream.PublishMsgAsync(msg, opts...)
}

func TestPublisherPipelinedEventsStayContiguousAfterFailures(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		dropped, lostAck, refused []uint64
	}{
		{name: "no failure"},
		{name: "hole: a middle event lost, later ones stored", dropped: []uint64{3}},
		{name: "two holes", dropped: []uint64{2, 5}},
		{name: "ack lost after storing", lostAck: []uint64{2, 3}},
		{name: "async publish refused", refused: []uint64{1, 4}},
		{name: "mixed", dropped: []uint64{4}, lostAck: []uint64{2}, refused: []uint64{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			_, js := startJetStream(t)
			set := func(seqs []uint64) map[uint64]bool {
				m := map[uint64]bool{}
				for _, s := range seqs {
					m[s] = true
				}
				return m
			}
			sink := &faultySink{JetStream: js, dropped: set(tc.dropped), lostAck: set(tc.lostAck), refused: set(tc.refused)}
			run := &baagentv1.Run{RunId: "run_pub", ConversationId: "conv_pub", Tenant: testTenant}
			pub, err := publish.New(sink, run, "")
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			for i := range n {
				if err := pub.Emit(ctx, &baagentv1.Event{Step: int32(i), Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: int32(i)}}}); err != nil {
					t.Fatalf("emit %d: %v", i+1, err)
				}
			}
			if err := pub.Flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if got := pub.LastSeq(); got != n {
				t.Fatalf("lastSeq = %d, want %d", got, n)
			}
			if err := pub.EmitNow(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "ok"}}}); err != nil {
				t.Fatal(err)
			}
			evs := readEvents(ctx, t, js, testTenant, run.GetRunId())
			checkEnvelope(t, run, evs)
			if len(evs) != n+1 {
				t.Fatalf("%d events stored, want %d: %v", len(evs), n+1, types(evs))
			}
			if err := pub.Emit(ctx, &baagentv1.Event{Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{}}}); !errors.Is(err, publish.ErrTerminalSent) {
				t.Fatalf("emit after terminal: %v", err)
			}
		})
	}
}

// Acks lost in a NATS restart never come: a flush waits for them once, not
// once per event, so the terminal event of a run confirms within its
// finalize deadline even with a full pipeline of lost acks.
func TestPublisherLostAcksWaitedForOnce(t *testing.T) {
	_, js := startJetStream(t)
	const n = 12
	silent := map[uint64]bool{}
	for i := range uint64(n + 1) {
		silent[i+1] = true
	}
	sink := &faultySink{JetStream: js, silent: silent}
	run := &baagentv1.Run{RunId: "run_silent", ConversationId: "conv_silent", Tenant: testTenant}
	pub, err := publish.New(sink, run, "")
	if err != nil {
		t.Fatal(err)
	}
	bg := testCtx(t)
	for i := range n {
		if err := pub.Emit(bg, &baagentv1.Event{Step: int32(i), Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: int32(i)}}}); err != nil {
			t.Fatalf("emit %d: %v", i+1, err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, finalizeTimeout)
	defer cancel()
	if err := pub.EmitNow(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "ok"}}}); err != nil {
		t.Fatalf("terminal event with every ack lost: %v", err)
	}
	if got := pub.LastSeq(); got != n+1 {
		t.Fatalf("lastSeq = %d, want %d", got, n+1)
	}
	evs := readEvents(bg, t, js, testTenant, run.GetRunId())
	checkEnvelope(t, run, evs)
	if len(evs) != n+1 {
		t.Fatalf("%d events stored, want %d (each once): %v", len(evs), n+1, types(evs))
	}
}

// A replica dies after a checkpoint that did not wait for its events'
// acks: some of them were lost (holes), others stored after a hole. The
// replica resuming from the checkpoint deletes what follows the first hole
// and publishes the checkpoint's outbox again, so the stream holds every
// event the checkpointed state implies, once, in seq order.
func TestResumePublishesTheCheckpointOutbox(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dropped []uint64
	}{
		{name: "all stored"},
		{name: "one lost", dropped: []uint64{3}},
		{name: "two lost, the last too", dropped: []uint64{5, 8}},
		{name: "first lost", dropped: []uint64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			_, js := startJetStream(t)
			sink := &faultySink{JetStream: js, dropped: map[uint64]bool{}}
			for _, s := range tc.dropped {
				sink.dropped[s] = true
			}
			rec := &baagentv1.Run{RunId: "run_outbox", ConversationId: "conv_outbox", Tenant: testTenant}
			dead, err := publish.New(sink, rec, "")
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			for i := range n {
				if err := dead.Emit(ctx, &baagentv1.Event{Step: int32(i + 1), Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: int32(i + 1)}}}); err != nil {
					t.Fatal(err)
				}
			}
			cp := &checkpoint.State{Kind: checkpoint.KindToolComplete, Started: true}
			cp.LastSeq, cp.LastPos, cp.Outbox, _ = dead.Unconfirmed()
			if got := cp.LastSeq + uint64(len(cp.Outbox)); got != n {
				t.Fatalf("checkpoint covers %d events, want %d", got, n)
			}
			// The dead replica's publishes have all reached the server.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}

			r := &run{s: &Server{opts: Options{JetStream: js}}, log: slog.New(slog.DiscardHandler), rec: rec, attempt: 2}
			if r.pub, err = publish.New(js, rec, ""); err != nil {
				t.Fatal(err)
			}
			terminal, err := r.resumeEvents(ctx, cp)
			if err != nil || terminal != nil {
				t.Fatalf("resume: %v, %v", terminal, err)
			}
			if got := r.pub.LastSeq(); got != n {
				t.Fatalf("resumed after seq %d, want %d", got, n)
			}
			if err := r.pub.EmitNow(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "ok"}}}); err != nil {
				t.Fatal(err)
			}
			evs := readEvents(ctx, t, js, testTenant, rec.GetRunId())
			checkEnvelope(t, rec, evs)
			if len(evs) != n+1 {
				t.Fatalf("%d events stored, want %d: %v", len(evs), n+1, types(evs))
			}
			for i, e := range evs[:n] {
				if e.GetStepStart().GetStepNumber() != int32(i+1) {
					t.Fatalf("event %d is step_start %d", i+1, e.GetStepStart().GetStepNumber())
				}
			}
		})
	}
}
