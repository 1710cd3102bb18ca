package hub

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

func TestTryNextServesBufferedEventsWithoutWaiting(t *testing.T) {
	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-try")
	publishTexts(t, ctx, r, 5)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, ctx, h, r, Earliest)
	first, err := s.Next(ctx) // waits until the feed has the events
	if err != nil || first.Seq != 1 {
		t.Fatalf("Next: seq %d, %v", first.Seq, err)
	}
	got := []uint64{first.Seq}
	for len(got) < 6 {
		it, ok := s.TryNext()
		if !ok {
			// The feed may still be receiving; wait for the next one.
			if it, err = s.Next(ctx); err != nil {
				t.Fatalf("Next after %v: %v", got, err)
			}
		}
		got = append(got, it.Seq)
	}
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("seqs %v: want 1..6 in order", got)
		}
	}
	if it, ok := s.TryNext(); ok {
		t.Fatalf("TryNext after the terminal event gave seq %d", it.Seq)
	}
	if _, err := s.Next(ctx); err == nil {
		t.Fatal("Next after the terminal event: want io.EOF")
	}
}

func TestSSEFrameIsRenderedOnceAndCannotBeSplit(t *testing.T) {
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
	frame := string(it.SSE)
	lines := strings.Split(strings.TrimSuffix(frame, "\n\n"), "\n")
	if len(lines) != 3 || lines[0] != "id: 1" || lines[1] != "event: text_delta" || lines[2] != "data: "+string(it.JSON) {
		t.Fatalf("frame %q", frame)
	}
}
