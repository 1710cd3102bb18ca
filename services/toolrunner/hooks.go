package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	promx "github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Error codes of hooked calls (docs/concepts/tool-hooks.md).
const (
	codeHookDenied = "HOOK_DENIED"
	codeHookFailed = "HOOK_FAILED"
)

// Bounds on what a hook may say.
const (
	maxHookReasonBytes     = 1 << 10
	maxHookAnnotationBytes = 2 << 10
	maxHookRedactions      = 64
	hookMaxMsgBytes        = 16 << 20
	redactedText           = "[REDACTED]"
)

// preVerdict is a pre hook's answer, whatever its transport.
type preVerdict struct {
	decision baagentv1.ToolHookDecision
	reason   string
	args     map[string]any // with REWRITE
}

// postVerdict is a post hook's answer, whatever its transport.
type postVerdict struct {
	replace    bool
	data       any // generic JSON, with replace
	redactions []string
	annotation string
}

// hookCall is what a hook is shown of a call.
type hookCall struct {
	call *baagentv1.ToolHookCall
	args map[string]any
	data any // post only: generic JSON
}

// hookTransport carries hook calls to a gRPC server or a command.
type hookTransport interface {
	pre(ctx context.Context, c hookCall) (preVerdict, error)
	post(ctx context.Context, c hookCall) (postVerdict, error)
	close() error
}

type hook struct {
	cfg HookConfig
	tr  hookTransport
}

func (h *hook) applies(toolName string) bool {
	for _, p := range h.cfg.Tools {
		if ok, _ := path.Match(p, toolName); ok {
			return true
		}
	}
	return false
}

// hookSet holds the configured hooks in file order.
type hookSet struct {
	pre, post []*hook
	log       *slog.Logger
	m         *metrics
	closeOnce sync.Once
	closeErr  error
}

// newHookSet connects the configured hooks (gRPC clients connect lazily).
func newHookSet(cfgs []HookConfig, log *slog.Logger, m *metrics) (*hookSet, error) {
	hs := &hookSet{log: log, m: m}
	for _, c := range cfgs {
		var tr hookTransport
		if c.Address != "" {
			creds, err := c.TLS.Credentials()
			if err != nil {
				hs.close()
				return nil, fmt.Errorf("hook %q: grpc.tls: %w", c.Name, err)
			}
			conn, err := grpc.NewClient(c.Address,
				grpc.WithTransportCredentials(creds),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(hookMaxMsgBytes), grpc.MaxCallSendMsgSize(hookMaxMsgBytes)))
			if err != nil {
				hs.close()
				return nil, fmt.Errorf("hook %q: address %q: %w", c.Name, c.Address, err)
			}
			tr = &grpcHook{conn: conn, client: baagentv1.NewToolHookServiceClient(conn)}
		} else {
			if _, err := exec.LookPath(c.Command[0]); err != nil {
				hs.close()
				return nil, fmt.Errorf("hook %q: command: %w", c.Name, err)
			}
			tr = newCommandHook(c.Command)
		}
		h := &hook{cfg: c, tr: tr}
		if c.Phase == HookPre {
			hs.pre = append(hs.pre, h)
		} else {
			hs.post = append(hs.post, h)
		}
		for _, o := range hookOutcomes(c.Phase) {
			m.hookCalls.WithLabelValues(c.Name, string(c.Phase), o) // export zeros
		}
	}
	return hs, nil
}

func hookOutcomes(p HookPhase) []string {
	if p == HookPre {
		return []string{"allow", "deny", "rewrite", "failed"}
	}
	return []string{"unchanged", "modified", "failed"}
}

func (hs *hookSet) close() error {
	hs.closeOnce.Do(func() {
		var errs []error
		for _, h := range append(append([]*hook(nil), hs.pre...), hs.post...) {
			errs = append(errs, h.tr.close())
		}
		hs.closeErr = errors.Join(errs...)
	})
	return hs.closeErr
}

func hookCallOf(req *baagentv1.ToolInvocationRequest, name, toolName string) *baagentv1.ToolHookCall {
	return &baagentv1.ToolHookCall{
		Hook: name, ToolCallId: req.GetToolCallId(), ToolName: toolName, Tenant: req.GetTenant(),
		ConversationId: req.GetConversationId(), RunId: req.GetRunId(), CallerId: req.GetCallerId(),
	}
}

// runPre runs the pre hooks that apply to toolName in order, each seeing
// the arguments of the one before. It returns the arguments to run with,
// or the failure of the call; err is set only when ctx ended.
func (hs *hookSet) runPre(ctx context.Context, req *baagentv1.ToolInvocationRequest, toolName string, args map[string]any, check func(map[string]any) error) (map[string]any, *tool.Error, error) {
	for _, h := range hs.pre {
		if !h.applies(toolName) {
			continue
		}
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
		v, err := h.tr.pre(hctx, hookCall{call: hookCallOf(req, h.cfg.Name, toolName), args: args})
		timedOut := hctx.Err() != nil || errors.Is(err, errHookDeadline)
		cancel()
		promx.Observe(ctx, hs.m.hookDuration.WithLabelValues(h.cfg.Name, string(HookPre)), time.Since(start).Seconds())
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if err == nil {
			switch v.decision {
			case baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_ALLOW:
				hs.m.hookCalls.WithLabelValues(h.cfg.Name, string(HookPre), "allow").Inc()
				continue
			case baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_DENY:
				hs.m.hookCalls.WithLabelValues(h.cfg.Name, string(HookPre), "deny").Inc()
				reason := boundText(v.reason, maxHookReasonBytes)
				if reason == "" {
					reason = "no reason given"
				}
				hs.log.InfoContext(ctx, "tool call denied by hook", "hook", h.cfg.Name, "tool", toolName, "tool_call_id", req.GetToolCallId(), "reason", reason)
				return nil, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codeHookDenied,
					"%s was denied by the operator's %q hook: %s; nothing was executed", toolName, h.cfg.Name, reason), nil
			case baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE:
				if v.args == nil {
					err = errors.New("REWRITE without arguments")
				} else if verr := check(v.args); verr != nil {
					err = fmt.Errorf("rewritten arguments do not match the tool's schema: %v", verr)
				} else {
					hs.m.hookCalls.WithLabelValues(h.cfg.Name, string(HookPre), "rewrite").Inc()
					hs.log.DebugContext(ctx, "tool call rewritten by hook", "hook", h.cfg.Name, "tool", toolName, "tool_call_id", req.GetToolCallId(), "reason", boundText(v.reason, maxHookReasonBytes))
					args = v.args
					continue
				}
			default:
				err = fmt.Errorf("decision %v is not ALLOW, DENY or REWRITE", v.decision)
			}
		}
		if te := hs.failed(ctx, h, toolName, req, err, timedOut, "the call was not run"); te != nil {
			return nil, te, nil
		}
	}
	return args, nil, nil
}

// runPost runs the post hooks that apply to toolName in order on a
// successful result's data. It returns the data to present and the
// hooks' annotations, or the failure of the call; err is set only when
// ctx ended.
func (hs *hookSet) runPost(ctx context.Context, req *baagentv1.ToolInvocationRequest, toolName string, args map[string]any, data any) (any, []string, *tool.Error, error) {
	var notes []string
	for _, h := range hs.post {
		if !h.applies(toolName) {
			continue
		}
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
		v, err := h.tr.post(hctx, hookCall{call: hookCallOf(req, h.cfg.Name, toolName), args: args, data: hookData(data)})
		timedOut := hctx.Err() != nil || errors.Is(err, errHookDeadline)
		cancel()
		promx.Observe(ctx, hs.m.hookDuration.WithLabelValues(h.cfg.Name, string(HookPost)), time.Since(start).Seconds())
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		if err == nil && len(v.redactions) > maxHookRedactions {
			err = fmt.Errorf("%d redactions, at most %d", len(v.redactions), maxHookRedactions)
		}
		if err != nil {
			if te := hs.failed(ctx, h, toolName, req, err, timedOut, "its result was withheld"); te != nil {
				return nil, nil, te, nil
			}
			continue
		}
		changed := v.replace || len(v.redactions) > 0 || v.annotation != ""
		if v.replace {
			data = v.data
		}
		if len(v.redactions) > 0 {
			data = redact(data, v.redactions)
		}
		if a := boundText(v.annotation, maxHookAnnotationBytes); a != "" {
			notes = append(notes, a)
		}
		outcome := "unchanged"
		if changed {
			outcome = "modified"
		}
		hs.m.hookCalls.WithLabelValues(h.cfg.Name, string(HookPost), outcome).Inc()
	}
	return data, notes, nil, nil
}

// failed accounts for a hook's failure: with on_error: allow it is logged
// and the call goes on (nil); otherwise the call fails with HOOK_FAILED.
func (hs *hookSet) failed(ctx context.Context, h *hook, toolName string, req *baagentv1.ToolInvocationRequest, err error, timedOut bool, consequence string) *tool.Error {
	reason := "error"
	if timedOut {
		reason = "timeout"
		err = fmt.Errorf("no answer within %s", h.cfg.Timeout)
	}
	hs.m.hookCalls.WithLabelValues(h.cfg.Name, string(h.cfg.Phase), "failed").Inc()
	hs.m.hookFailures.WithLabelValues(h.cfg.Name, reason).Inc()
	msg := boundText(err.Error(), maxHookReasonBytes)
	if h.cfg.FailOpen {
		hs.log.WarnContext(ctx, "tool hook failed; call goes on (on_error: allow)", "hook", h.cfg.Name, "phase", string(h.cfg.Phase), "tool", toolName, "tool_call_id", req.GetToolCallId(), "error", msg)
		return nil
	}
	hs.log.WarnContext(ctx, "tool hook failed; call fails", "hook", h.cfg.Name, "phase", string(h.cfg.Phase), "tool", toolName, "tool_call_id", req.GetToolCallId(), "error", msg)
	return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed,
		"the operator's %s hook %q on %s failed (%s), so %s", h.cfg.Phase, h.cfg.Name, toolName, msg, consequence)
}

// hookData is the JSON value a post hook is shown of a tool's data: a
// document is its complete text.
func hookData(data any) any {
	if d, ok := data.(tool.Document); ok {
		return d.Text
	}
	return deepGeneric(data)
}

// deepGeneric is data in the generic JSON shapes all the way down (a map
// of typed rows becomes maps), so that every string in it can be shown
// to a hook and redacted; generic data is returned as it is.
func deepGeneric(data any) any {
	if isGeneric(data) {
		return data
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Sprint(data)
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	return out
}

func isGeneric(v any) bool {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return true
	case []any:
		for _, e := range x {
			if !isGeneric(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !isGeneric(e) {
				return false
			}
		}
		return true
	}
	return false
}

// redact replaces every occurrence of the non-empty strings of rs in the
// strings of data (a document's text, brief and summary) by [REDACTED].
func redact(data any, rs []string) any {
	var pairs []string
	for _, r := range rs {
		if r != "" {
			pairs = append(pairs, r, redactedText)
		}
	}
	if len(pairs) == 0 {
		return data
	}
	rep := strings.NewReplacer(pairs...)
	if d, ok := data.(tool.Document); ok {
		d.Text, d.Brief, d.Summary = rep.Replace(d.Text), rep.Replace(d.Brief), rep.Replace(d.Summary)
		return d
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return rep.Replace(x)
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e)
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = walk(e)
			}
			return out
		}
		return v
	}
	return walk(deepGeneric(data))
}

// boundText makes s valid UTF-8 of at most n bytes.
func boundText(s string, n int) string {
	s = strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// annotate adds the post hooks' notes to res: in hook_annotations, and
// after the observation so that the model reads them, keeping the
// observation within its bound.
func annotate(res *baagentv1.ToolExecutionResult, notes []string, maxBytes int) {
	if len(notes) == 0 {
		return
	}
	res.HookAnnotations = append(res.HookAnnotations, notes...)
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("\n\n(Note: ")
		b.WriteString(n)
		b.WriteString(")")
	}
	tail := b.String()
	obs := res.GetObservation()
	if len(obs)+len(tail) > maxBytes {
		keep := max(maxBytes-len(tail), 0)
		for keep > 0 && keep < len(obs) && !utf8RuneStart(obs[keep]) {
			keep--
		}
		obs = obs[:min(keep, len(obs))]
		res.Truncated = true
	}
	res.Observation = obs + tail
}

// grpcHook is a ToolHookService server.
type grpcHook struct {
	conn   *grpc.ClientConn
	client baagentv1.ToolHookServiceClient
}

func (g *grpcHook) pre(ctx context.Context, c hookCall) (preVerdict, error) {
	params, err := structpb.NewStruct(c.args)
	if err != nil {
		return preVerdict{}, err
	}
	resp, err := g.client.PreToolCall(ctx, &baagentv1.PreToolCallRequest{Call: c.call, Parameters: params})
	if err != nil {
		return preVerdict{}, rpcError(err)
	}
	v := preVerdict{decision: resp.GetDecision(), reason: resp.GetReason()}
	if resp.GetParameters() != nil {
		v.args = resp.GetParameters().AsMap()
	}
	return v, nil
}

func (g *grpcHook) post(ctx context.Context, c hookCall) (postVerdict, error) {
	params, err := structpb.NewStruct(c.args)
	if err != nil {
		return postVerdict{}, err
	}
	data, err := structpb.NewValue(c.data)
	if err != nil {
		return postVerdict{}, fmt.Errorf("result data: %w", err)
	}
	resp, err := g.client.PostToolCall(ctx, &baagentv1.PostToolCallRequest{Call: c.call, Parameters: params, Data: data})
	if err != nil {
		return postVerdict{}, rpcError(err)
	}
	v := postVerdict{redactions: resp.GetRedactions(), annotation: resp.GetAnnotation()}
	if resp.GetData() != nil {
		v.replace, v.data = true, resp.GetData().AsInterface()
	}
	return v, nil
}

func (g *grpcHook) close() error { return g.conn.Close() }

// errHookDeadline is a hook call ended by its deadline as the hook saw
// it: a gRPC server may give up (its copy of the deadline) a moment before
// the client's own context ends.
var errHookDeadline = errors.New("deadline exceeded")

// rpcError is a hook server's error without gRPC's prefix noise.
func rpcError(err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return errHookDeadline
	case codes.Canceled:
		return errors.New(st.Code().String())
	}
	return fmt.Errorf("%s: %s", st.Code(), st.Message())
}
