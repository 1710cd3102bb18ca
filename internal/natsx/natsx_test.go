package natsx

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/testkit"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startEmbedded(t *testing.T, dir string, logs *testkit.SyncBuffer) *EmbeddedServer {
	t.Helper()
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewJSONHandler(logs, nil))
	}
	srv, err := StartEmbedded(EmbeddedOptions{Port: -1, StoreDir: dir, Logger: log})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	return srv
}

func connect(t *testing.T, ctx context.Context, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := Connect(ctx, url, "test", nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func TestEmbeddedProvisionPublishPersist(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	logs := &testkit.SyncBuffer{}
	srv := startEmbedded(t, dir, logs)
	if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") || strings.HasSuffix(srv.ClientURL(), ":-1") {
		t.Fatalf("ClientURL = %q", srv.ClientURL())
	}
	if !strings.Contains(logs.String(), `"component":"nats-server"`) {
		t.Errorf("server logs were not routed to slog: %q", logs.String())
	}

	nc, js := connect(t, ctx, srv.ClientURL())

	if err := Provision(ctx, js, ProvisionConfig{}); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	before := streamInfos(t, ctx, js)
	if err := Provision(ctx, js, ProvisionConfig{}); err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	after := streamInfos(t, ctx, js)
	for name, b := range before {
		a := after[name]
		if !a.Created.Equal(b.Created) || a.Config.MaxAge != b.Config.MaxAge ||
			a.Config.MaxBytes != b.Config.MaxBytes || a.Config.Retention != b.Config.Retention {
			t.Errorf("stream %s changed on re-provision: %+v -> %+v", name, b.Config, a.Config)
		}
	}
	ev := before[StreamEvents].Config
	if ev.MaxAge != 72*time.Hour || ev.MaxBytes != 1<<30 || ev.Duplicates != 2*time.Minute ||
		ev.Storage != jetstream.FileStorage || ev.Discard != jetstream.DiscardOld {
		t.Errorf("events stream config: %+v", ev)
	}
	if before[StreamRuns].Config.Retention != jetstream.WorkQueuePolicy {
		t.Errorf("runs stream is not a work queue: %v", before[StreamRuns].Config.Retention)
	}

	// Changed limits are applied in place.
	if err := Provision(ctx, js, ProvisionConfig{EventsMaxAge: 48 * time.Hour}); err != nil {
		t.Fatalf("Provision with new limits: %v", err)
	}
	if got := streamInfos(t, ctx, js)[StreamEvents].Config.MaxAge; got != 48*time.Hour {
		t.Errorf("EventsMaxAge not updated: %s", got)
	}

	// Publish an event (twice with one Msg-Id: deduplicated) and read it back.
	subj, err := EventSubject("acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := js.Publish(ctx, subj, []byte(`{"seq":1}`), jetstream.WithMsgID("run-1/1")); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	msg, err := js.Stream(ctx, StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := msg.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if string(raw.Data) != `{"seq":1}` || raw.Sequence != 1 {
		t.Fatalf("read back %q at seq %d", raw.Data, raw.Sequence)
	}
	info, err := msg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("events stream has %d messages; duplicate not removed", info.State.Msgs)
	}

	// A run queued, history appended, KV put/get.
	runSubj, _ := RunSubject("acme", "run-1")
	if _, err := js.Publish(ctx, runSubj, []byte("run")); err != nil {
		t.Fatalf("queue run: %v", err)
	}
	histSubj, _ := HistorySubject("acme", "conv-1")
	if _, err := js.Publish(ctx, histSubj, []byte("hello")); err != nil {
		t.Fatalf("append history: %v", err)
	}
	kv, err := js.KeyValue(ctx, BucketCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := CheckpointKey("acme", "run-1")
	if _, err := kv.Put(ctx, key, []byte("step-3")); err != nil {
		t.Fatalf("kv put: %v", err)
	}
	e, err := kv.Get(ctx, key)
	if err != nil || string(e.Value()) != "step-3" {
		t.Fatalf("kv get = %v, %v", e, err)
	}
	runs, err := js.KeyValue(ctx, BucketRuns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Put(ctx, key, []byte("running")); err != nil {
		t.Fatalf("runs kv put: %v", err)
	}

	// Restart on the same store: data survives.
	nc.Close()
	srv.Shutdown()
	srv2 := startEmbedded(t, dir, nil)
	defer srv2.Shutdown()
	nc2, js2 := connect(t, ctx, srv2.ClientURL())
	defer nc2.Close()

	if err := Provision(ctx, js2, ProvisionConfig{EventsMaxAge: 48 * time.Hour}); err != nil {
		t.Fatalf("Provision after restart: %v", err)
	}
	st, err := js2.Stream(ctx, StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	raw, err = st.GetLastMsgForSubject(ctx, subj)
	if err != nil || string(raw.Data) != `{"seq":1}` {
		t.Fatalf("event after restart = %v, %v", raw, err)
	}
	kv2, err := js2.KeyValue(ctx, BucketCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	e, err = kv2.Get(ctx, key)
	if err != nil || string(e.Value()) != "step-3" {
		t.Fatalf("checkpoint after restart = %v, %v", e, err)
	}
	rs, err := js2.Stream(ctx, StreamRuns)
	if err != nil {
		t.Fatal(err)
	}
	if ri, err := rs.Info(ctx); err != nil || ri.State.Msgs != 1 {
		t.Fatalf("queued runs after restart = %v, %v", ri, err)
	}
}

func streamInfos(t *testing.T, ctx context.Context, js jetstream.JetStream) map[string]*jetstream.StreamInfo {
	t.Helper()
	out := map[string]*jetstream.StreamInfo{}
	for _, name := range []string{StreamEvents, StreamRuns, StreamHistory, "KV_" + BucketCheckpoints, "KV_" + BucketRuns} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = info
	}
	return out
}

func TestProvisionConfigValidation(t *testing.T) {
	for name, cfg := range map[string]ProvisionConfig{
		"negative age":       {EventsMaxAge: -time.Second},
		"negative bytes":     {HistoryMaxBytes: -1},
		"negative replicas":  {Replicas: -1},
		"dup window too big": {RunsMaxAge: time.Minute},
	} {
		if err := Provision(context.Background(), nil, cfg); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
}

func TestStreamSubjectsDoNotOverlap(t *testing.T) {
	streams, err := ProvisionConfig{}.Streams()
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range streams {
		for _, b := range streams[i+1:] {
			if server.SubjectsCollide(a.Subjects[0], b.Subjects[0]) {
				t.Errorf("streams %s (%s) and %s (%s) overlap", a.Name, a.Subjects[0], b.Name, b.Subjects[0])
			}
		}
	}
}

func TestStartEmbeddedPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = StartEmbedded(EmbeddedOptions{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		t.Fatal("want error on occupied port")
	}
	if !strings.Contains(err.Error(), l.Addr().String()) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("error should name %s and wrap EADDRINUSE: %v", l.Addr(), err)
	}
}

func TestStartEmbeddedNeedsStoreDir(t *testing.T) {
	if _, err := StartEmbedded(EmbeddedOptions{Port: -1}); err == nil {
		t.Fatal("want error without StoreDir")
	}
}

func TestConnectGivesUpAtDeadline(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://user:s3cret@" + l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = Connect(ctx, url, "test", nil)
	if err == nil {
		t.Fatal("want error")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("error should wrap the deadline and name the address: %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestConnectWaitsForServer(t *testing.T) {
	// Reserve a port, start connecting, then start the server there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	ctx := testCtx(t)
	logs := &testkit.SyncBuffer{}
	type result struct {
		nc  *nats.Conn
		err error
	}
	res := make(chan result, 1)
	go func() {
		nc, err := Connect(ctx, "nats://"+l.Addr().String(), "waiter", slog.New(slog.NewJSONHandler(logs, nil)))
		res <- result{nc, err}
	}()
	srv, err := StartEmbedded(EmbeddedOptions{Port: port, StoreDir: t.TempDir()})
	if err != nil {
		t.Skipf("port %d was taken meanwhile: %v", port, err)
	}
	defer srv.Shutdown()
	r := <-res
	if r.err != nil {
		t.Fatalf("Connect: %v", r.err)
	}
	defer r.nc.Close()
	if !r.nc.IsConnected() {
		t.Fatal("not connected")
	}
	if !strings.Contains(logs.String(), "connected to NATS") {
		t.Errorf("connect not logged: %q", logs.String())
	}
}

func TestConnectBadURL(t *testing.T) {
	_, err := Connect(testCtx(t), "nats://a b:1", "test", nil)
	if err == nil || !strings.Contains(err.Error(), "a b:1") {
		t.Fatalf("want error naming the URL, got %v", err)
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                 "nats://127.0.0.1:4222",
		"nats://u:pw@h:4222":                    "nats://u:xxxxx@h:4222",
		"nats://tok@h:4222, nats://u:p@h2:4222": "nats://xxxxx@h:4222,nats://u:xxxxx@h2:4222",
		"nats://u:p@bad host":                   "xxxxx@bad host",
	} {
		if got := redactURLs(in); got != want {
			t.Errorf("redactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
