package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/allowlist"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
	"github.com/baagent/baagent/services/orchestrator/internal/subagent"
)

// cpWaitingSubAgent is the checkpoint of a run that waits for its
// sub-agent.
const cpWaitingSubAgent = "WAITING_SUBAGENT"

// The `task` tool delegates to a sub-agent. Each call starts a child run —
// a real run, queued and executed by any replica like every other, its
// record and events carrying parent_run_id — and the call's observation is
// the child's final answer (its report), or an error observation when the
// child fails, is cancelled or outlives Options.SubAgentTimeout.
//
// Durability. The child's run id derives from the parent's run id and the
// model's tool_call_id (and the call's recorded start time, so ids still
// sort by time), so a parent resumed anywhere finds the child it started
// instead of starting another. While the child works the parent waits like
// a run waiting for input — its checkpoint holds the wait, no goroutine
// holds it, its work item comes back at the deadline — but stays RUNNING
// (nobody is asked anything). When the child ends, the replica ending it
// stores the child's state as the wait's answer and requeues the parent at
// once (as SubmitInput does); the parent reads the child's record and
// goes on.
//
// Limits. A child is a run of the same tenant: it counts against the
// tenant's run limit (and the queue's) and a start refused by them is an
// error observation the model can act on, not a failure of the parent.
// Sub-agents delegate further only when their definition lists `task` and
// the depth stays below Options.SubAgentMaxDepth (default 1: never).
//
// Cancellation. CancelRun of a parent cancels the children of its current
// step (CancelRun below), and a child that finds its parent ended when it
// starts executing cancels itself (checkParent), which covers a child
// started while its parent was being cancelled.

// TaskToolName is the built-in tool that delegates to a sub-agent.
const TaskToolName = "task"

// Labels of a child run: which sub-agent it is, its depth, and the
// conversation whose workspace its tools use. The child keeps its own
// conversation (its own history and context window); its tools work on the
// delegating conversation's files and artifacts, so its report can name
// artifacts the parent reads.
const (
	labelSubAgent      = "baagent.subagent"
	labelSubAgentDepth = "baagent.subagent.depth"
	labelWorkspace     = "baagent.workspace"
)

// Error codes of task observations.
const (
	codeSubAgentUnknown   = "UNKNOWN_SUBAGENT"
	codeSubAgentRefused   = "SUBAGENT_NOT_STARTED"
	codeSubAgentFailed    = "SUBAGENT_FAILED"
	codeSubAgentCancelled = "SUBAGENT_CANCELLED"
	codeSubAgentTimeout   = "SUBAGENT_TIMEOUT"
	codeSkillNotAllowed   = "SKILL_NOT_ALLOWED"
)

// maxReportBytes bounds the report a task observation carries (the
// toolrunner's output limit); the full report stays the child's answer.
const maxReportBytes = 50 << 10

// taskToolSchema describes the tool and lists the sub-agents.
func taskToolSchema(agents []*SubAgent) *baagentv1.ToolSchema {
	names := make([]any, len(agents))
	var list strings.Builder
	for i, a := range agents {
		names[i] = a.Name
		fmt.Fprintf(&list, "\n- %s: %s", a.Name, a.Description)
	}
	params, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"subagent_type": map[string]any{"type": "string", "enum": names, "description": "The sub-agent to delegate to."},
			"description":   map[string]any{"type": "string", "description": "A short (3-5 word) description of the task."},
			"prompt":        map[string]any{"type": "string", "description": "The task, complete and self-contained: the sub-agent sees nothing else of this conversation."},
		},
		"required":             []any{"subagent_type", "prompt"},
		"additionalProperties": false,
	})
	return &baagentv1.ToolSchema{
		Name: TaskToolName,
		Description: "Delegate a self-contained task to a specialised sub-agent. It works with its own tools and context " +
			"and returns a report, which is this tool's result. Independent tasks may be delegated in parallel " +
			"(several task calls in one step). Sub-agents:" + list.String(),
		Parameters: params,
	}
}

type taskArgs struct {
	SubagentType string `json:"subagent_type"`
	Description  string `json:"description"`
	Prompt       string `json:"prompt"`
}

// parseTaskArgs validates a task call's arguments.
func parseTaskArgs(raw string, agents *subagent.Set) (*SubAgent, taskArgs, error) {
	var a taskArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return nil, a, fmt.Errorf("arguments are not a JSON object of the tool's schema: %v", err)
	}
	a.SubagentType, a.Description, a.Prompt = strings.TrimSpace(a.SubagentType), strings.TrimSpace(a.Description), strings.TrimSpace(a.Prompt)
	if a.Prompt == "" {
		return nil, a, errors.New("prompt is required: the complete task for the sub-agent")
	}
	if len(a.Prompt) > maxInputBytes || !utf8.ValidString(a.Prompt) {
		return nil, a, fmt.Errorf("prompt must be valid UTF-8 of at most %d bytes", maxInputBytes)
	}
	if len(a.Description) > hitl.MaxQuestionText {
		a.Description = truncateUTF8(a.Description, hitl.MaxQuestionText)
	}
	def := agents.Get(a.SubagentType)
	if def == nil {
		return nil, a, fmt.Errorf("there is no sub-agent %q; choose one of: %s", a.SubagentType, strings.Join(agents.Names(), ", "))
	}
	return def, a, nil
}

// maxInputBytes is a run input's limit (validate.RunSpec).
const maxInputBytes = 1 << 20

// depth is how deep the run is in a delegation (0: not a sub-agent).
func (r *run) depth() int {
	if r.rec.GetParentRunId() == "" {
		return 0
	}
	d, err := strconv.Atoi(r.rec.GetLabels()[labelSubAgentDepth])
	if err != nil || d < 1 {
		return 1
	}
	return d
}

// subAgent returns the definition a child run was started from; nil for a
// run that is not a sub-agent, or whose definition is no longer loaded.
func (r *run) subAgent() (def *SubAgent, isChild bool) {
	if r.rec.GetParentRunId() == "" {
		return nil, false
	}
	name, ok := r.rec.GetLabels()[labelSubAgent]
	if !ok {
		return nil, false // a run started with a parent_run_id by a client
	}
	return r.s.agents.Get(name), true
}

// offersTask reports whether the run is offered the task tool.
func (r *run) offersTask(lists []*baagentv1.ToolAllowList) bool {
	return len(r.s.agents.All()) > 0 && r.depth() < r.s.opts.SubAgentMaxDepth && allowlist.AllowsAll(lists, TaskToolName)
}

// offersSkills reports whether a run whose tenant has skills is offered
// the skill meta-tool: a sub-agent only when its definition allows skills.
func (r *run) offersSkills() bool {
	def, child := r.subAgent()
	return !child || (def != nil && len(def.AllowedSkills) > 0)
}

// skillRefused returns why the run may not activate skill name ("" when
// it may).
func (r *run) skillRefused(name string) string {
	def, child := r.subAgent()
	switch {
	case !child:
		return ""
	case def == nil:
		return fmt.Sprintf("The sub-agent %q is no longer defined on this orchestrator, so it may activate no skill.", r.rec.GetLabels()[labelSubAgent])
	case slices.Contains(def.AllowedSkills, name):
		return ""
	}
	return fmt.Sprintf("The sub-agent %s may activate only these skills: %s.", def.Name, strings.Join(def.AllowedSkills, ", "))
}

// workspaceConversation is the conversation whose workspace the run's
// tools use: a child's delegating conversation, else its own.
func (r *run) workspaceConversation() string {
	if r.rec.GetParentRunId() != "" {
		if c := r.rec.GetLabels()[labelWorkspace]; c != "" && natsx.ValidateToken("conversation_id", c) == nil {
			return c
		}
	}
	return r.rec.GetConversationId()
}

// childRunID is the run id of the child a task call starts: the format of
// newRunID, with the call's recorded start (so ids sort by time) and a
// digest of the parent run and the model's tool_call_id.
func childRunID(parentRunID, toolCallID string, started time.Time) string {
	sum := sha256.Sum256([]byte("task\x00" + parentRunID + "\x00" + toolCallID))
	return fmt.Sprintf("run_%012x_%s", started.UnixMilli(), hex.EncodeToString(sum[:8]))
}

// childConversationID is the child's own conversation.
func childConversationID(parentRunID, toolCallID string) string {
	sum := sha256.Sum256([]byte("task-conversation\x00" + parentRunID + "\x00" + toolCallID))
	return "conv_" + hex.EncodeToString(sum[:12])
}

// awaitTask makes the run wait for child (outcomeWaiting).
func (r *run) awaitTask(ctx context.Context, i int, c *baagentv1.ToolCall, child *baagentv1.Run) (*callResult, error) {
	w := &hitl.Wait{
		Kind: hitl.KindSubAgent,
		// Unique per work item: an id names one wake (wake dedupes by it).
		ID:        fmt.Sprintf("task_s%d_c%d_w%d", r.rec.GetStep(), i, r.workSeq),
		CallIndex: i,
		Deadline:  time.Now().Add(r.s.opts.SubAgentTimeout),
		WorkSeq:   r.workSeq,
		Child:     child.GetRunId(),
	}
	r.wait, r.paused = w, true
	// The step's events are stored before the run lets go of its work
	// item, and the wait before the child may look for it.
	if err := r.flush(); err != nil {
		return nil, err
	}
	if err := r.checkpoint(cpWaitingSubAgent); err != nil {
		return nil, err
	}
	// The child may have ended before the wait was stored, finding no
	// wait to answer: look once more now that it is.
	store, err := r.s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	now, _, err := store.Get(ctx, r.rec.GetTenant(), child.GetRunId())
	if err == nil && isFinished(now.GetState()) {
		r.wait, r.paused = nil, false
		return r.taskResult(c, time.Now(), now), nil
	}
	if ctx.Err() != nil {
		// Cancelled (or lost, or shutting down) while it stored the wait:
		// pausing now would drop a CancelRun that is waiting for this
		// execution to end.
		r.wait, r.paused = nil, false
		return nil, context.Cause(ctx)
	}
	r.s.metrics.waits.WithLabelValues(hitl.KindSubAgent).Inc()
	r.log.Info("run waits for its sub-agent", "child_run_id", child.GetRunId(), "subagent", child.GetLabels()[labelSubAgent], "deadline", w.Deadline)
	return nil, nil
}

// subAgentTimedOut is the answer a run stores in its own sub-agent wait
// when it gives up on the child at the wait's deadline (a child's end
// answers with its state name, which never reads like this).
const subAgentTimedOut = "timed out"

// settleTask turns an ended wait into the call's observation; a child
// still working at the deadline is cancelled.
//
// The cause is decided once, from which happened first: the child's end
// (the wait's answer) or the wait's deadline. A child found ended is its
// own outcome, unless this run had already given up on it: the timeout is
// stored in the wait before the child is cancelled (recordTimeout), so the
// CANCELLED state the cancellation leaves the child in never reads as the
// child's own end, whichever execution of the run settles the call.
func (r *run) settleTask(ctx context.Context, c *baagentv1.ToolCall, w *hitl.Wait) (*callResult, error) {
	began := time.Now()
	store, err := r.s.runStore(ctx)
	if err != nil {
		return nil, err
	}
	child, _, err := store.Get(ctx, r.rec.GetTenant(), w.Child)
	if err != nil {
		return nil, newRunError(CodeQueueUnavailable, err, "the sub-agent run %s cannot be read: %v", w.Child, err)
	}
	timedOut := w.Answer != nil && w.Answer.Text == subAgentTimedOut
	if !timedOut {
		if isFinished(child.GetState()) {
			return r.taskResult(c, began, child), nil
		}
		if err := r.recordTimeout(w, began); err != nil {
			return nil, err
		}
	}
	if !isFinished(child.GetState()) {
		reason := fmt.Sprintf("the delegating run %s waited %s for it", r.rec.GetRunId(), r.s.opts.SubAgentTimeout)
		if _, err := r.s.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: r.rec.GetTenant(), RunId: w.Child, Reason: reason}); err != nil {
			r.log.Warn("sub-agent past its deadline not cancelled", "child_run_id", w.Child, "error", err)
		}
	}
	return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, codeSubAgentTimeout,
		fmt.Sprintf("The sub-agent %s (run %s) did not finish within %s and was cancelled. Do the task another way or delegate a smaller one.",
			child.GetLabels()[labelSubAgent], w.Child, r.s.opts.SubAgentTimeout)), nil
}

// recordTimeout stores, before the child is cancelled, that the wait w
// ended at its deadline. Without it the cancelled child's end would answer
// the still-open wait (subAgentEnded), taking the run over from this
// execution, and the execution resuming it would find the child CANCELLED
// and report that instead of the timeout. With it subAgentEnded leaves the
// answered wait alone, and a run that stops here for any other reason
// resumes to report the timeout. A write that fails because the child's
// end got in first (checkpoint.ErrLostRun) stops this execution; the next
// one finds the child ended and reports its outcome.
func (r *run) recordTimeout(w *hitl.Wait, at time.Time) error {
	answered := *w // w is shared with the checkpoint the run resumed from
	answered.Answer = &hitl.Answer{Text: subAgentTimedOut, At: at}
	r.wait = &answered
	defer func() { r.wait = nil }() // settled: due took it off the run
	return r.checkpoint(cpWaitingSubAgent)
}

// startTask starts the child run of the step's task call i, or finds the
// one a previous execution started. A call the model got wrong, or a start
// the limits refuse, is a result (an error observation).
func (r *run) startTask(ctx context.Context, st *stepState, i int, c *baagentv1.ToolCall) (*baagentv1.Run, *callResult, error) {
	began := time.Now()
	def, args, err := parseTaskArgs(c.GetArguments(), r.s.agents)
	if err != nil {
		code := codeInvalidArguments
		if def == nil && args.Prompt != "" {
			code = codeSubAgentUnknown
		}
		return nil, r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, code, err.Error()), nil
	}
	store, err := r.s.runStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	rec := st.record(i)
	id := childRunID(r.rec.GetRunId(), c.GetId(), rec.StartedAt)
	child, _, err := store.Get(ctx, r.rec.GetTenant(), id)
	switch {
	case err == nil:
		// Started by a previous execution of this step: re-attach. A
		// crash between storing its record and queueing it left it
		// without a work item; queue it (the item's id dedupes).
		if child.GetState() == baagentv1.RunState_RUN_STATE_QUEUED {
			_, spec := r.childRun(id, c.GetId(), def, args)
			if err := r.s.requeueIfMissing(ctx, child, spec); err != nil {
				return nil, nil, newRunError(CodeQueueUnavailable, err, "the sub-agent run %s cannot be queued: %v", id, err)
			}
		}
		return child, nil, nil
	case !errors.Is(err, runstore.ErrNotFound):
		return nil, nil, newRunError(CodeQueueUnavailable, err, "the sub-agent run %s cannot be read: %v", id, err)
	}

	child, spec := r.childRun(id, c.GetId(), def, args)
	child.TraceId = tracing.TraceID(ctx) // a sub-agent is in its parent's trace
	// Announced before the child is queued: once queued, a replica may run
	// it and mirror its first events into this stream, and the assignment
	// must come before them. A child that then cannot start is reported by
	// the task's observation.
	if err := r.emit(subAgentAssigned(child, c.GetId(), def, args)); err != nil {
		return nil, nil, err
	}
	if err := r.s.accept(ctx, store, child, spec); err != nil {
		if status.Code(err) == codes.ResourceExhausted {
			return nil, r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT, codeSubAgentRefused,
				"The sub-agent could not start: "+status.Convert(err).Message()+". Do the task yourself or delegate it later."), nil
		}
		if ctx.Err() != nil {
			return nil, nil, context.Cause(ctx)
		}
		return nil, nil, newRunError(CodeQueueUnavailable, err, "the sub-agent run could not be started: %v", status.Convert(err).Message())
	}
	r.log.Info("sub-agent started", "child_run_id", id, "subagent", def.Name, "tool_call_id", c.GetId())
	return child, nil, nil
}

// maxAssignedPrompt bounds the prompt a subagent_assigned event quotes.
const maxAssignedPrompt = 4 << 10

// subAgentAssigned is the event that links a delegation to its child run
// on the parent's stream; the child's own events follow it there.
func subAgentAssigned(child *baagentv1.Run, callID string, def *SubAgent, args taskArgs) *baagentv1.Event {
	prompt := args.Prompt
	if len(prompt) > maxAssignedPrompt {
		prompt = truncateUTF8(prompt, maxAssignedPrompt) + "…"
	}
	depth, _ := strconv.Atoi(child.GetLabels()[labelSubAgentDepth])
	return &baagentv1.Event{Payload: &baagentv1.Event_SubagentAssigned{SubagentAssigned: &baagentv1.SubagentAssignedPayload{
		ChildRunId:   child.GetRunId(),
		SubagentType: def.Name,
		Description:  args.Description,
		Prompt:       prompt,
		ToolCallId:   callID,
		AllowedTools: def.Tools(),
		Model:        child.GetModel(),
		MaxSteps:     child.GetMaxSteps(),
		Depth:        int32(depth), //nolint:gosec // bounded by MaxSubAgentDepth
	}}}
}

// childRun builds the QUEUED record and spec of a child run.
func (r *run) childRun(id, callID string, def *SubAgent, args taskArgs) (*baagentv1.Run, *baagentv1.RunSpec) {
	prompt := def.SystemPrompt + "\n\n" + fmt.Sprintf("You are the sub-agent %q. Another agent delegated this task to you; "+
		"it sees only your final answer, so make that a complete, self-contained report of what you found, with the figures and where they came from.", def.Name)
	spec := &baagentv1.RunSpec{
		Input:          args.Prompt,
		ConversationId: childConversationID(r.rec.GetRunId(), callID),
		Model:          def.ChildModel(r.skills.Model(r.rec.GetModel())),
		MaxSteps:       int32(def.MaxIterations),
		SystemPrompt:   prompt,
		AllowedTools:   def.Tools(),
		Project:        r.rec.GetProject(),
		Labels: map[string]string{
			labelSubAgent:      def.Name,
			labelSubAgentDepth: strconv.Itoa(r.depth() + 1),
			labelWorkspace:     r.workspaceConversation(),
		},
	}
	now := time.Now()
	rec := &baagentv1.Run{
		RunId:          id,
		ConversationId: spec.GetConversationId(),
		Tenant:         r.rec.GetTenant(),
		Project:        spec.GetProject(),
		State:          baagentv1.RunState_RUN_STATE_QUEUED,
		Model:          spec.GetModel(),
		Input:          spec.GetInput(),
		CreatedAt:      timestamppb.New(now),
		MaxSteps:       spec.GetMaxSteps(),
		ParentRunId:    r.rec.GetRunId(),
		ScriptedModel:  r.s.opts.ScriptedModel,
		ApiKeyId:       r.rec.GetApiKeyId(),
		Labels:         spec.GetLabels(),
	}
	return rec, spec
}

// taskResult is the observation of an ended child.
func (r *run) taskResult(c *baagentv1.ToolCall, began time.Time, child *baagentv1.Run) *callResult {
	name, id := child.GetLabels()[labelSubAgent], child.GetRunId()
	switch child.GetState() {
	case baagentv1.RunState_RUN_STATE_COMPLETED:
		report := child.GetFinalAnswer()
		if len(report) > maxReportBytes {
			report = truncateUTF8(report, maxReportBytes) + fmt.Sprintf("\n\n[The report was cut at %d bytes; the full report is the final answer of run %s.]", maxReportBytes, id)
		}
		return r.result(c, began, &baagentv1.ObservePayload{
			ToolCallId: c.GetId(), ToolName: c.GetName(), Success: true,
			Observation: fmt.Sprintf("Sub-agent %s (run %s) finished in %d steps. Its report:\n\n%s", name, id, child.GetStep(), report),
			DurationMs:  float64(time.Since(began).Microseconds()) / 1000,
		})
	case baagentv1.RunState_RUN_STATE_CANCELLED:
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, codeSubAgentCancelled,
			fmt.Sprintf("The sub-agent %s (run %s) was cancelled before it reported.", name, id))
	}
	return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, codeSubAgentFailed,
		fmt.Sprintf("The sub-agent %s (run %s) failed: %s (%s).", name, id, child.GetError().GetMessage(), child.GetError().GetCode()))
}

// requeueIfMissing publishes the work item of a QUEUED run that has none.
func (s *Server) requeueIfMissing(ctx context.Context, rec *baagentv1.Run, spec *baagentv1.RunSpec) error {
	st, err := s.runsStream(ctx)
	if err != nil {
		return err
	}
	subject, err := natsx.RunSubject(rec.GetTenant(), rec.GetRunId())
	if err != nil {
		return err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return err
	}
	if info.State.Subjects[subject] > 0 {
		return nil
	}
	return s.enqueue(ctx, rec, spec)
}

// subAgentEnded answers the parent's wait for rec, a child run that has
// just ended, and requeues the parent at once. A parent not (yet) waiting
// for it finds it ended when it looks (awaitTask); a failure here leaves
// the parent to resume at its wait's deadline.
func (s *Server) subAgentEnded(ctx context.Context, rec *baagentv1.Run) {
	parent := rec.GetParentRunId()
	if parent == "" {
		return
	}
	cps, err := s.checkpoints(ctx)
	if err != nil {
		s.log.Warn("parent of an ended sub-agent not woken", "run_id", rec.GetRunId(), "parent_run_id", parent, "error", err)
		return
	}
	for range 5 { // a concurrent checkpoint write moves the revision
		cp, rev, err := cps.Load(ctx, rec.GetTenant(), parent)
		if err != nil {
			s.log.Warn("parent of an ended sub-agent not woken", "run_id", rec.GetRunId(), "parent_run_id", parent, "error", err)
			return
		}
		if cp == nil || cp.Wait == nil || cp.Wait.Kind != hitl.KindSubAgent || cp.Wait.Child != rec.GetRunId() || cp.Wait.Answer != nil {
			return
		}
		cp.Wait.Answer = &hitl.Answer{Text: stateName(rec.GetState()), At: time.Now()}
		if _, err := cps.Write(ctx, rec.GetTenant(), parent, cp, rev); errors.Is(err, checkpoint.ErrLostRun) {
			continue
		} else if err != nil {
			s.log.Warn("parent of an ended sub-agent not woken", "run_id", rec.GetRunId(), "parent_run_id", parent, "error", err)
			return
		}
		if err := s.wake(ctx, &baagentv1.Run{Tenant: rec.GetTenant(), RunId: parent}, cp.Wait); err != nil {
			s.log.Warn("parent of an ended sub-agent not requeued; it resumes at its wait's deadline", "parent_run_id", parent, "error", err)
		}
		return
	}
}

// subAgentRuns returns the children a run may have working for it: those
// of the task calls of its current step without a result.
func (s *Server) subAgentRuns(ctx context.Context, tenant, runID string) []string {
	cps, err := s.checkpoints(ctx)
	if err != nil {
		return nil
	}
	cp, _, err := cps.Load(ctx, tenant, runID)
	if err != nil || cp == nil {
		return nil
	}
	var out []string
	for _, t := range cp.Tools {
		if t.ToolName == TaskToolName && !t.Finished() {
			out = append(out, childRunID(runID, t.CallID, t.StartedAt))
		}
	}
	return out
}

// cancelSubAgents cancels a cancelled parent's children (and, through
// CancelRun, theirs).
func (s *Server) cancelSubAgents(ctx context.Context, tenant, parent string, children []string) {
	if len(children) == 0 {
		return
	}
	store, err := s.runStore(ctx)
	if err != nil {
		return
	}
	if rec, _, err := store.Get(ctx, tenant, parent); err != nil || rec.GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		return
	}
	for _, id := range children {
		_, err := s.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: tenant, RunId: id, Reason: "the delegating run " + parent + " was cancelled"})
		if err != nil && status.Code(err) != codes.NotFound {
			s.log.WarnContext(ctx, "sub-agent of a cancelled run not cancelled", "run_id", id, "parent_run_id", parent, "error", err)
		}
	}
}

// checkParent ends a sub-agent run whose parent has ended (it was
// cancelled while the child was being started): nobody waits for its
// report.
func (r *run) checkParent(ctx context.Context) error {
	if _, child := r.subAgent(); !child {
		return nil
	}
	store, err := r.s.runStore(ctx)
	if err != nil {
		return nil
	}
	parent, _, err := store.Get(ctx, r.rec.GetTenant(), r.rec.GetParentRunId())
	if err != nil || !isFinished(parent.GetState()) {
		return nil
	}
	return &cancelCause{reason: fmt.Sprintf("the delegating run %s has ended (%s)", parent.GetRunId(), stateName(parent.GetState()))}
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
