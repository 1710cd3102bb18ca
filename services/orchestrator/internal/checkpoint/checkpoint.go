// Package checkpoint stores a run's resumable state
// (docs/concepts/runs.md#durable-runs) in the KV bucket natsx.BucketCheckpoints.
package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/doomloop"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/workplan"
)

// After every model
// response and every tool result the run's state is written to the KV
// bucket natsx.BucketCheckpoints under natsx.CheckpointKey, before anything
// depends on it, so that a replica that picks the run up after a crash
// resumes where it was: finished tool calls are not run again (their
// results are here), an unfinished one is invoked again with the same
// idempotency key (so a write that completed is answered from the
// toolrunner's record instead of running twice), and events continue after
// the last stored one.
//
// Writes are fenced: each is an Update at the revision this replica last
// wrote, so a replica that lost the run (its work item was redelivered to
// another) fails its next write and stops instead of overwriting newer
// state.

// Checkpoint kinds. A step's end needs no STEP_COMPLETE
// of its own: its last checkpoint already holds every result (endStep).
const (
	KindStart        = "START"
	KindLLMComplete  = "LLM_COMPLETE"
	KindToolStart    = "TOOL_START"
	KindToolComplete = "TOOL_COMPLETE"
	KindWaitingInput = "WAITING_INPUT"
	// KindPlanStep: a work-plan step ended and the next one (or the
	// synthesis) is set; no step is in progress.
	KindPlanStep = "PLAN_STEP"
)

// Tool record statuses.
const (
	ToolRunning = "running"
	ToolSuccess = "success"
	ToolFailure = "failed"
)

// ErrLostRun is the cause of a run stopped because another replica took it
// over (its checkpoint moved on without this replica).
var ErrLostRun = errors.New("another replica took the run over")

// State is a run's resumable state.
type State struct {
	Kind    string    `json:"kind"`
	Owner   string    `json:"owner"`   // replica executing the run
	Attempt int       `json:"attempt"` // delivery of the work item that wrote it
	At      time.Time `json:"at"`

	// Step is the step in progress (or the last one completed, for
	// STEP_COMPLETE).
	Step int32 `json:"step"`
	// LastSeq and LastPos are the last acknowledged event and its stream
	// sequence: every event up to it is stored, in order.
	LastSeq uint64 `json:"last_seq"`
	LastPos uint64 `json:"last_pos"`
	// Outbox holds the events emitted after LastSeq, not yet confirmed
	// when the checkpoint was taken (the checkpoint does not wait for
	// their acks). A replica resuming the run publishes again those the
	// stream lacks, so no event the checkpointed state implies is lost.
	Outbox []OutboxEvent `json:"outbox,omitempty"`
	// Started says the start event was published and the user's message
	// appended.
	Started bool `json:"started"`

	// Assistant is the step's model response (a ChatMessage with tool
	// calls) while its tool calls are being answered; nil between steps.
	Assistant []byte `json:"assistant,omitempty"`
	// ModelMs is the step's model time, for the step's overhead metric.
	ModelMs float64 `json:"model_ms,omitempty"`
	// Tools has one record per call of Assistant, in the model's order.
	Tools []ToolRecord `json:"tools,omitempty"`

	// Skills is the activation stack.
	Skills []SkillFrame `json:"skills,omitempty"`
	// Metrics is the run's ConversationMetrics so far.
	Metrics []byte `json:"metrics,omitempty"`
	// Calls is the doom-loop detector's window.
	Calls []doomloop.Call `json:"calls,omitempty"`
	// MemoryNotes are the key observations noted so far for the run's
	// memory episode (bounded: at most 64, about 8 KiB); absent when the
	// run is not captured.
	MemoryNotes []string `json:"memory_notes,omitempty"`
	// Wait is the question the run waits on, when WAITING_INPUT.
	Wait *hitl.Wait `json:"wait,omitempty"`
	// Plan is the run's planning state: its complexity, the work plan, the
	// current plan step and its iterations. Absent in checkpoints written
	// before planning existed: such a run goes on unplanned.
	Plan *workplan.State `json:"plan,omitempty"`
	// Complexity is the request's complexity (baagentv1.QueryComplexity)
	// and the signals that fired, decided before the start event.
	Complexity        int32    `json:"complexity,omitempty"`
	ComplexitySignals []string `json:"complexity_signals,omitempty"`
	// Span is the W3C traceparent of the execution that wrote it (when
	// traced): the execution that resumes the run links to it.
	Span string `json:"span,omitempty"`
	// Pattern is the interaction pattern matched at the run's start and
	// the user's decision about it; absent when the run was not matched
	// (no memory service, a sub-agent run, or a checkpoint written before
	// patterns existed).
	Pattern *Pattern `json:"pattern,omitempty"`
}

// Pattern is what a run's start learned of the interaction patterns
// (docs/concepts/patterns.md): kept so that a resumed run neither matches
// nor asks again, and rebuilds its guidance from here.
type Pattern struct {
	// Checked: the memory service was asked (whatever it answered).
	Checked bool `json:"checked"`
	// The best candidate; ID empty when none matched.
	ID     string  `json:"id,omitempty"`
	Name   string  `json:"name,omitempty"`
	Score  float64 `json:"score,omitempty"`
	Mode   string  `json:"mode,omitempty"` // reuse or reference
	Shared bool    `json:"shared,omitempty"`
	// DecisionID is the decision asking whether to reuse it (mode reuse);
	// Decision its outcome once settled: reuse, scratch or timed_out.
	DecisionID string `json:"decision_id,omitempty"`
	Decision   string `json:"decision,omitempty"`
	// Guidance is the pattern rendered for the system prompt (bounded).
	Guidance string `json:"guidance,omitempty"`
}

// ToolRecord is the execution record of one call, with the result
// once it has one.
type ToolRecord struct {
	CallID         string    `json:"call_id"`
	ToolName       string    `json:"tool_name"`
	Status         string    `json:"status"`
	StepNumber     int32     `json:"step_number"`
	SequenceNumber int       `json:"sequence_number"`
	IdempotencyKey string    `json:"idempotency_key"`
	StartedAt      time.Time `json:"started_at,omitzero"`
	CompletedAt    time.Time `json:"completed_at,omitzero"`
	// Doom says the call completed a doom loop when the model made it;
	// Decision is the user's intervention (stop, continue, correct).
	Doom     bool   `json:"doom,omitempty"`
	Decision string `json:"decision,omitempty"`
	// DecisionTimedOut says no one answered the doom-loop decision.
	DecisionTimedOut bool `json:"decision_timed_out,omitempty"`
	// Approval tracks a call needing the user's approval: asked, allow,
	// deny.
	Approval   string  `json:"approval,omitempty"`
	DurationMs float64 `json:"duration_ms,omitempty"`
	// Result of the call, once complete: the tool message, the observe
	// payload, the ToolMetrics and any messages a skill activation injects.
	Message []byte   `json:"message,omitempty"`
	Observe []byte   `json:"observe,omitempty"`
	Metrics []byte   `json:"metrics,omitempty"`
	Inject  [][]byte `json:"inject,omitempty"`
}

// SkillFrame is one activation of the skill stack.
type SkillFrame struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Revision string `json:"revision,omitempty"`
	Modifier []byte `json:"modifier,omitempty"`
}

// Store reads and writes checkpoints.
type Store struct {
	kv jetstream.KeyValue
}

// NewStore reads and writes checkpoints in kv.
func NewStore(kv jetstream.KeyValue) *Store { return &Store{kv: kv} }

// Load returns a run's checkpoint and its revision; (nil, 0) when there is
// none.
func (s *Store) Load(ctx context.Context, tenant, runID string) (*State, uint64, error) {
	key, err := natsx.CheckpointKey(tenant, runID)
	if err != nil {
		return nil, 0, err
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read checkpoint of run %s: %w", runID, err)
	}
	cp := &State{}
	if err := json.Unmarshal(e.Value(), cp); err != nil {
		return nil, 0, fmt.Errorf("decode checkpoint of run %s: %w", runID, err)
	}
	return cp, e.Revision(), nil
}

// Write stores cp if the stored checkpoint is still at revision rev (0:
// none stored yet) and returns the new revision. A revision mismatch is
// ErrLostRun.
func (s *Store) Write(ctx context.Context, tenant, runID string, cp *State, rev uint64) (uint64, error) {
	key, err := natsx.CheckpointKey(tenant, runID)
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return 0, fmt.Errorf("encode checkpoint: %w", err)
	}
	// Bounded and retried across a NATS restart: the write is guarded by
	// the revision, so a retry whose earlier attempt was stored (its reply
	// lost) fails that check, and is recognised by finding this very
	// checkpoint stored.
	attempts := 0
	next, err := natsx.Call(ctx, func(ctx context.Context) (uint64, error) {
		attempts++
		if rev == 0 {
			return s.kv.Create(ctx, key, data)
		}
		return s.kv.Update(ctx, key, data, rev)
	})
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
			if attempts > 1 {
				if e, gerr := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.kv.Get(ctx, key) }); gerr == nil && bytes.Equal(e.Value(), data) {
					return e.Revision(), nil
				}
			}
			return 0, ErrLostRun
		}
		return 0, fmt.Errorf("write checkpoint of run %s: %w", runID, err)
	}
	return next, nil
}

// Delete removes a finished run's checkpoint.
func (s *Store) Delete(ctx context.Context, tenant, runID string) error {
	key, err := natsx.CheckpointKey(tenant, runID)
	if err != nil {
		return err
	}
	if err := s.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete checkpoint of run %s: %w", runID, err)
	}
	return nil
}

// Finished reports whether the record holds a result.
func (r ToolRecord) Finished() bool { return r.Status == ToolSuccess || r.Status == ToolFailure }

// OutboxEvent is an emitted event not yet confirmed stored, as a checkpoint
// holds it: a replica resuming the run publishes it again if the stream
// lacks it.
type OutboxEvent struct {
	Seq  uint64 `json:"seq"`
	Data []byte `json:"data"` // the encoded Event
}
