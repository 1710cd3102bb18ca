package checkpoint

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// replyLostKV stores the first Update but reports it lost, as when the
// NATS server restarts between storing a request and answering it.
type replyLostKV struct {
	jetstream.KeyValue
	lost   int
	before func(ctx context.Context) // runs before the retried attempt
}

func (k *replyLostKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if k.lost == 0 {
		k.lost++
		if _, err := k.KeyValue.Update(ctx, key, value, rev); err != nil {
			return 0, err
		}
		return 0, context.DeadlineExceeded
	}
	if k.before != nil {
		k.before(ctx)
	}
	return k.KeyValue.Update(ctx, key, value, rev)
}

// TestCheckpointWriteRetriedAfterALostReply: a checkpoint write whose reply
// is lost is retried; the retry, refused by the revision check, is
// recognised as already stored (the run goes on). A different checkpoint
// stored meanwhile (another replica took the run) is still ErrLostRun.
func TestCheckpointWriteRetriedAfterALostReply(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	js := startJetStream(ctx, t)
	kv, err := js.KeyValue(ctx, natsx.BucketCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	write := func(store *Store, runID string, step int32, rev uint64) (uint64, error) {
		return store.Write(ctx, testTenant, runID, &State{Kind: "step", Owner: "r0", Step: step, At: time.Now()}, rev)
	}

	lost := &replyLostKV{KeyValue: kv}
	store := &Store{kv: lost}
	rev, err := write(store, "run_lost_reply", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	next, err := write(store, "run_lost_reply", 2, rev)
	if err != nil || next <= rev {
		t.Fatalf("write after a lost reply = %d, %v; want a revision after %d", next, err, rev)
	}
	cp, got, err := store.Load(ctx, testTenant, "run_lost_reply")
	if err != nil || cp == nil || got != next || cp.Step != 2 {
		t.Fatalf("stored: %+v at %d, %v; want step 2 at %d", cp, got, err, next)
	}

	taken := &replyLostKV{KeyValue: kv}
	store = &Store{kv: taken}
	rev, err = write(store, "run_taken", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	taken.before = func(ctx context.Context) {
		// Another replica's checkpoint lands after the lost one.
		key, _ := natsx.CheckpointKey(testTenant, "run_taken")
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := kv.Update(ctx, key, []byte(`{"kind":"step","owner":"r1","step":9}`), e.Revision()); err != nil {
			t.Error(err)
		}
	}
	if _, err := write(store, "run_taken", 2, rev); !errors.Is(err, ErrLostRun) {
		t.Fatalf("write after another replica's: %v, want ErrLostRun", err)
	}
}

const testTenant = "t1"

// startJetStream starts an embedded NATS server with the platform's
// streams and buckets.
func startJetStream(_ context.Context, t *testing.T) jetstream.JetStream {
	t.Helper()
	js, _ := natstest.Connect(t, natstest.StartNATS(t).ClientURL(), "checkpoint-test")
	return js
}
