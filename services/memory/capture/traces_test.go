package capture

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
)

// RecordTrace records a trace once per run, with fakeMemory's failure
// switches.
func (f *fakeMemory) RecordTrace(_ context.Context, req *baagentv1.RecordTraceRequest) (*baagentv1.RecordTraceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.traceCalls++
	switch {
	case f.down:
		return nil, status.Error(codes.Unavailable, "memory store is down")
	case f.refuse:
		return nil, status.Error(codes.InvalidArgument, "trace.run_id: required")
	case f.skip:
		return &baagentv1.RecordTraceResponse{Skipped: true}, nil
	}
	if f.traces == nil {
		f.traces = map[string]*baagentv1.RecordTraceRequest{}
	}
	run := req.GetTrace().GetRunId()
	if _, ok := f.traces[run]; ok {
		return &baagentv1.RecordTraceResponse{PatternId: "pt_" + run, Duplicate: true}, nil
	}
	f.traces[run] = req
	return &baagentv1.RecordTraceResponse{PatternId: "pt_" + run, Created: true}, nil
}

func (f *fakeMemory) recorded() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.traces), f.traceCalls
}

func traceRequest(tenant, conv, run string) *baagentv1.RecordTraceRequest {
	return &baagentv1.RecordTraceRequest{Tenant: tenant, Trace: &baagentv1.InteractionTrace{
		RunId: run, ConversationId: conv, UserGoal: "Report revenue by region", Success: true,
		ToolCalls: []*baagentv1.TraceToolCall{{Tool: "sql_query", Success: true}},
	}}
}

// publishTrace publishes a trace request as the orchestrator does: on the
// conversation's capture subject, kind trace, message id trace:<run>.
func (f *fixture) publishTrace(t *testing.T, subj string, req *baagentv1.RecordTraceRequest, kind string) {
	t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "trace:"+req.GetTrace().GetRunId())
	msg.Header.Set(natsx.CaptureKindHeader, kind)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) traceCount(outcome string) float64 {
	return testutil.ToFloat64(f.c.traces.WithLabelValues(outcome))
}

func subject(t *testing.T, tenant, conv string) string {
	t.Helper()
	s, err := natsx.MemoryCaptureSubject(tenant, conv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A trace and the run's episode travel on one subject; each reaches its
// RPC once, and a republished trace is deduplicated by its message id.
func TestCaptureDeliversTracesBesideEpisodes(t *testing.T) {
	f := start(t, Options{})
	subj := subject(t, "acme", "conv_1")
	f.publish(t, request("acme", "conv_1", "run_1"))
	f.publishTrace(t, subj, traceRequest("acme", "conv_1", "run_1"), natsx.CaptureKindTrace)
	f.publishTrace(t, subj, traceRequest("acme", "conv_1", "run_1"), natsx.CaptureKindTrace)
	testkit.Eventually(t, 10*time.Second, "episode and trace delivered and acknowledged", func() bool {
		eps, _ := f.mem.stored()
		trs, _ := f.mem.recorded()
		return eps == 1 && trs == 1 && f.pending(t) == 0 && f.traceCount(outcomeStored) == 1 && f.count(outcomeStored) == 1
	})
	if _, calls := f.mem.recorded(); calls != 1 {
		t.Fatalf("RecordTrace called %d times, want 1", calls)
	}
	if _, calls := f.mem.stored(); calls != 1 {
		t.Fatalf("AddEpisode called %d times, want 1", calls)
	}
	f.mem.mu.Lock()
	got := f.mem.traces["run_1"]
	f.mem.mu.Unlock()
	if got.GetTenant() != "acme" || got.GetTrace().GetUserGoal() != "Report revenue by region" || len(got.GetTrace().GetToolCalls()) != 1 {
		t.Fatalf("recorded %v", got)
	}
}

func TestCaptureRetriesTracesWhileMemoryIsDown(t *testing.T) {
	f := start(t, Options{MaxDeliver: 50})
	f.mem.set(func(m *fakeMemory) { m.down = true })
	f.publishTrace(t, subject(t, "acme", "conv_1"), traceRequest("acme", "conv_1", "run_2"), natsx.CaptureKindTrace)
	testkit.Eventually(t, 10*time.Second, "trace redelivered while down", func() bool { return f.traceCount(outcomeRetried) >= 2 })
	f.mem.set(func(m *fakeMemory) { m.down = false })
	testkit.Eventually(t, 20*time.Second, "trace recorded once memory is back", func() bool {
		n, _ := f.mem.recorded()
		return n == 1 && f.pending(t) == 0
	})
	if f.traceCount(outcomeDropped) != 0 || f.count(outcomeRetried) != 0 {
		t.Fatal("a transient failure dropped the trace, or it was counted as an episode")
	}
}

func TestCaptureTerminatesBadTraces(t *testing.T) {
	f := start(t, Options{})
	subj := subject(t, "acme", "conv_1")
	// The body's tenant differs from the subject's.
	f.publishTrace(t, subj, traceRequest("other", "conv_1", "run_3"), natsx.CaptureKindTrace)
	// The trace's conversation differs from the subject's.
	f.publishTrace(t, subj, traceRequest("acme", "conv_2", "run_4"), natsx.CaptureKindTrace)
	// An unknown kind.
	f.publishTrace(t, subj, traceRequest("acme", "conv_1", "run_5"), "bogus")
	testkit.Eventually(t, 10*time.Second, "malformed traces dropped", func() bool {
		return f.traceCount(outcomeDropped) == 2 && f.count(outcomeDropped) == 1 && f.pending(t) == 0
	})
	f.mem.set(func(m *fakeMemory) { m.refuse = true })
	f.publishTrace(t, subj, traceRequest("acme", "conv_1", "run_6"), natsx.CaptureKindTrace)
	testkit.Eventually(t, 10*time.Second, "refused trace dropped", func() bool {
		return f.traceCount(outcomeDropped) == 3 && f.pending(t) == 0
	})
	if _, calls := f.mem.recorded(); calls != 1 {
		t.Fatalf("RecordTrace called %d times, want 1 (malformed ones never reach it)", calls)
	}
	if _, calls := f.mem.stored(); calls != 0 {
		t.Fatalf("AddEpisode called %d times for traces", calls)
	}
}

func TestCaptureSkippedTraceIsAcked(t *testing.T) {
	f := start(t, Options{})
	f.mem.set(func(m *fakeMemory) { m.skip = true })
	f.publishTrace(t, subject(t, "acme", "conv_1"), traceRequest("acme", "conv_1", "run_7"), natsx.CaptureKindTrace)
	testkit.Eventually(t, 10*time.Second, "skipped trace acknowledged", func() bool {
		return f.traceCount(outcomeSkipped) == 1 && f.pending(t) == 0
	})
}

// Purging a conversation's subject (as deleting the conversation does)
// removes its queued trace with its episode.
func TestPurgeRemovesQueuedTraces(t *testing.T) {
	f := start(t, Options{MaxDeliver: 50})
	f.mem.set(func(m *fakeMemory) { m.down = true })
	subj := subject(t, "acme", "conv_8")
	f.publish(t, request("acme", "conv_8", "run_8"))
	f.publishTrace(t, subj, traceRequest("acme", "conv_8", "run_8"), natsx.CaptureKindTrace)
	testkit.Eventually(t, 10*time.Second, "both tried while memory is down", func() bool {
		return f.traceCount(outcomeRetried) >= 1 && f.count(outcomeRetried) >= 1
	})
	if n := f.pending(t); n != 2 {
		t.Fatalf("%d messages queued, want 2", n)
	}
	if _, err := natsx.PurgeSubject(context.Background(), f.js, natsx.StreamMemoryCapture, subj); err != nil {
		t.Fatal(err)
	}
	if n := f.pending(t); n != 0 {
		t.Fatalf("%d messages left after the purge", n)
	}
}

func TestDecodeTrace(t *testing.T) {
	subj := "baagent.memcapture.acme.conv_1"
	good, _ := proto.Marshal(traceRequest("acme", "conv_1", "run_1"))
	req, err := DecodeTrace(subj, good)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetTrace().GetRunId() != "run_1" {
		t.Fatalf("decoded %v", req)
	}
	for name, mutate := range map[string]func(*baagentv1.RecordTraceRequest){
		"tenant":       func(r *baagentv1.RecordTraceRequest) { r.Tenant = "other" },
		"no trace":     func(r *baagentv1.RecordTraceRequest) { r.Trace = nil },
		"conversation": func(r *baagentv1.RecordTraceRequest) { r.Trace.ConversationId = "conv_2" },
		"no goal":      func(r *baagentv1.RecordTraceRequest) { r.Trace.UserGoal = "" },
		"no run":       func(r *baagentv1.RecordTraceRequest) { r.Trace.RunId = "" },
		"bad run":      func(r *baagentv1.RecordTraceRequest) { r.Trace.RunId = "run.1" },
	} {
		r := traceRequest("acme", "conv_1", "run_1")
		mutate(r)
		b, _ := proto.Marshal(r)
		if _, err := DecodeTrace(subj, b); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	if _, err := DecodeTrace(subj, []byte{0xff, 0xff}); err == nil {
		t.Error("garbage: want error")
	}
	// A long goal is the memory service's to cut.
	long := traceRequest("acme", "conv_1", "run_1")
	long.Trace.UserGoal = strings.Repeat("report ", 5000)
	b, _ := proto.Marshal(long)
	if _, err := DecodeTrace(subj, b); err != nil {
		t.Errorf("long goal: %v", err)
	}
}

func FuzzDecodeTrace(f *testing.F) {
	good, _ := proto.Marshal(traceRequest("acme", "conv_1", "run_1"))
	f.Add("baagent.memcapture.acme.conv_1", good)
	f.Add("baagent.memcapture.acme.conv_2", good)
	f.Add("baagent.memcapture..", []byte{0xff})
	f.Add("x", []byte{})
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		req, err := DecodeTrace(subject, data)
		if err != nil {
			if req != nil {
				t.Fatal("request with an error")
			}
			return
		}
		tenant, conv, perr := natsx.ParseMemoryCaptureSubject(subject)
		if perr != nil || req.GetTenant() != tenant || req.GetTrace().GetConversationId() != conv {
			t.Fatalf("accepted %q for subject %q", req.GetTenant()+"/"+req.GetTrace().GetConversationId(), subject)
		}
		if req.GetTrace().GetUserGoal() == "" || natsx.ValidateToken("run_id", req.GetTrace().GetRunId()) != nil {
			t.Fatalf("accepted an incomplete trace %v", req)
		}
	})
}
