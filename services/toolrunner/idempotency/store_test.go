package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// openKV starts an embedded NATS with JetStream, provisions the buckets
// and opens the records store on it.
func openKV(t *testing.T) *KV {
	t.Helper()
	js, _ := natstest.Connect(t, natstest.StartNATS(t).ClientURL(), "idempotency-test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := OpenKV(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// Both stores keep the same contract: create once, update only at the
// latest revision, read back what was written.
func TestStores(t *testing.T) {
	t.Parallel()

	for name, open := range map[string]func(t *testing.T) Store{
		"kv":     func(t *testing.T) Store { return openKV(t) },
		"memory": func(*testing.T) Store { return NewMemory(nil, time.Hour, 10) },
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			key := Key("acme", "run-1:s1:c0")
			if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
			}
			now := time.Now().UTC().Truncate(time.Millisecond)
			rec := Record{State: Started, Fingerprint: "fp", Holder: "r1/n1", Tool: "append", StartedAt: now, HeartbeatAt: now}
			rev, err := s.Create(ctx, key, rec)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Create(ctx, key, rec); !errors.Is(err, ErrExists) {
				t.Fatalf("second Create: %v, want ErrExists", err)
			}
			rec.HeartbeatAt = now.Add(time.Second)
			rev2, err := s.Update(ctx, key, rec, rev)
			if err != nil || rev2 == rev {
				t.Fatalf("Update: rev %d → %d, %v", rev, rev2, err)
			}
			if _, err := s.Update(ctx, key, rec, rev); !errors.Is(err, ErrRevision) {
				t.Fatalf("Update at a stale revision: %v, want ErrRevision", err)
			}
			rec.State, rec.Result = Done, []byte{1, 2, 3}
			if _, err := s.Update(ctx, key, rec, rev2); err != nil {
				t.Fatal(err)
			}
			e, err := s.Get(ctx, key)
			if err != nil || e.State != Done || string(e.Result) != "\x01\x02\x03" || e.Holder != "r1/n1" || !e.HeartbeatAt.Equal(now.Add(time.Second)) {
				t.Fatalf("Get: %+v, %v", e, err)
			}
			if Key("acme", "k") == Key("globex", "k") {
				t.Error("tenants share a record key")
			}
		})
	}
}

func TestMemoryIsBounded(t *testing.T) {
	t.Parallel()

	now := time.Unix(1_780_000_000, 0)
	m := NewMemory(func() time.Time { return now }, time.Minute, 3)
	ctx := context.Background()
	for i := range 10 {
		now = now.Add(time.Second)
		if _, err := m.Create(ctx, Key("t", string(rune('a'+i))), Record{State: Started}); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != 3 {
		t.Fatalf("%d records held, bound 3", m.Len())
	}
	if _, err := m.Get(ctx, Key("t", "j")); err != nil {
		t.Fatalf("newest record evicted: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := m.Get(ctx, Key("t", "j")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record kept past its TTL: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"state":"started","fingerprint":"x","holder":"h","tool":"t","started_at":"2026-01-01T00:00:00Z","heartbeat_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"state":"done","result":"AQID"}`))
	f.Add([]byte(`{"state":"other"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decode(b)
		if err != nil {
			return
		}
		if rec.State != Started && rec.State != Done {
			t.Fatalf("decoded a record in state %q", rec.State)
		}
		again, err := encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decode(again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}

// PurgeConversation removes the conversation's records, every revision
// and marker included, and keeps other conversations' and untagged ones.
func TestPurgeConversation(t *testing.T) {
	kv := openKV(t)
	ctx := t.Context()
	rec := Record{State: Started, Fingerprint: "f", Holder: "h", Tool: "t", StartedAt: time.Now(), HeartbeatAt: time.Now()}
	keys := map[string]bool{
		ConversationKey("acme", "conv-1", "a"):  false,
		ConversationKey("acme", "conv-1", "b"):  false,
		ConversationKey("acme", "conv-2", "a"):  true,
		ConversationKey("other", "conv-1", "a"): true,
		Key("acme", "a"):                        true,
	}
	for k := range keys {
		rev, err := kv.Create(ctx, k, rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Update(ctx, k, rec, rev); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []Store{kv, NewMemory(nil, time.Hour, 100)} {
		if _, ok := s.(ConversationPurger); !ok {
			t.Fatalf("%T is not a ConversationPurger", s)
		}
	}
	n, err := kv.PurgeConversation(ctx, "acme", "conv-1")
	if err != nil || n != 2 {
		t.Fatalf("PurgeConversation = %d, %v; want 2 records", n, err)
	}
	for k, kept := range keys {
		_, err := kv.Get(ctx, k)
		if kept != (err == nil) {
			t.Errorf("key %s: kept %v, Get error %v", k, kept, err)
		}
	}
	st, err := kv.js.Stream(ctx, "KV_"+natsx.BucketToolIdempotency)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+natsx.BucketToolIdempotency+"."+ConversationTag("acme", "conv-1")+".>"))
	if err != nil || len(info.State.Subjects) != 0 {
		t.Fatalf("subjects left for the purged conversation: %v, %v", info.State.Subjects, err)
	}
}
