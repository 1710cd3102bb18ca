package skillstack

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

func TestStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := natstest.Connect(t, natstest.StartNATS(t).ClientURL(), "skillstack-test")
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, natsx.BucketCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(kv)
	if got, err := s.Load(ctx, "t1", "conv-1"); got != nil || err != nil {
		t.Fatalf("nothing saved: %v, %v", got, err)
	}
	saved := &Saved{RunID: "run-1", At: time.Now(), Frames: []SavedFrame{{Name: "a", ID: "x", Revision: "r1"}}}
	if err := s.Save(ctx, "t1", "conv-1", saved); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, "t1", "conv-1")
	if err != nil || got.RunID != "run-1" || len(got.Frames) != 1 || got.Frames[0].Revision != "r1" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	// Another tenant's conversation of the same id is another stack.
	if other, err := s.Load(ctx, "t2", "conv-1"); other != nil || err != nil {
		t.Errorf("other tenant: %v, %v", other, err)
	}
	// An empty stack clears it.
	if err := s.Save(ctx, "t1", "conv-1", &Saved{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "t1", "conv-1"); got != nil || err != nil {
		t.Errorf("after clearing: %v, %v", got, err)
	}
	// Ids that could address other keys are refused.
	for _, bad := range []string{"", "a.b", "a*", "a>"} {
		if _, err := s.Load(ctx, "t1", bad); err == nil {
			t.Errorf("conversation id %q accepted", bad)
		}
		if err := s.Save(ctx, bad, "c", saved); err == nil {
			t.Errorf("tenant %q accepted", bad)
		}
	}
	// A damaged record is an error, not an empty stack.
	if _, err := kv.Put(ctx, "t1.skills.conv-bad", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "t1", "conv-bad"); err == nil {
		t.Error("a damaged record loaded")
	}
	var _ jetstream.KeyValue = kv
}
