package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// forgetfulContext is a context service that knows a tools fingerprint
// only once the schemas were sent with it, and forgets every fingerprint
// when told to (a restart).
type forgetfulContext struct {
	*fakeContext
	mu        sync.Mutex
	known     map[string]bool
	withTools int
	byPrint   int
	refused   int
}

func (f *forgetfulContext) BuildWindow(ctx context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	f.mu.Lock()
	fp := req.GetToolsFingerprint()
	switch {
	case len(req.GetTools()) > 0:
		f.withTools++
		if fp != "" {
			f.known[fp] = true
		}
	case fp != "" && !f.known[fp]:
		f.refused++
		f.mu.Unlock()
		st, _ := status.New(codes.FailedPrecondition, "unknown tools fingerprint").
			WithDetails(&errdetails.ErrorInfo{Reason: reasonToolsFingerprintUnknown, Domain: "baagent.context"})
		return nil, st.Err()
	default:
		f.byPrint++
	}
	f.mu.Unlock()
	return f.fakeContext.BuildWindow(ctx, req)
}

func (f *forgetfulContext) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known = map[string]bool{}
}

func (f *forgetfulContext) counts() (withTools, byPrint, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.withTools, f.byPrint, f.refused
}

// The tool schemas go to the context service once per run; later steps
// name them by fingerprint, and a service that forgot it gets them again.
func TestToolSchemasSentOncePerRun(t *testing.T) {
	ctx := testCtx(t)
	fc := &forgetfulContext{fakeContext: newFakeContext(), known: map[string]bool{}}
	var forgetAt int
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		n := 0 // the run's model calls so far
		for _, m := range req.Messages {
			n += len(m.GetToolCalls())
		}
		if n == forgetAt {
			fc.forget()
		}
		if n < 4 {
			return callTools("", fmt.Sprintf("call_%d", n), "noop", fmt.Sprintf(`{"i":%d}`, n)), nil
		}
		return answer("done"), nil
	}, harnessOptions{context: fc})

	forgetAt = -1
	run := h.start(ctx, &baagentv1.RunSpec{Input: "five steps"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v", types(evs))
	}
	if with, by, refused := fc.counts(); with != 1 || by != 4 || refused != 0 {
		t.Fatalf("BuildWindow with tools %d, by fingerprint %d, refused %d; want 1, 4, 0", with, by, refused)
	}

	// The service forgets the fingerprint mid-run (after the model's
	// second answer): the next step is refused once and sends them again.
	fc.mu.Lock()
	fc.withTools, fc.byPrint = 0, 0
	fc.mu.Unlock()
	forgetAt = 1
	run = h.start(ctx, &baagentv1.RunSpec{Input: "five steps again"})
	evs = h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v", types(evs))
	}
	if with, by, refused := fc.counts(); with != 2 || by != 3 || refused != 1 {
		t.Fatalf("after forgetting: with tools %d, by fingerprint %d, refused %d; want 2, 3, 1", with, by, refused)
	}
}
