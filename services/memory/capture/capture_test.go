package capture

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// fakeMemory is a MemoryService that stores episodes by idempotency key
// and can be made unavailable or to refuse.
type fakeMemory struct {
	baagentv1.UnimplementedMemoryServiceServer
	mu       sync.Mutex
	down     bool
	refuse   bool
	skip     bool
	calls    int
	episodes map[string]*baagentv1.AddEpisodeRequest
	deleted  []string
	// traces are the RecordTrace requests by run id; traceCalls counts
	// the calls (traces_test.go).
	traces     map[string]*baagentv1.RecordTraceRequest
	traceCalls int
	// entered, when set, is closed by the first AddEpisode, which then
	// waits for release.
	entered, release chan struct{}
}

func (f *fakeMemory) AddEpisode(_ context.Context, req *baagentv1.AddEpisodeRequest) (*baagentv1.AddEpisodeResponse, error) {
	f.mu.Lock()
	entered, release := f.entered, f.release
	f.entered = nil
	f.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	switch {
	case f.down:
		return nil, status.Error(codes.Unavailable, "memory store is down")
	case f.refuse:
		return nil, status.Error(codes.InvalidArgument, "content: too long")
	case f.skip:
		return &baagentv1.AddEpisodeResponse{Skipped: true}, nil
	}
	if f.episodes == nil {
		f.episodes = map[string]*baagentv1.AddEpisodeRequest{}
	}
	if _, ok := f.episodes[req.GetIdempotencyKey()]; !ok {
		f.episodes[req.GetIdempotencyKey()] = req
	}
	return &baagentv1.AddEpisodeResponse{Episode: &baagentv1.Episode{Id: "ep_" + req.GetRunId(), Tenant: req.GetTenant()}}, nil
}

func (f *fakeMemory) DeleteEpisode(_ context.Context, req *baagentv1.DeleteEpisodeRequest) (*baagentv1.DeleteEpisodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, req.GetTenant()+"/"+req.GetId())
	return &baagentv1.DeleteEpisodeResponse{}, nil
}

func (f *fakeMemory) set(fn func(*fakeMemory)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeMemory) stored() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.episodes), f.calls
}

type fixture struct {
	js  jetstream.JetStream
	mem *fakeMemory
	reg *prometheus.Registry
	c   *Consumer
}

func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	srv := natstest.StartNATS(t)
	js, _ := natstest.Connect(t, srv.ClientURL(), "capture-test")
	mem := &fakeMemory{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterMemoryServiceServer(gs, mem)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	reg := prometheus.NewRegistry()
	opts.JetStream, opts.Memory, opts.Registerer = js, baagentv1.NewMemoryServiceClient(cc), reg
	if opts.FirstDelay == 0 {
		opts.FirstDelay = 20 * time.Millisecond
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, context.Background(), c.Run)
	return &fixture{js: js, mem: mem, reg: reg, c: c}
}

func request(tenant, conv, run string) *baagentv1.AddEpisodeRequest {
	return &baagentv1.AddEpisodeRequest{
		Tenant: tenant, ConversationId: conv, RunId: run, IdempotencyKey: run,
		Content: "Question: what sold best?\nAnswer: Software.", Source: baagentv1.EpisodeSource_EPISODE_SOURCE_RUN,
	}
}

func (f *fixture) publish(t *testing.T, req *baagentv1.AddEpisodeRequest) {
	t.Helper()
	subj, err := natsx.MemoryCaptureSubject(req.GetTenant(), req.GetConversationId())
	if err != nil {
		t.Fatal(err)
	}
	f.publishRaw(t, subj, req.GetRunId(), req)
}

func (f *fixture) publishRaw(t *testing.T, subj, msgID string, req proto.Message) {
	t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) count(outcome string) float64 {
	return testutil.ToFloat64(f.c.total.WithLabelValues(outcome))
}

func (f *fixture) pending(t *testing.T) uint64 {
	t.Helper()
	st, err := f.js.Stream(context.Background(), natsx.StreamMemoryCapture)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestCaptureStoresOnceAndAcks(t *testing.T) {
	f := start(t, Options{})
	f.publish(t, request("acme", "conv_1", "run_1"))
	f.publish(t, request("acme", "conv_1", "run_1")) // a retried publish: deduplicated by Nats-Msg-Id
	testkit.Eventually(t, 10*time.Second, "episode stored, acknowledged and counted", func() bool {
		n, _ := f.mem.stored()
		// The count follows the acknowledgement.
		return n == 1 && f.pending(t) == 0 && f.count(outcomeStored) == 1
	})
	if _, calls := f.mem.stored(); calls != 1 {
		t.Fatalf("AddEpisode called %d times, want 1", calls)
	}
	f.mem.mu.Lock()
	got := f.mem.episodes["run_1"]
	f.mem.mu.Unlock()
	if got.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_RUN || got.GetTenant() != "acme" || got.GetConversationId() != "conv_1" {
		t.Fatalf("stored %v", got)
	}
	if f.count(outcomeStored) != 1 || f.count(outcomeWithdrawn) != 0 {
		t.Fatalf("stored count %v, withdrawn %v", f.count(outcomeStored), f.count(outcomeWithdrawn))
	}
}

// A conversation deleted while its run is being captured: the deletion
// purges the request and then deletes the conversation's episodes, which
// may come before the episode in flight is stored. The consumer sees the
// purge and deletes the episode itself.
func TestCaptureWithdrawsAnEpisodeOfAConversationDeletedMeanwhile(t *testing.T) {
	f := start(t, Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	f.mem.set(func(m *fakeMemory) { m.entered, m.release = entered, release })
	f.publish(t, request("acme", "conv_9", "run_9"))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request was not delivered")
	}
	subj, err := natsx.MemoryCaptureSubject("acme", "conv_9")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsx.PurgeSubject(context.Background(), f.js, natsx.StreamMemoryCapture, subj); err != nil {
		t.Fatal(err)
	}
	close(release)
	testkit.Eventually(t, 10*time.Second, "the episode withdrawn", func() bool { return f.count(outcomeWithdrawn) == 1 })
	f.mem.mu.Lock()
	deleted := f.mem.deleted
	f.mem.mu.Unlock()
	if len(deleted) != 1 || deleted[0] != "acme/ep_run_9" {
		t.Fatalf("deleted %v, want [acme/ep_run_9]", deleted)
	}
	if f.count(outcomeStored) != 0 {
		t.Fatal("counted as stored")
	}
}

func TestCaptureRetriesWhileMemoryIsDown(t *testing.T) {
	f := start(t, Options{MaxDeliver: 50})
	f.mem.set(func(m *fakeMemory) { m.down = true })
	f.publish(t, request("acme", "conv_1", "run_2"))
	testkit.Eventually(t, 10*time.Second, "redelivered while down", func() bool { return f.count(outcomeRetried) >= 2 })
	if n, _ := f.mem.stored(); n != 0 {
		t.Fatalf("stored %d while down", n)
	}
	f.mem.set(func(m *fakeMemory) { m.down = false })
	testkit.Eventually(t, 20*time.Second, "stored once memory is back", func() bool {
		n, _ := f.mem.stored()
		return n == 1 && f.pending(t) == 0
	})
	if f.count(outcomeDropped) != 0 {
		t.Fatal("a transient failure dropped the request")
	}
}

func TestCaptureGivesUpAfterMaxDeliver(t *testing.T) {
	f := start(t, Options{MaxDeliver: 3})
	f.mem.set(func(m *fakeMemory) { m.down = true })
	f.publish(t, request("acme", "conv_1", "run_3"))
	testkit.Eventually(t, 10*time.Second, "dropped after 3 deliveries", func() bool {
		return f.count(outcomeDropped) == 1 && f.pending(t) == 0
	})
	if _, calls := f.mem.stored(); calls != 3 {
		t.Fatalf("AddEpisode called %d times, want 3", calls)
	}
}

func TestCaptureTerminatesPoisonAndRefused(t *testing.T) {
	f := start(t, Options{})
	subj, _ := natsx.MemoryCaptureSubject("acme", "conv_1")
	// Tenant of the body differs from the subject's.
	f.publishRaw(t, subj, "m1", request("other", "conv_1", "run_4"))
	// Not a protobuf message at all.
	msg := &nats.Msg{Subject: subj, Data: []byte{0xff, 0xff, 0xff}, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "m2")
	if _, err := f.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "poison dropped", func() bool { return f.count(outcomeDropped) == 2 })
	f.mem.set(func(m *fakeMemory) { m.refuse = true })
	f.publish(t, request("acme", "conv_1", "run_5"))
	testkit.Eventually(t, 10*time.Second, "refused dropped", func() bool { return f.count(outcomeDropped) == 3 && f.pending(t) == 0 })
	if _, calls := f.mem.stored(); calls != 1 {
		t.Fatalf("AddEpisode called %d times, want 1 (poison never reaches it)", calls)
	}
}

func TestCaptureSkippedIsAcked(t *testing.T) {
	f := start(t, Options{})
	f.mem.set(func(m *fakeMemory) { m.skip = true })
	f.publish(t, request("acme", "conv_1", "run_6"))
	testkit.Eventually(t, 10*time.Second, "skipped and acknowledged", func() bool {
		return f.count(outcomeSkipped) == 1 && f.pending(t) == 0
	})
}

func TestDecode(t *testing.T) {
	subj, _ := natsx.MemoryCaptureSubject("acme", "conv_1")
	good := request("acme", "conv_1", "run_1")
	good.Source = baagentv1.EpisodeSource_EPISODE_SOURCE_USER
	good.Wait = true
	data, _ := proto.Marshal(good)
	req, err := Decode(subj, data)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_RUN || req.GetWait() {
		t.Fatalf("source %v wait %v: want RUN, false", req.GetSource(), req.GetWait())
	}
	for name, mutate := range map[string]func(*baagentv1.AddEpisodeRequest){
		"conversation": func(r *baagentv1.AddEpisodeRequest) { r.ConversationId = "conv_2" },
		"empty":        func(r *baagentv1.AddEpisodeRequest) { r.Content = "" },
		"long":         func(r *baagentv1.AddEpisodeRequest) { r.Content = strings.Repeat("x", MaxContentBytes+1) },
		"no key":       func(r *baagentv1.AddEpisodeRequest) { r.IdempotencyKey = "" },
		"long key":     func(r *baagentv1.AddEpisodeRequest) { r.IdempotencyKey = strings.Repeat("k", 129) },
		"bad run":      func(r *baagentv1.AddEpisodeRequest) { r.RunId = "run.1" },
	} {
		r := request("acme", "conv_1", "run_1")
		mutate(r)
		b, _ := proto.Marshal(r)
		if _, err := Decode(subj, b); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	if _, err := Decode("baagent.runs.acme.run_1", data); err == nil {
		t.Error("foreign subject: want error")
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := proto.Marshal(request("acme", "conv_1", "run_1"))
	f.Add("baagent.memcapture.acme.conv_1", good)
	f.Add("baagent.memcapture.acme.conv_2", good)
	f.Add("baagent.memcapture..", []byte{0xff})
	f.Add("x", []byte{})
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		req, err := Decode(subject, data)
		if err != nil {
			if req != nil {
				t.Fatal("request with an error")
			}
			return
		}
		tenant, conv, perr := natsx.ParseMemoryCaptureSubject(subject)
		if perr != nil || req.GetTenant() != tenant || req.GetConversationId() != conv {
			t.Fatalf("accepted %q for subject %q", req.GetTenant()+"/"+req.GetConversationId(), subject)
		}
		if req.GetContent() == "" || len(req.GetContent()) > MaxContentBytes || req.GetIdempotencyKey() == "" ||
			len(req.GetIdempotencyKey()) > MaxIdempotencyKeyBytes || req.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_RUN {
			t.Fatalf("accepted an out-of-bounds request %v", req)
		}
	})
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, time.Minute}, {1000, time.Minute}} {
		if got := Backoff(c.n, time.Second, time.Minute); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestNewNeedsOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("want error without JetStream and Memory")
	}
}

// BenchmarkCapture is the capture path's throughput: b.N requests
// published and each delivered to AddEpisode (a loopback gRPC memory
// service) and acknowledged.
func BenchmarkCapture(b *testing.B) {
	srv := natstest.StartNATS(b)
	js, _ := natstest.Connect(b, srv.ClientURL(), "capture-bench")
	mem := &fakeMemory{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterMemoryServiceServer(gs, mem)
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	c, err := New(Options{JetStream: js, Memory: baagentv1.NewMemoryServiceClient(cc), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	testkit.Run(b, context.Background(), c.Run)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		req := request("acme", "conv_1", fmt.Sprintf("run_%d", i))
		data, _ := proto.Marshal(req)
		msg := &nats.Msg{Subject: "baagent.memcapture.acme.conv_1", Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, req.GetRunId())
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
	testkit.Eventually(b, 2*time.Minute, "every capture stored", func() bool {
		n, _ := mem.stored()
		return n == b.N
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "captures/s")
}
