package orchestrator

import (
	"context"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// invocationsOf counts the Invoke requests of one tool call.
func invocationsOf(f *fakeToolRunner, callID string) int {
	n := 0
	for _, r := range f.invocations() {
		if r.GetToolCallId() == callID {
			n++
		}
	}
	return n
}

// A read-only call whose toolrunner went away is sent again, and the run
// goes on as if nothing happened.
func TestReadOnlyCallRetriedWhenToolRunnerLost(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return callTools("", "call_q", "sql_query", `{"query":"SELECT 1"}`), nil
		}
		if res := lastToolResults(req); len(res) != 1 || res[0].GetIsError() {
			t.Errorf("the model saw %v, want one successful result", res)
		}
		return answer("Electronics."), nil
	}, harnessOptions{})
	h.tools.mu.Lock()
	h.tools.unavailable = toolRunnerAttempts - 1
	h.tools.mu.Unlock()

	run := h.start(ctx, &baagentv1.RunSpec{Input: "revenue?"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if got := evs[len(evs)-1].GetComplete().GetContent(); got != "Electronics." {
		t.Fatalf("events %v, answer %q", types(evs), got)
	}
	if n := invocationsOf(h.tools, "call_q"); n != toolRunnerAttempts {
		t.Fatalf("the read-only call was sent %d times, want %d", n, toolRunnerAttempts)
	}
}

// A read-only call whose toolrunner stays away ends the run with a clear
// error after the bounded retries.
func TestReadOnlyCallGivesUpWhenToolRunnerStaysAway(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return callTools("", "call_q", "sql_query", `{"query":"SELECT 1"}`), nil
		}
		return answer("unexpected"), nil
	}, harnessOptions{})
	h.tools.mu.Lock()
	h.tools.unavailable = 100
	h.tools.mu.Unlock()

	run := h.start(ctx, &baagentv1.RunSpec{Input: "revenue?"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	last := evs[len(evs)-1].GetError()
	if last.GetCode() != CodePeerUnavailable || !contains(last.GetMessage(), "toolrunner", "Invoke") {
		t.Fatalf("terminal %v, want %s naming the toolrunner", evs[len(evs)-1], CodePeerUnavailable)
	}
	if n := invocationsOf(h.tools, "call_q"); n != toolRunnerAttempts {
		t.Fatalf("the call was sent %d times, want %d", n, toolRunnerAttempts)
	}
}

// A call with side effects is sent again with its idempotency key (the
// toolrunner's records make that safe) and the run goes on.
func TestWriteCallResentWithItsKeyWhenToolRunnerLost(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return callTools("", "call_w", "always_fails", `{"path":"reports/x.md"}`), nil // not read-only
		}
		if res := lastToolResults(req); len(res) != 1 || contains(res[0].GetContent(), codeToolRunnerLost) {
			t.Errorf("the model saw %v, want the toolrunner's own answer", res)
		}
		return answer("Done."), nil
	}, harnessOptions{})
	h.tools.mu.Lock()
	h.tools.unavailable = toolRunnerAttempts - 1
	h.tools.mu.Unlock()

	run := h.start(ctx, &baagentv1.RunSpec{Input: "write the report"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if got := evs[len(evs)-1].GetComplete().GetContent(); got != "Done." {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	var keys []string
	for _, r := range h.tools.invocations() {
		if r.GetToolCallId() == "call_w" {
			keys = append(keys, r.GetIdempotencyKey())
		}
	}
	if len(keys) != toolRunnerAttempts || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("the write was sent with keys %q, want %d sends with one key", keys, toolRunnerAttempts)
	}
}

// A call with side effects whose toolrunner stays away: the model is told
// its outcome is unknown, and the run goes on.
func TestWriteCallOutcomeUnknownWhenToolRunnerStaysAway(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return callTools("", "call_w", "always_fails", `{"path":"reports/x.md"}`), nil // not read-only
		}
		res := lastToolResults(req)
		if len(res) != 1 || !res[0].GetIsError() || !contains(res[0].GetContent(), codeToolRunnerLost, "not known whether", "Check its effect") {
			t.Errorf("the model saw %v, want the lost-write observation", res)
		}
		return answer("I will check the file first."), nil
	}, harnessOptions{})
	h.tools.mu.Lock()
	h.tools.unavailable = 100
	h.tools.mu.Unlock()

	run := h.start(ctx, &baagentv1.RunSpec{Input: "write the report"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if got := evs[len(evs)-1].GetComplete().GetContent(); got != "I will check the file first." {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	if n := invocationsOf(h.tools, "call_w"); n != toolRunnerAttempts {
		t.Fatalf("the write was sent %d times, want %d", n, toolRunnerAttempts)
	}
}
