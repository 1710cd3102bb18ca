package toolrunner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	promx "github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/services/toolrunner/artifact"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/quota"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// DefaultLargeDataBytes is the size above which a result is always stored
// as an artifact (see docs/concepts/output-levels.md).
const DefaultLargeDataBytes = 1 << 20

const defaultPermissionLevel = "default"

// invoke is the pipeline: find the tool → validate the arguments →
// permission (allowed tools, allow/deny/ask) → pre hooks → idempotency
// cache → execute with timeout and retries → post hooks → format at the
// output level → store large data as an artifact → truncate → metrics. Tool failures are results; an error
// return means the caller went away.
func (s *Server) invoke(ctx context.Context, req *baagentv1.ToolInvocationRequest) (*baagentv1.ToolExecutionResult, error) {
	start := time.Now()
	res := &baagentv1.ToolExecutionResult{ToolCallId: req.GetToolCallId()}
	label := unknownTool
	finish := func() (*baagentv1.ToolExecutionResult, error) {
		s.record(ctx, label, res, start)
		return res, nil
	}

	if c, ok := s.compositions[req.GetToolName()]; ok {
		return s.invokeComposition(ctx, req, c)
	}
	t, ok := s.tools.lookupFor(ctx, req.GetTenant(), req.GetToolName())
	if !ok {
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, "TOOL_NOT_FOUND",
			"there is no tool named %q; use one of the tools you were given", req.GetToolName()))
		return finish()
	}
	spec := t.Spec()
	label = spec.Name
	pol := s.policies.resolve(spec)
	level := outputLevel(req.GetOutputLevel(), pol.toolLevel, req.GetContextUsage(), pol.globalLevel)
	res.OutputLevel = level

	args := req.GetParameters().AsMap()
	checkArgs := func(map[string]any) error { return nil }
	if schema, err := s.tools.schemas.get(spec.Parameters); err != nil {
		s.log.DebugContext(ctx, "tool schema unusable; arguments not validated", "tool", spec.Name, "error", err)
	} else if schema != nil {
		if err := schema.Validate(args); err != nil {
			fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "INVALID_ARGUMENTS", "%s: %v", spec.Name, err))
			return finish()
		}
		checkArgs = func(a map[string]any) error { return schema.Validate(a) }
	}

	if !allowedBy(req.GetAllowedTools(), spec.Name) {
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "TOOL_NOT_ALLOWED",
			"%s is not among the tools allowed in this context", spec.Name))
		return finish()
	}
	switch pol.permission {
	case baagentv1.ToolPermission_TOOL_PERMISSION_DENY:
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "TOOL_DENIED",
			"%s is disabled by the operator's policy", spec.Name))
		return finish()
	case baagentv1.ToolPermission_TOOL_PERMISSION_ASK:
		if !req.GetApproved() {
			res.ApprovalRequired = true
			fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "APPROVAL_REQUIRED",
				"%s needs the user's approval before it runs; nothing was executed", spec.Name))
			return finish()
		}
	}

	// Pre hooks (docs/concepts/tool-hooks.md) may deny the call or rewrite
	// its arguments; the fingerprint below covers the arguments that run.
	args, te, err := s.hooks.runPre(ctx, req, spec.Name, args, checkArgs)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if te != nil {
		fail(res, te)
		return finish()
	}

	owner := artifact.Owner{Tenant: req.GetTenant(), ConversationID: req.GetConversationId()}
	fingerprint := derivedKey(req, spec, args)
	res.IdempotencyKey = fingerprint
	if k := req.GetIdempotencyKey(); k != "" {
		res.IdempotencyKey = k
	}
	x := execution{t: t, pol: pol, req: req, level: level, owner: owner, args: args}

	// Idempotency and caching are separate: a call with side effects and
	// a key runs under an idempotency record (exactly once, whoever
	// retries it); a read-only call is cached by its derived key when its
	// cache policy says so, whatever key it carries.
	if !spec.ReadOnly && req.GetIdempotencyKey() != "" {
		return s.invokeKeyed(ctx, x, res, fingerprint, start)
	}
	policy := pol.cache
	if p := req.GetCachePolicy(); p != baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_UNSPECIFIED {
		policy = p
	}
	if ttl := cacheTTL(policy); spec.ReadOnly && ttl > 0 {
		entry, release, err := s.cache.acquire(ctx, fingerprint)
		if err != nil {
			return nil, status.FromContextError(err).Err()
		}
		if entry != nil {
			res = cachedResult(entry, req, res.IdempotencyKey, s.clock.Now())
			s.metrics.cacheHits.WithLabelValues(label).Inc()
			return finish()
		}
		defer release()
		if err := s.run(ctx, x, res); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		if res.GetSuccess() {
			s.cache.put(fingerprint, owner, res, ttl)
		}
		return finish()
	}
	if err := s.run(ctx, x, res); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return finish()
}

// execution is a call past validation and permissions, ready to run.
type execution struct {
	t     tool.Tool
	pol   effective
	req   *baagentv1.ToolInvocationRequest
	level baagentv1.OutputLevel
	owner artifact.Owner
	args  map[string]any
}

// run executes x in the conversation's workspace, with its timeout and
// retries, and presents the outcome in res. An error means ctx ended.
func (s *Server) run(ctx context.Context, x execution, res *baagentv1.ToolExecutionResult) error {
	req := x.req
	ws, err := s.workspaces.acquire(req.GetTenant(), req.GetConversationId())
	var qe *quota.Error
	if errors.As(err, &qe) { // no room for a new workspace: the tenant's quota, not a fault
		fail(res, qe.ToolError())
		return nil
	}
	if err != nil {
		s.log.ErrorContext(ctx, "workspace unavailable", "tenant", req.GetTenant(), "conversation_id", req.GetConversationId(), "error", scrubPath(err))
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, "WORKSPACE_UNAVAILABLE", "the conversation's workspace could not be opened"))
		return nil
	}
	defer ws.release()
	call := tool.Call{
		ToolCallID: req.GetToolCallId(), Tenant: req.GetTenant(), ConversationID: req.GetConversationId(),
		RunID: req.GetRunId(), CallerID: req.GetCallerId(), Args: x.args,
		IdempotencyKey: res.GetIdempotencyKey(), Workspace: ws.root, QuotaWrite: ws.write,
	}
	data, err := s.execute(ctx, x.t, call, x.pol, req, res)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		fail(res, tool.Classify(err))
		return nil
	}
	// Post hooks see the data before it is formatted, stored or cached.
	data, notes, te, err := s.hooks.runPost(ctx, req, x.t.Spec().Name, x.args, data)
	if err != nil {
		return err
	}
	if te != nil {
		fail(res, te)
		return nil
	}
	s.present(ctx, res, x.t.Spec().Name, data, x.level, x.owner, req)
	annotate(res, notes, truncate.MaxOutputBytes)
	captured(ctx, data)
	return nil
}

// cachedResult is a cache hit answering req: the stored result with the
// new call's id, and an observation that says it was served from the
// cache, and how old it is.
func cachedResult(e *cacheEntry, req *baagentv1.ToolInvocationRequest, key string, now time.Time) *baagentv1.ToolExecutionResult {
	hit := proto.Clone(e.result).(*baagentv1.ToolExecutionResult)
	hit.ToolCallId = req.GetToolCallId()
	hit.Cached = true
	hit.RetryCount, hit.LastError = 0, ""
	hit.IdempotencyKey = key
	age := max(now.Sub(e.stored), 0).Round(time.Second)
	hit.Observation += fmt.Sprintf("\n\n(Cached result from %s ago: the same call with the same arguments was answered then; the tool did not run again.)", age)
	return hit
}

// invokeKeyed runs a call with side effects under its idempotency record:
// the first delivery executes it to its own end, detached from its caller
// (bounded by the tool's timeouts and the server's life) and records the
// outcome; a later delivery gets that outcome, waits for it, or learns
// that the execution died mid-call. The tool never runs twice for a key.
func (s *Server) invokeKeyed(ctx context.Context, x execution, res *baagentv1.ToolExecutionResult, fingerprint string, start time.Time) (*baagentv1.ToolExecutionResult, error) {
	name := x.t.Spec().Name
	key := idempotency.ConversationKey(x.req.GetTenant(), x.req.GetConversationId(), x.req.GetIdempotencyKey())
	c, err := s.ledger.claim(ctx, key, fingerprint, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		s.log.ErrorContext(ctx, "idempotency record not written; call refused", "tool", name, "tool_call_id", x.req.GetToolCallId(), "error", err)
		s.metrics.keyed.WithLabelValues(keyedRefused).Inc()
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR, codeRecordUnavailable,
			"%s was not run because its idempotency record could not be written (the record store is unavailable); nothing was executed, so calling it again later is safe", name))
		s.record(ctx, name, res, start)
		return res, nil
	}
	switch c.kind {
	case claimMismatch:
		s.metrics.keyed.WithLabelValues(keyedReused).Inc()
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeKeyReused,
			"idempotency key %q was used for a different call (another tool, caller or arguments)", x.req.GetIdempotencyKey()))
		s.record(ctx, name, res, start)
		return res, nil
	case claimDone:
		s.metrics.keyed.WithLabelValues(keyedReplayed).Inc()
		r := c.result
		r.ToolCallId, r.IdempotencyKey, r.Replayed = x.req.GetToolCallId(), res.GetIdempotencyKey(), true
		s.record(ctx, name, r, start)
		return r, nil
	case claimUnknown:
		s.metrics.keyed.WithLabelValues(keyedUnknown).Inc()
		r := outcomeUnknown(name, c.rec.StartedAt)
		r.ToolCallId, r.IdempotencyKey, r.Replayed = x.req.GetToolCallId(), res.GetIdempotencyKey(), true
		s.record(ctx, name, r, start)
		return r, nil
	}

	done := make(chan struct{})
	s.detached.Add(1)
	go func() {
		defer s.detached.Done()
		defer close(done)
		// The caller's values (logger, trace) but not its cancellation:
		// the server's shutdown is what may cut the call short.
		ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(s.life, cancel)()
		bctx, stopBeat := context.WithCancel(ectx)
		revc := make(chan uint64, 1)
		go func() { revc <- s.ledger.beat(bctx, key, c.rec, c.rev) }()
		if err := s.run(ectx, x, res); err != nil {
			s.log.Warn("tool call cut short by shutdown; outcome recorded as unknown", "tool", name, "tool_call_id", x.req.GetToolCallId())
			unknown := outcomeUnknown(name, c.rec.StartedAt)
			unknown.ToolCallId, unknown.IdempotencyKey = res.GetToolCallId(), res.GetIdempotencyKey()
			proto.Reset(res)
			proto.Merge(res, unknown)
		}
		stopBeat()
		if err := s.ledger.complete(key, c.rec, <-revc, res); err != nil {
			// The record stays started (or was taken over): retries get
			// TOOL_OUTCOME_UNKNOWN, never a second execution.
			s.log.Error("tool call's outcome not recorded", "tool", name, "tool_call_id", x.req.GetToolCallId(), "error", err)
		}
		s.metrics.keyed.WithLabelValues(keyedExecuted).Inc()
		s.record(ctx, name, res, start)
	}()
	select {
	case <-done:
		return res, nil
	case <-ctx.Done():
		s.log.DebugContext(ctx, "caller left; the tool call runs on and its outcome will be recorded", "tool", name, "tool_call_id", x.req.GetToolCallId())
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// execute runs attempts until one succeeds, the failure is not retryable
// (by type, or because the tool spent its own budget), or the retries are
// spent, waiting the backoff delay between attempts and
// growing the timeout by the timeout multiplier. It records retry_count and
// last_error in res.
func (s *Server) execute(ctx context.Context, t tool.Tool, call tool.Call, pol effective, req *baagentv1.ToolInvocationRequest, res *baagentv1.ToolExecutionResult) (any, error) {
	rp := pol.retry.overlay(req.GetRetryPolicy())
	if req.RetryOnTimeout != nil && !req.GetRetryOnTimeout() {
		rp.RetryOn = slices.DeleteFunc(slices.Clone(rp.RetryOn), func(t baagentv1.ToolErrorType) bool {
			return t == baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT
		})
	}
	base := pol.timeout
	if ms := req.GetTimeoutMs(); ms > 0 {
		base = time.Duration(ms) * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		call.Attempt = attempt
		res.RetryCount = int32(attempt)
		data, err := s.attempt(ctx, t, call, rp.Timeout(base, attempt))
		if err == nil {
			return data, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		te := tool.Classify(err)
		res.LastError = te.Error()
		if te.BudgetExhausted || !rp.ShouldRetry(te.Type, attempt) {
			// A spent budget is spent again by a retry with the same
			// arguments: only a narrower call can succeed.
			return nil, te
		}
		s.metrics.retries.WithLabelValues(t.Spec().Name).Inc()
		s.log.DebugContext(ctx, "tool call retried", "tool", t.Spec().Name, "tool_call_id", call.ToolCallID,
			"attempt", attempt+1, "error_type", te.Type.String(), "delay", rp.Delay(attempt))
		if err := s.clock.Sleep(ctx, rp.Delay(attempt)); err != nil {
			return nil, err
		}
	}
}

// attempt runs one attempt with its timeout. The tool runs in its own
// goroutine so that the call returns at the deadline even if a tool is slow
// to notice its context; that goroutine ends when the tool returns. A
// panicking tool becomes an INTERNAL_ERROR.
func (s *Server) attempt(ctx context.Context, t tool.Tool, call tool.Call, timeout time.Duration) (any, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type outcome struct {
		data any
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tool panicked", "tool", t.Spec().Name, "panic", fmt.Sprint(p))
				done <- outcome{err: tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, "TOOL_PANIC", "the tool failed unexpectedly")}
			}
		}()
		r, err := t.Execute(actx, call)
		done <- outcome{r.Data, err}
	}()
	timedOut := func() error {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, "TIMEOUT", "the tool did not finish within %s", timeout)
	}
	select {
	case o := <-done:
		if o.err != nil && ctx.Err() == nil && actx.Err() != nil {
			return nil, timedOut() // whatever the tool said, it was cut off by the deadline
		}
		return o.data, o.err
	case <-actx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, timedOut()
	}
}

// present formats a successful result at level, stores it as an artifact
// when it is FULL, large, or only partly shown, and truncates the
// observation to truncate.MaxOutputBytes.
func (s *Server) present(ctx context.Context, res *baagentv1.ToolExecutionResult, name string, data any, level baagentv1.OutputLevel, owner artifact.Owner, req *baagentv1.ToolInvocationRequest) {
	r := render(data, level)
	res.Success = true
	if d, ok := data.(tool.Document); ok && d.Recall != nil {
		res.MemoryHits = d.Recall.Hits
	}
	res.DataSizeBytes = int64(len(r.content))
	res.DataHash = artifact.DataHash(r.content)
	large := len(r.content) > s.largeDataBytes
	full := level == baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	obs := r.observation

	var storeErr error // set when the data could not be stored: tried once, and said
	store := func() string {
		if res.ArtifactId != "" || storeErr != nil {
			return res.ArtifactId
		}
		m, err := s.artifacts.Put(owner, req.GetStorageDir(), req.GetToolCallId(), r.summary, r.content)
		if err != nil {
			storeErr = err
			s.log.WarnContext(ctx, "tool result not stored as an artifact", "tool", name, "tool_call_id", req.GetToolCallId(), "error", err)
			return ""
		}
		s.metrics.artifactBytes.Add(float64(m.Size))
		s.log.DebugContext(ctx, "tool result stored", "tool", name, "tool_call_id", req.GetToolCallId(), "artifact_id", m.ID, "bytes", m.Size)
		res.ArtifactId, res.DataSummary = m.ID, r.summary
		return m.ID
	}
	switch {
	case full || large:
		if id := store(); id != "" {
			obs = artifactObservation(id, r.summary)
		}
	case !r.complete:
		if id := store(); id != "" {
			obs += "\n\n(Preview only. The complete data is " + id + "; read it with artifact_read.)"
			res.Truncated = true
		}
	}
	var hint string
	if len(obs) > truncate.MaxOutputBytes {
		hint = fmt.Sprintf("\n\n(Output truncated at %d bytes.)", truncate.MaxOutputBytes)
		if id := store(); id != "" {
			hint = fmt.Sprintf("\n\n(Output truncated at %d bytes. The complete output is %s; read it with artifact_read using offset, limit or pattern.)", truncate.MaxOutputBytes, id)
		}
	}
	if storeErr != nil && (hint != "" || !r.complete) {
		hint += notStoredNote(storeErr, len(r.content)) // the rest is lost: say so
	}
	if hint != "" {
		if len(obs)+len(hint) > truncate.MaxOutputBytes {
			obs, _ = truncate.Bytes(obs, truncate.MaxOutputBytes-len(hint))
		}
		obs += hint
		res.Truncated = true
	}
	res.Observation = strings.ToValidUTF8(obs, "\uFFFD")
}

// fail turns res into a failure result (docs/concepts/errors-and-retries.md).
func fail(res *baagentv1.ToolExecutionResult, te *tool.Error) {
	res.Success = false
	res.ErrorType = te.Type
	if res.ErrorType == baagentv1.ToolErrorType_TOOL_ERROR_TYPE_UNSPECIFIED {
		res.ErrorType = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR
	}
	res.ErrorCode = te.Code
	if res.ErrorCode == "" {
		res.ErrorCode = strings.TrimPrefix(res.ErrorType.String(), "TOOL_ERROR_TYPE_")
	}
	res.ErrorMessage = strings.ToValidUTF8(te.Error(), "\uFFFD")
	res.LastError = strings.ToValidUTF8(res.LastError, "\uFFFD")
	res.Observation = errorObservation(res)
}

// derivedKey is the derived key (docs/concepts/idempotency.md): tool name + version +
// canonical JSON of the parameters + caller + permission level, never the
// tool_call_id. It also covers tenant and conversation, because the tools
// work in per-conversation workspaces: the same call in another
// conversation reads other files.
func derivedKey(req *baagentv1.ToolInvocationRequest, spec tool.Spec, args map[string]any) string {
	canonical, _ := json.Marshal(args) // encoding/json sorts map keys
	version := spec.Version
	if version == "" {
		version = req.GetToolVersion()
	}
	perm := req.GetPermissionLevel()
	if perm == "" {
		perm = defaultPermissionLevel
	}
	parts, _ := json.Marshal([]string{req.GetTenant(), req.GetConversationId(), spec.Name, version, string(canonical), req.GetCallerId(), perm})
	sum := sha256.Sum256(parts)
	return hex.EncodeToString(sum[:16])
}

// record logs the call and updates the metrics.
func (s *Server) record(ctx context.Context, label string, res *baagentv1.ToolExecutionResult, start time.Time) {
	elapsed := time.Since(start)
	res.DurationMs = float64(elapsed.Microseconds()) / 1000
	outcome := "success"
	switch {
	case res.GetCached():
		outcome = "cached"
	case res.GetApprovalRequired():
		outcome = "approval_required"
	case !res.GetSuccess():
		outcome = "error"
		s.metrics.errors.WithLabelValues(label, strings.ToLower(strings.TrimPrefix(res.GetErrorType().String(), "TOOL_ERROR_TYPE_"))).Inc()
	}
	s.metrics.calls.WithLabelValues(label, outcome).Inc()
	promx.Observe(ctx, s.metrics.duration.WithLabelValues(label), elapsed.Seconds())
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("tool call", "tool", label, "tool_call_id", res.GetToolCallId(), "outcome", outcome,
			"error_code", res.GetErrorCode(), "retries", res.GetRetryCount(), "artifact_id", res.GetArtifactId(), "duration_ms", res.GetDurationMs())
	}
}
