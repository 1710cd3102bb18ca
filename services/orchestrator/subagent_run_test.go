package orchestrator

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// The sub-agent tests drive a parent and its data-analyst child (from
// examples/agents) with one scripted model that tells them apart by the
// child's system prompt.

const delegateArgs = `{"subagent_type":"data-analyst","description":"revenue by category","prompt":"Which product category had the highest revenue?"}`

// isChildRequest reports whether req is the data-analyst sub-agent's.
func isChildRequest(req ModelRequest) bool {
	for _, m := range req.Messages {
		if m.GetRole() == baagentv1.Role_ROLE_SYSTEM && strings.Contains(m.GetContent(), `You are the sub-agent "data-analyst"`) {
			return true
		}
	}
	return false
}

// delegating: the parent delegates once and answers with the report; the
// child runs one query and reports it.
func delegating(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	res, done := lastToolResult(req)
	if isChildRequest(req) {
		if done {
			return answer("Report: " + res), nil
		}
		return callTools("Query the data.", "c_sql", "sql_query", `{"query":"SELECT category, revenue FROM t"}`), nil
	}
	if done {
		return answer("Parent answer. " + res), nil
	}
	return callTools("Delegate to the analyst.", "call_task", TaskToolName, delegateArgs), nil
}

func subAgentHarness(t *testing.T, turns turnFunc, mutate func(*Options)) *harness {
	return newHarness(t, turns, harnessOptions{mutate: func(o *Options) {
		o.SubAgentsDir = "../../examples/agents"
		if mutate != nil {
			mutate(o)
		}
	}})
}

// children lists the runs started with parent as their parent.
func (h *harness) children(ctx context.Context, parent string) []*baagentv1.Run {
	h.t.Helper()
	resp, err := h.client.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: testTenant, PageSize: MaxPageSize})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*baagentv1.Run
	for _, r := range resp.GetRuns() {
		if r.GetParentRunId() == parent {
			out = append(out, r)
		}
	}
	return out
}

// waitChild polls until parent has a child and returns it.
func (h *harness) waitChild(ctx context.Context, parent string) *baagentv1.Run {
	h.t.Helper()
	var c []*baagentv1.Run
	testkit.Eventually(h.t, remaining(ctx), "run "+parent+" started a sub-agent", func() bool {
		c = h.children(ctx, parent)
		return len(c) > 0
	})
	return c[0]
}

// waitSubAgentWait polls the run's checkpoint until it waits for a
// sub-agent under a wait id other than not, and returns the checkpoint and
// its revision.
func (h *harness) waitSubAgentWait(ctx context.Context, runID, not string) (*checkpoint.State, uint64) {
	h.t.Helper()
	cps, err := h.srv.checkpoints(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var cp *checkpoint.State
	var rev uint64
	testkit.Eventually(h.t, remaining(ctx), "run "+runID+" waits for its sub-agent", func() bool {
		var err error
		cp, rev, err = cps.Load(ctx, testTenant, runID)
		return err == nil && cp != nil && cp.Wait != nil && cp.Wait.Kind == hitl.KindSubAgent && cp.Wait.ID != not
	})
	return cp, rev
}

// waitReleased waits until no execution of the run is in progress on the
// harness's replica (a waiting run holds no goroutine).
func (h *harness) waitReleased(ctx context.Context, runID string) {
	h.t.Helper()
	for r := h.srv.local(runID); r != nil; r = h.srv.local(runID) {
		select {
		case <-r.done:
		case <-ctx.Done():
			h.t.Fatalf("run %s is still executing: %v", runID, ctx.Err())
		}
	}
}

func (h *harness) blockTools() (release func()) {
	block := make(chan struct{})
	h.tools.mu.Lock()
	h.tools.block = block
	h.tools.mu.Unlock()
	var once bool
	release = func() {
		if !once {
			once = true
			close(block)
		}
	}
	h.t.Cleanup(release)
	return release
}

// delegated starts a parent run with input, waits for all its events
// (which must form a well-enveloped stream) and returns them with the
// parent's children, of which there must be want.
func (h *harness) delegated(ctx context.Context, input string, want int) (parent *baagentv1.Run, evs []*baagentv1.Event, kids []*baagentv1.Run) {
	h.t.Helper()
	parent = h.start(ctx, &baagentv1.RunSpec{Input: input})
	evs = h.events(ctx, parent.GetRunId())
	checkEnvelope(h.t, parent, evs) // contiguous seqs, the parent's ids, one terminal, last
	kids = h.children(ctx, parent.GetRunId())
	if len(kids) != want {
		h.t.Fatalf("%d children", len(kids))
	}
	return parent, evs, kids
}

// assignments returns the run's own subagent_assigned events.
func assignments(evs []*baagentv1.Event) []*baagentv1.SubagentAssignedPayload {
	var out []*baagentv1.SubagentAssignedPayload
	for _, e := range evs {
		if a := e.GetSubagentAssigned(); a != nil && e.GetSubagentRunId() == "" {
			out = append(out, a)
		}
	}
	return out
}

func TestSubAgentReportIsTheTaskResult(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, delegating, nil)
	parent, evs, kids := h.delegated(ctx, "which category sells best?", 1)
	child := h.waitRun(ctx, kids[0].GetRunId())
	if child.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || child.GetMaxSteps() != 8 ||
		child.GetLabels()[labelSubAgent] != "data-analyst" || child.GetLabels()[labelSubAgentDepth] != "1" ||
		child.GetLabels()[labelWorkspace] != parent.GetConversationId() || child.GetConversationId() == parent.GetConversationId() {
		t.Errorf("child record %v", child)
	}
	if a := assignments(evs); len(a) != 1 || a[0].GetChildRunId() != child.GetRunId() || a[0].GetSubagentType() != "data-analyst" ||
		a[0].GetDescription() != "revenue by category" || a[0].GetPrompt() != "Which product category had the highest revenue?" ||
		a[0].GetToolCallId() != "call_task" || a[0].GetDepth() != 1 || a[0].GetMaxSteps() != 8 || a[0].GetModel() != child.GetModel() ||
		!slices.Equal(a[0].GetAllowedTools(), []string{"sql_query", "file_read"}) {
		t.Errorf("subagent_assigned events %v", a)
	}
	var obs *baagentv1.ObservePayload
	for _, e := range evs {
		if o := e.GetObserve(); o.GetToolName() == TaskToolName {
			obs = o
		}
	}
	if !obs.GetSuccess() || !contains(obs.GetObservation(), "Sub-agent data-analyst", child.GetRunId(), "Report: Found 2 rows", "Electronics,125000") {
		t.Errorf("task observation %v", obs)
	}
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, "Parent answer.", "Report: Found 2 rows") {
		t.Errorf("final answer %q", c)
	}

	cevs := h.events(ctx, child.GetRunId())
	checkEnvelope(t, child, cevs)
	for i, e := range cevs {
		if e.GetParentRunId() != parent.GetRunId() {
			t.Fatalf("child event %d has parent_run_id %q", i, e.GetParentRunId())
		}
	}
	// The child is offered only its definition's tools (no task, skill or
	// ask tools) and its tools work on the parent's workspace.
	for _, req := range h.model.requests() {
		if !isChildRequest(req) {
			if !slices.Contains(toolNames(req), TaskToolName) {
				t.Errorf("the parent is not offered the task tool: %v", toolNames(req))
			}
			continue
		}
		if got := toolNames(req); !slices.Equal(got, []string{"file_read", "sql_query"}) {
			t.Errorf("child tools %v", got)
		}
	}
	for _, inv := range h.tools.invocations() {
		if inv.GetRunId() == child.GetRunId() && inv.GetConversationId() != parent.GetConversationId() {
			t.Errorf("child tool call in conversation %s, want the parent's %s", inv.GetConversationId(), parent.GetConversationId())
		}
	}
}

func TestTaskCallErrorsAreObservations(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if res, ok := lastToolResult(req); ok {
			return answer(res), nil
		}
		return callTools("", "call_task", TaskToolName, `{"subagent_type":"astrologer","prompt":"read the stars"}`), nil
	}, nil)
	run := h.start(ctx, &baagentv1.RunSpec{Input: "delegate badly"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, codeSubAgentUnknown, `no sub-agent "astrologer"`, "data-analyst") {
		t.Errorf("final %q", c)
	}
	if n := len(h.children(ctx, run.GetRunId())); n != 0 {
		t.Errorf("%d children", n)
	}
}

func TestCancelParentCancelsSubAgent(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, delegating, nil)
	release := h.blockTools() // the child's query hangs
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "which category sells best?"})
	h.waitSubAgentWait(ctx, parent.GetRunId(), "")
	child := h.waitChild(ctx, parent.GetRunId())
	// The waiting parent stays RUNNING (nobody is asked anything) and
	// holds no goroutine. Its execution lets go of it only after storing
	// the wait, so wait for that: a CancelRun reaching the execution as
	// it pauses is not what this test is about.
	h.waitReleased(ctx, parent.GetRunId())
	if got := h.waitState(ctx, parent.GetRunId(), baagentv1.RunState_RUN_STATE_RUNNING); got.GetPendingInput() != nil {
		t.Errorf("parent %v", got)
	}
	resp, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: parent.GetRunId(), Reason: "changed my mind"})
	if err != nil || resp.GetRun().GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("CancelRun = %v, %v", resp.GetRun(), err)
	}
	ended := h.waitRun(ctx, child.GetRunId())
	if ended.GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("child %v", ended)
	}
	cevs := h.events(ctx, child.GetRunId())
	checkEnvelope(t, child, cevs)
	if r := cevs[len(cevs)-1].GetCancelled().GetReason(); !strings.Contains(r, parent.GetRunId()) {
		t.Errorf("child cancelled with %q", r)
	}
	pevs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, pevs)
	if pevs[len(pevs)-1].GetCancelled().GetReason() != "changed my mind" {
		t.Errorf("parent events %v", types(pevs))
	}
	release()
}

func TestResumedParentReattachesToItsSubAgent(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, delegating, nil)
	release := h.blockTools()
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "which category sells best?"})
	cp, rev := h.waitSubAgentWait(ctx, parent.GetRunId(), "")
	first := h.waitChild(ctx, parent.GetRunId())
	if cp.Wait.Child != first.GetRunId() {
		t.Fatalf("waits for %s, child is %s", cp.Wait.Child, first.GetRunId())
	}

	// A replica that died after starting the child but before storing the
	// wait: the checkpoint is the step's LLM_COMPLETE, and the run is
	// delivered again.
	old := *cp.Wait
	crashed := *cp
	crashed.Kind, crashed.Wait = checkpoint.KindLLMComplete, nil
	cps, err := h.srv.checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cps.Write(ctx, testTenant, parent.GetRunId(), &crashed, rev); err != nil {
		t.Fatal(err)
	}
	old.ID = "simulated-crash"
	if err := h.srv.wake(ctx, &baagentv1.Run{Tenant: testTenant, RunId: parent.GetRunId()}, &old); err != nil {
		t.Fatal(err)
	}
	again, _ := h.waitSubAgentWait(ctx, parent.GetRunId(), cp.Wait.ID)
	if again.Wait.Child != first.GetRunId() {
		t.Fatalf("the resumed parent waits for %s, not its child %s", again.Wait.Child, first.GetRunId())
	}
	release()

	evs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, evs)
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, "Report: Found 2 rows") {
		t.Errorf("final %q", c)
	}
	if kids := h.children(ctx, parent.GetRunId()); len(kids) != 1 || kids[0].GetRunId() != first.GetRunId() {
		t.Errorf("children %v", kids)
	}
	if a := assignments(evs); len(a) != 1 {
		t.Errorf("started %d times: %v", len(a), a)
	}
	// The child's events are in the resumed parent's stream once each.
	h.waitRun(ctx, first.GetRunId())
	checkMirrored(t, evs, h.events(ctx, first.GetRunId()), first.GetRunId())
	starts := 0
	for _, req := range h.model.requests() {
		if isChildRequest(req) && !slices.ContainsFunc(req.Messages, func(m *baagentv1.ChatMessage) bool { return m.GetRole() == baagentv1.Role_ROLE_ASSISTANT }) {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("the child's first step ran %d times", starts)
	}
}

// parallelTasks: the parent delegates two tasks in one step; each child
// reports on its prompt.
func parallelTasks(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	if isChildRequest(req) {
		for _, m := range req.Messages {
			if m.GetRole() == baagentv1.Role_ROLE_USER {
				return answer("Report on " + m.GetContent()), nil
			}
		}
	}
	if res := lastToolResults(req); len(res) > 0 {
		var b strings.Builder
		for _, m := range res {
			b.WriteString(m.GetContent() + "\n")
		}
		return answer(b.String()), nil
	}
	return callTools("Two independent questions.",
		"call_a", TaskToolName, `{"subagent_type":"data-analyst","prompt":"North revenue"}`,
		"call_b", TaskToolName, `{"subagent_type":"data-analyst","prompt":"South revenue"}`), nil
}

func TestParallelSubAgents(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, parallelTasks, nil)
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "compare north and south"})
	evs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, evs)
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, "Report on North revenue", "Report on South revenue") {
		t.Errorf("final %q", c)
	}
	if kids := h.children(ctx, parent.GetRunId()); len(kids) != 2 {
		t.Errorf("%d children", len(kids))
	}
	if a := assignments(evs); len(a) != 2 {
		t.Errorf("subagent_assigned events %v", a)
	}
}

func TestSubAgentTimeoutCancelsTheChild(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, delegating, func(o *Options) { o.SubAgentTimeout = time.Second })
	h.blockTools()
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "which category sells best?"})
	evs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, evs)
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, codeSubAgentTimeout, "did not finish within 1s and was cancelled") {
		t.Errorf("final %q", c)
	}
	child := h.waitRun(ctx, h.waitChild(ctx, parent.GetRunId()).GetRunId())
	if child.GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Errorf("child %v", child)
	}
}

// holdingContext is the fake context service whose history append of a
// run's task result is slow: held until that result is durable in the
// run's checkpoint, or until the run's execution stops (the request is
// cancelled). It forces the interleaving in which an execution that has
// just settled a task call may lose its run before the result enters the
// history, as a loaded machine may; the result must still be the one the
// first execution decided.
type holdingContext struct {
	*fakeContext
	srv  atomic.Pointer[Server]
	held atomic.Int32
}

func (f *holdingContext) Append(ctx context.Context, req *baagentv1.AppendRequest) (*baagentv1.AppendResponse, error) {
	for _, m := range req.GetMessages() {
		if m.GetRole() != baagentv1.Role_ROLE_TOOL || m.GetToolCallId() != "call_task" {
			continue
		}
		runID, _, _ := strings.Cut(m.GetId(), ":") // "<run>:s<step>:tool:<i>"
		f.held.Add(1)
		if err := f.awaitDurable(ctx, req.GetTenant(), runID); err != nil {
			return nil, err
		}
	}
	return f.fakeContext.Append(ctx, req)
}

// awaitDurable waits until the run's checkpoint holds the task call's
// result.
func (f *holdingContext) awaitDurable(ctx context.Context, tenant, runID string) error {
	cps, err := f.srv.Load().checkpoints(ctx)
	if err != nil {
		return err
	}
	for {
		cp, _, err := cps.Load(ctx, tenant, runID)
		if err == nil && cp != nil && slices.ContainsFunc(cp.Tools, func(t checkpoint.ToolRecord) bool { return t.CallID == "call_task" && t.Finished() }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// The parent's timeout cancels the child, whose end (CANCELLED) must not
// be taken for the cause. It used to answer the parent's still-open wait,
// taking the run over from the execution settling the timeout; whether
// that execution's SUBAGENT_TIMEOUT reached the history before it stopped
// decided the result, and the resumed execution reported
// SUBAGENT_CANCELLED. The held append makes that execution stop first
// whenever it loses the run, so the old race fails here every time.
func TestSubAgentTimeoutWinsOverTheCancelledChildsEnd(t *testing.T) {
	ctx := testCtx(t)
	fc := &holdingContext{fakeContext: newFakeContext()}
	h := newHarness(t, delegating, harnessOptions{context: fc, mutate: func(o *Options) {
		o.SubAgentsDir = "../../examples/agents"
		o.SubAgentTimeout = time.Second
	}})
	fc.srv.Store(h.srv)
	h.blockTools() // the child's query hangs until it is cancelled
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "which category sells best?"})
	evs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, evs)
	if fc.held.Load() == 0 {
		t.Fatal("the task result's append was never held: the test no longer forces the interleaving")
	}
	var obs []string
	for _, e := range evs {
		if o := e.GetObserve(); o.GetToolName() == TaskToolName {
			obs = append(obs, o.GetObservation())
		}
	}
	if len(obs) != 1 || !strings.Contains(obs[0], codeSubAgentTimeout) {
		t.Errorf("task observations %q, want one %s", obs, codeSubAgentTimeout)
	}
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, codeSubAgentTimeout, "did not finish within 1s and was cancelled") || strings.Contains(c, codeSubAgentCancelled) {
		t.Errorf("final %q", c)
	}
	child := h.waitRun(ctx, h.waitChild(ctx, parent.GetRunId()).GetRunId())
	if child.GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Errorf("child %v", child)
	}
}

func TestSubAgentRefusedByTheTenantLimit(t *testing.T) {
	ctx := testCtx(t)
	// The parent is the tenant's one run: its child is refused, and the
	// model is told so (the parent does not fail).
	h := subAgentHarness(t, delegating, func(o *Options) { o.MaxRunsPerTenant = 1 })
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "which category sells best?"})
	evs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, evs)
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, codeSubAgentRefused, "could not start", "limit is 1") {
		t.Errorf("final %q", c)
	}
	if n := len(h.children(ctx, parent.GetRunId())); n != 0 {
		t.Errorf("%d children", n)
	}
}
