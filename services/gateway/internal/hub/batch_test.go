package hub

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

func TestNextBatchServesBufferedEventsUnderItsBounds(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-batch")
	publishTexts(t, ctx, r, 9)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	// A first reader makes sure the feed holds all ten events.
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, Earliest)), seqs(1, 10))
	s := subscribe(t, ctx, h, r, Earliest)
	var got []uint64
	maxBatch := 0
	for len(got) < 10 {
		items, ticked, err := s.NextBatch(ctx, nil, nil, 4, 0)
		if err != nil || ticked {
			t.Fatalf("NextBatch after %v: ticked %v, %v", got, ticked, err)
		}
		if len(items) == 0 || len(items) > 4 {
			t.Fatalf("batch of %d items, want 1..4", len(items))
		}
		maxBatch = max(maxBatch, len(items))
		for _, it := range items {
			got = append(got, it.Seq)
		}
	}
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("seqs %v: want 1..10 in order, once each", got)
		}
	}
	if maxBatch != 4 {
		t.Fatalf("largest batch %d, want 4: all ten events were buffered", maxBatch)
	}
	if items, _, err := s.NextBatch(ctx, nil, nil, 4, 0); !errors.Is(err, io.EOF) || len(items) != 0 {
		t.Fatalf("after the terminal event: %d items, %v; want io.EOF", len(items), err)
	}

	// A byte bound smaller than one event still yields one event per batch.
	s2 := subscribe(t, ctx, h, r, Earliest)
	items, _, err := s2.NextBatch(ctx, nil, nil, 100, 1)
	if err != nil || len(items) != 1 || items[0].Seq != 1 {
		t.Fatalf("byte-bounded batch: %d items, %v", len(items), err)
	}
}

func TestNextBatchReturnsOnTick(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-tick")
	publishTexts(t, ctx, r, 1)
	s := subscribe(t, ctx, h, r, "") // live: nothing to read yet
	tick := make(chan time.Time, 1)
	tick <- time.Now()
	items, ticked, err := s.NextBatch(ctx, tick, nil, 8, 0)
	if err != nil || !ticked || len(items) != 0 {
		t.Fatalf("ticked %v, %d items, %v; want a tick and nothing else", ticked, len(items), err)
	}
}

func TestEntryIsRenderedWithItsOwnTypeAndCursor(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-frame")
	// A publisher's bad type and cursor are replaced, not passed on
	// (published raw: natstest.Run would set them right).
	ev := &baagentv1.Event{RunId: r.RunID, Tenant: r.Tenant, Seq: 1, Type: "text_delta\ndata: forged", Cursor: "9\nid: 99",
		Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "line one\nline two"}}}
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := natsx.EventSubject(r.Tenant, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subject, data); err != nil {
		t.Fatal(err)
	}
	it, err := subscribe(t, ctx, h, r, Earliest).Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if it.Type != "text_delta" || it.Cursor != "1" {
		t.Fatalf("type %q, cursor %q: want the publisher's replaced", it.Type, it.Cursor)
	}
	frame := string(it.Frame(framingLines))
	lines := strings.Split(strings.TrimSuffix(frame, "\n\n"), "\n")
	if len(lines) != 2 || lines[0] != "id: 1" || lines[1] != "data: "+string(it.JSON) {
		t.Fatalf("frame %q", frame)
	}
}
