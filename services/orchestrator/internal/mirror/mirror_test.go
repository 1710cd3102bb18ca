package mirror

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
)

const tenant = "acme"

func setup(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	js, _ := natstest.Connect(t, natstest.StartNATS(t).ClientURL(), "mirror-test")
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		t.Fatal(err)
	}
	return ctx, js
}

func publisher(t *testing.T, js jetstream.JetStream, runID, parent string) *publish.Publisher {
	t.Helper()
	p, err := publish.New(js, &baagentv1.Run{Tenant: tenant, RunId: runID, ConversationId: "conv_" + runID, ParentRunId: parent}, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func thought(s string) *baagentv1.Event {
	return &baagentv1.Event{Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: s}}}
}

func delta(s string) *baagentv1.Event {
	return &baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: s}}}
}

func emit(ctx context.Context, t *testing.T, p *publish.Publisher, evs ...*baagentv1.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := p.Emit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// stored returns the run's stored events with their HeaderMirrorOf.
func stored(ctx context.Context, t *testing.T, js jetstream.JetStream, runID string) ([]*baagentv1.Event, []string) {
	t.Helper()
	subject, _ := natsx.EventSubject(tenant, runID)
	stream, err := js.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*baagentv1.Event
	var of []string
	if err := publish.Walk(ctx, stream, subject, 0, func(m *jetstream.RawStreamMsg) bool {
		ev := &baagentv1.Event{}
		if err := proto.Unmarshal(m.Data, ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		of = append(of, m.Header.Get(HeaderMirrorOf))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return evs, of
}

// checkContiguous asserts seqs 1..n on the parent's envelope.
func checkContiguous(t *testing.T, evs []*baagentv1.Event, parent string) {
	t.Helper()
	for i, e := range evs {
		if e.GetSeq() != uint64(i+1) || e.GetCursor() != strconv.Itoa(i+1) || e.GetRunId() != parent || e.GetConversationId() != "conv_"+parent {
			t.Fatalf("event %d: seq %d cursor %q run %s conv %s", i, e.GetSeq(), e.GetCursor(), e.GetRunId(), e.GetConversationId())
		}
	}
}

func start(ctx context.Context, t *testing.T, js jetstream.JetStream, parent, child string, resumed bool) *Mirror {
	t.Helper()
	m, err := Start(ctx, Config{JetStream: js, Tenant: tenant, Parent: parent, Child: child, Resumed: resumed, Since: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func TestMirrorCopiesAllButDeltasInOrder(t *testing.T) {
	t.Parallel()
	ctx, js := setup(t)
	parent, child := publisher(t, js, "run_p", ""), publisher(t, js, "run_c", "run_p")
	emit(ctx, t, parent, thought("parent starts"))
	if err := parent.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	emit(ctx, t, child, thought("one"), delta("x"), thought("two"),
		&baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "done"}}})
	m := start(ctx, t, js, "run_p", "run_c", false)
	if err := m.Wait(ctx, 4); err != nil {
		t.Fatal(err)
	}
	emit(ctx, t, parent, thought("parent goes on"))
	evs, of := stored(ctx, t, js, "run_p")
	checkContiguous(t, evs, "run_p")
	want := []string{"parent starts", "one", "two", "", "parent goes on"}
	wantOf := []string{"", "run_c:1", "run_c:3", "run_c:4", ""}
	if len(evs) != len(want) {
		t.Fatalf("%d events: %v", len(evs), evs)
	}
	for i, e := range evs {
		if e.GetThought().GetThought() != want[i] || of[i] != wantOf[i] || (of[i] != "") != (e.GetSubagentRunId() == "run_c") {
			t.Errorf("event %d = %v (mirror of %q)", i, e, of[i])
		}
	}
	if end := evs[3]; end.GetComplete().GetContent() != "done" || runevent.IsTerminal(end) || end.GetParentRunId() != "" {
		t.Errorf("mirrored complete %v", end)
	}
}

// The parent (fenced) and two children append to the parent's stream at
// once: the seqs stay contiguous, every event is there once, each writer's
// in its own order.
func TestMirrorAndFencedParentShareTheStream(t *testing.T) {
	t.Parallel()
	ctx, js := setup(t)
	parent := publisher(t, js, "run_p", "")
	emit(ctx, t, parent, thought("p-start"))
	if err := parent.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 40
	children := []string{"run_a", "run_b"}
	var wg sync.WaitGroup
	for _, c := range children {
		m := start(ctx, t, js, "run_p", c, false)
		pub := publisher(t, js, c, "run_p")
		wg.Go(func() {
			for i := range n {
				emit(ctx, t, pub, thought(c+"-"+strconv.Itoa(i)))
			}
			if err := m.Wait(ctx, n); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Go(func() {
		for i := range n {
			if err := parent.Emit(ctx, thought("p-"+strconv.Itoa(i))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	evs, _ := stored(ctx, t, js, "run_p")
	checkContiguous(t, evs, "run_p")
	if len(evs) != 1+3*n {
		t.Fatalf("%d events, want %d", len(evs), 1+3*n)
	}
	next := map[string]int{}
	for _, e := range evs[1:] {
		text := e.GetThought().GetThought()
		who := text[:strings.LastIndexByte(text, '-')]
		if text != who+"-"+strconv.Itoa(next[who]) {
			t.Fatalf("%q out of order (want %s-%d)", text, who, next[who])
		}
		next[who]++
		if e.GetSubagentRunId() != map[string]string{"p": "", "run_a": "run_a", "run_b": "run_b"}[who] {
			t.Errorf("%q tagged %q", text, e.GetSubagentRunId())
		}
	}
	lastOwn := 0
	for i, e := range evs {
		if e.GetSubagentRunId() == "" {
			lastOwn = i + 1
		}
	}
	if seq := parent.LastSeq(); seq != uint64(lastOwn) {
		t.Errorf("parent publisher at %d, its last event is %d", seq, lastOwn)
	}
}

// A resumed child's mirror finds how far the previous one got and copies
// only what follows.
func TestResumedMirrorContinuesAfterTheCopies(t *testing.T) {
	t.Parallel()
	ctx, js := setup(t)
	parent, child := publisher(t, js, "run_p", ""), publisher(t, js, "run_c", "run_p")
	emit(ctx, t, parent, thought("p"))
	emit(ctx, t, child, thought("one"), thought("two"), delta("d"))
	first := start(ctx, t, js, "run_p", "run_c", false)
	if err := first.Wait(ctx, 3); err != nil {
		t.Fatal(err)
	}
	first.Stop()
	again := start(ctx, t, js, "run_p", "run_c", true)
	if got := again.Done(); got != 2 { // the last copy; the delta after it is handled again
		t.Fatalf("resumed mirror starts after %d, want 2", got)
	}
	emit(ctx, t, child, thought("three"))
	if err := again.Wait(ctx, 4); err != nil {
		t.Fatal(err)
	}
	evs, of := stored(ctx, t, js, "run_p")
	checkContiguous(t, evs, "run_p")
	if got := strings.Join(of, ","); got != ",run_c:1,run_c:2,run_c:4" {
		t.Errorf("copies %s", got)
	}
}

// Nothing is appended after the parent's terminal event.
func TestMirrorStopsAtTheParentsEnd(t *testing.T) {
	t.Parallel()
	ctx, js := setup(t)
	parent, child := publisher(t, js, "run_p", ""), publisher(t, js, "run_c", "run_p")
	emit(ctx, t, parent, thought("p"), &baagentv1.Event{Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: "no"}}})
	emit(ctx, t, child, thought("late"))
	m := start(ctx, t, js, "run_p", "run_c", false)
	if err := m.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if evs, _ := stored(ctx, t, js, "run_p"); len(evs) != 2 || evs[1].GetCancelled() == nil {
		t.Errorf("parent events %v", evs)
	}
}

func TestParseMirrorOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		child string
		seq   uint64
		ok    bool
	}{
		"run_c:7": {"run_c", 7, true}, "a:b:3": {"a:b", 3, true},
		"": {}, "run_c": {}, ":3": {}, "run_c:": {}, "run_c:-1": {}, "run_c:x": {},
	} {
		c, s, ok := ParseMirrorOf(in)
		if c != want.child || s != want.seq || ok != want.ok {
			t.Errorf("ParseMirrorOf(%q) = %q, %d, %v", in, c, s, ok)
		}
	}
}

func FuzzParseMirrorOf(f *testing.F) {
	for _, s := range []string{"run_c:7", "", ":", "a:b:3", "x:18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		child, seq, ok := ParseMirrorOf(s)
		if !ok {
			return
		}
		if child == "" || child+":"+strconv.FormatUint(seq, 10) != s && !strings.HasPrefix(s, child+":") {
			t.Fatalf("ParseMirrorOf(%q) = %q, %d", s, child, seq)
		}
		if c2, s2, ok2 := ParseMirrorOf(child + ":" + strconv.FormatUint(seq, 10)); !ok2 || c2 != child || s2 != seq {
			t.Fatalf("round trip of %q: %q, %d, %v", s, c2, s2, ok2)
		}
	})
}
