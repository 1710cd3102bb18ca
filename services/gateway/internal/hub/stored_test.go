package hub

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

func readStored(t *testing.T, ctx context.Context, h *Hub, tenant, runID string) []string {
	t.Helper()
	var got []string
	if err := h.ReadStored(ctx, tenant, runID, func(e *Entry) error {
		if len(e.JSON) == 0 || e.Event.GetRunId() != runID || e.Cursor != fmt.Sprint(e.Seq) {
			t.Errorf("entry %d: run %q cursor %q json %q", e.Seq, e.Event.GetRunId(), e.Cursor, e.JSON)
		}
		got = append(got, fmt.Sprint(e.Seq))
		return nil
	}); err != nil {
		t.Fatalf("ReadStored: %v", err)
	}
	return got
}

func TestReadStoredIsASnapshotInSeqOrder(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-stored")
	// Nothing stored: nothing read, no wait.
	if got := readStored(t, ctx, h, "acme", "run-stored"); len(got) != 0 {
		t.Fatalf("empty run: %v", got)
	}
	publishTexts(t, ctx, r, 3)
	// Stored out of order and duplicated, as during a publish repair.
	for _, seq := range []uint64{5, 4, 5} {
		if _, err := r.PublishAt(ctx, seq, textEvent(fmt.Sprint(seq))); err != nil {
			t.Fatal(err)
		}
	}
	// A run in progress is read as far as it has got.
	wantSeq(t, readStored(t, ctx, h, "acme", "run-stored"), seqs(1, 5))
	dup := natstest.NewRun(js, "acme", "run-stored")
	publishTexts(t, ctx, dup, 2) // seq 1 and 2 again, other message ids
	// Another tenant's subject holds nothing of this run.
	if got := readStored(t, ctx, h, "initech", "run-stored"); len(got) != 0 {
		t.Fatalf("other tenant read %v", got)
	}
	// The callback's error stops the read.
	boom := errors.New("boom")
	n := 0
	err := h.ReadStored(ctx, "acme", "run-stored", func(*Entry) error {
		n++
		if n == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 2 {
		t.Fatalf("err %v after %d entries", err, n)
	}
	// Reading takes no feed.
	if h.Feeds() != 0 {
		t.Errorf("%d feeds after reads", h.Feeds())
	}
	for _, bad := range [][2]string{{"a.b", "x"}, {"acme", "*"}, {"", "x"}} {
		if err := h.ReadStored(ctx, bad[0], bad[1], func(*Entry) error { return nil }); err == nil {
			t.Errorf("ReadStored(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestReadStoredEndsWhenItsLastEventIsGone(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-gone")
	publishTexts(t, ctx, r, 3)
	st, err := h.eventStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := natsx.EventSubject("acme", "run-gone")
	// The snapshot's last event (a stream sequence far ahead) no longer
	// exists: the read ends once nothing is left.
	var got []string
	err = h.readStoredThrough(ctx, st, subject, "acme", "run-gone", 1<<40, 20*time.Millisecond, func(e *Entry) error {
		got = append(got, fmt.Sprint(e.Seq))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSeq(t, got, seqs(1, 3))
	// Every event gone before the consumer got one: nothing arrives, and
	// the read ends at the first idle check instead of waiting forever.
	empty, _ := natsx.EventSubject("acme", "run-expired")
	err = h.readStoredThrough(ctx, st, empty, "acme", "run-expired", 1<<40, 20*time.Millisecond, func(e *Entry) error {
		t.Errorf("entry %d of a run with no events", e.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadStoredHoldsBoundedEventsAheadOfAGap(t *testing.T) {
	t.Parallel()

	var o storedOrder
	var got []uint64
	fn := func(e *Entry) error { got = append(got, e.Seq); return nil }
	for _, s := range []uint64{1, 3, 2, 6, 5} {
		if err := o.offer(&Entry{Seq: s}, fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.flush(fn); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 2 3 5 6]" {
		t.Errorf("order %v", got)
	}
	// More than maxHeld ahead of a gap: the gap is accepted, in order.
	o, got = storedOrder{}, nil
	_ = o.offer(&Entry{Seq: 1}, fn)
	for s := uint64(maxHeld + 3); s > 2; s-- {
		_ = o.offer(&Entry{Seq: s}, fn)
	}
	if len(o.held) > maxHeld || len(got) != maxHeld+2 || got[1] != 3 {
		t.Fatalf("held %d, emitted %d starting %v", len(o.held), len(got), got[:min(3, len(got))])
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("out of order at %d: %v", i, got[i-1:i+1])
		}
	}
}
