package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// Limits of a composition (docs/concepts/tool-composition.md).
const (
	MaxCompositionSteps = 5
	MaxStepFallbacks    = 3
	// compositionSource is ToolDefinition.source of a composition.
	compositionSource = "composition"
)

// CompositionKind is how a composition runs its steps.
type CompositionKind string

// The kinds of composition.
const (
	Sequential  CompositionKind = "sequential"
	Parallel    CompositionKind = "parallel"
	Conditional CompositionKind = "conditional"
)

// Composition is a named composition of tools offered to the model as one
// tool.
type Composition struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the composition's arguments.
	InputSchema json.RawMessage
	Kind        CompositionKind
	Steps       []Step
}

// Step is one tool call of a composition.
type Step struct {
	Tool string
	// Args is the argument template: JSON values whose strings starting
	// with `$` are selectors (`$$` escapes a literal `$`).
	Args map[string]any
	// Fallback tools are tried in order, with the same arguments, when the
	// step's tool fails.
	Fallback []string
	// When (conditional compositions, steps after the first) selects the
	// branch: the first step whose predicate holds on step 0's result runs.
	// Nil is the default branch.
	When *Predicate
}

// Predicate compares a value of the previous result with a constant.
type Predicate struct {
	Path   string
	Equals any
	sel    selector
}

func (p *Predicate) holds(doc any) bool {
	v, err := p.sel.eval(doc)
	return err == nil && reflect.DeepEqual(v, p.Equals)
}

type compositionYAML struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	InputSchema map[string]any `yaml:"input_schema"`
	Kind        string         `yaml:"kind"`
	Steps       []stepYAML     `yaml:"steps"`
}

type stepYAML struct {
	Tool     string         `yaml:"tool"`
	Args     map[string]any `yaml:"args"`
	Fallback []string       `yaml:"fallback"`
	When     *whenYAML      `yaml:"when"`
}

type whenYAML struct {
	Path   string `yaml:"path"`
	Equals any    `yaml:"equals"`
}

// LoadCompositions reads the `compositions:` section of a tools file.
func LoadCompositions(file string) ([]Composition, error) {
	return loadSection(file, ParseCompositions)
}

// ParseCompositions decodes and checks the `compositions:` section; an
// error names every faulty entry by index and name.
func ParseCompositions(b []byte) ([]Composition, error) {
	f, err := decodeToolsFile(b)
	if err != nil {
		return nil, err
	}
	var e validate.Errors
	names := map[string]bool{}
	for _, c := range f.Compositions {
		names[c.Name] = true
	}
	seen := map[string]bool{}
	var out []Composition
	for i, cy := range f.Compositions {
		field := fmt.Sprintf("compositions[%d]", i)
		if cy.Name != "" {
			field = fmt.Sprintf("compositions[%d] (%s)", i, cy.Name)
		}
		validate.ToolName(&e, field+".name", cy.Name)
		if seen[cy.Name] {
			e.Addf(field+".name", "%q is defined twice", cy.Name)
		}
		seen[cy.Name] = true
		if strings.TrimSpace(cy.Description) == "" {
			e.Add(field+".description", "required: the model chooses tools by their descriptions")
		}
		c := Composition{Name: cy.Name, Description: cy.Description, Kind: CompositionKind(cy.Kind)}
		schema := cy.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		if raw, err := json.Marshal(schema); err != nil {
			e.Addf(field+".input_schema", "not a JSON object: %v", err)
		} else if _, err := newSchemaCache(1).get(raw); err != nil {
			e.Addf(field+".input_schema", "%v", err)
		} else {
			c.InputSchema = raw
		}
		switch c.Kind {
		case Sequential, Parallel:
		case Conditional:
			if len(cy.Steps) < 2 {
				e.Add(field+".steps", "a conditional composition needs a first step and at least one branch")
			}
		default:
			e.Addf(field+".kind", "must be one of sequential, parallel, conditional, got %q", cy.Kind)
		}
		switch {
		case len(cy.Steps) == 0:
			e.Add(field+".steps", "required: at least one step")
		case len(cy.Steps) > MaxCompositionSteps:
			e.Addf(field+".steps", "at most %d steps, got %d", MaxCompositionSteps, len(cy.Steps))
		}
		for j, sy := range cy.Steps {
			c.Steps = append(c.Steps, parseStep(&e, validate.Index(field+".steps", j), c.Kind, j, sy, names))
		}
		out = append(out, c)
	}
	if e.Len() > 0 {
		var msgs []string
		for _, v := range e.Violations() {
			msgs = append(msgs, v.GetField()+": "+v.GetDescription())
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return out, nil
}

func parseStep(e *validate.Errors, field string, kind CompositionKind, j int, sy stepYAML, compositions map[string]bool) Step {
	st := Step{Tool: sy.Tool, Fallback: sy.Fallback}
	toolName := func(f, name string) {
		validate.ToolName(e, f, name)
		if compositions[name] {
			e.Addf(f, "%q is a composition; compositions do not nest", name)
		}
	}
	toolName(field+".tool", sy.Tool)
	if len(sy.Fallback) > MaxStepFallbacks {
		e.Addf(field+".fallback", "at most %d fallback tools, got %d", MaxStepFallbacks, len(sy.Fallback))
	}
	for k, f := range sy.Fallback {
		toolName(validate.Index(field+".fallback", k), f)
	}
	if sy.Args != nil {
		args, err := jsonValue(sy.Args)
		if err != nil {
			e.Addf(field+".args", "not JSON: %v", err)
		} else {
			st.Args = args.(map[string]any)
		}
	}
	walkArgs(st.Args, field+".args", func(f, text string) {
		sel, err := parseSelector(text)
		if err != nil {
			e.Addf(f, "%s: %v", text, err)
			return
		}
		switch sel.root {
		case rootPrevious:
			e.Addf(f, "%s: arguments select from $input or $steps[n]; $ alone is for predicates", text)
		case rootStep:
			switch {
			case kind == Parallel:
				e.Addf(f, "%s: parallel steps run at once and cannot use each other's results", text)
			case kind == Conditional && (j == 0 || sel.step != 0):
				e.Addf(f, "%s: in a conditional composition only the branches may use a result, that of $steps[0]", text)
			case sel.step >= j:
				e.Addf(f, "%s: step %d can only use the results of the steps before it", text, j)
			}
		}
	})
	if w := sy.When; w != nil {
		if kind != Conditional || j == 0 {
			e.Add(field+".when", "only the branches (steps after the first) of a conditional composition have a predicate")
		}
		sel, err := parseSelector(w.Path)
		switch {
		case err != nil:
			e.Addf(field+".when.path", "%s: %v", w.Path, err)
		case sel.root != rootPrevious:
			e.Addf(field+".when.path", "%s: a predicate selects from the previous result, `$`", w.Path)
		}
		eq, err := jsonValue(w.Equals)
		if err != nil {
			e.Addf(field+".when.equals", "not JSON: %v", err)
		}
		st.When = &Predicate{Path: w.Path, Equals: eq, sel: sel}
	}
	return st
}

// jsonValue converts a YAML value to the generic JSON shapes (float64
// numbers, map[string]any objects).
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// compositions holds the configured compositions by name.
type compositions map[string]*Composition

func (c *Composition) spec(readOnly bool) tool.Spec {
	return tool.Spec{Name: c.Name, Description: c.Description, Parameters: c.InputSchema, ReadOnly: readOnly, Source: compositionSource}
}

// compositionReadOnly reports whether every tool a composition may call is read-only
// now (a missing tool counts as not read-only).
func (s *Server) compositionReadOnly(c *Composition) bool {
	for _, st := range c.Steps {
		for _, name := range append([]string{st.Tool}, st.Fallback...) {
			t, ok := s.tools.lookup(name)
			if !ok || !t.Spec().ReadOnly {
				return false
			}
		}
	}
	return true
}

// captureKey carries a *capture into an inner call, so that run hands the
// tool's raw data back to the composition for the later steps' selectors.
type captureKey struct{}

type capture struct {
	data any
	ok   bool
}

func captured(ctx context.Context, data any) {
	if c, _ := ctx.Value(captureKey{}).(*capture); c != nil {
		c.data, c.ok = data, true
	}
}

// stepOutcome is what one step produced: its result document (for
// selectors and predicates), the calls made, and the result that counts.
type stepOutcome struct {
	doc   map[string]any
	res   *baagentv1.ToolExecutionResult
	calls []*baagentv1.InnerToolCall
	// mapErr is set when the arguments could not be built; nothing ran.
	mapErr error
}

// invokeComposition runs a composition: the composition's own permission
// and argument checks, then every step through invoke (the whole
// pipeline), the inner calls reported in the result.
func (s *Server) invokeComposition(ctx context.Context, req *baagentv1.ToolInvocationRequest, c *Composition) (*baagentv1.ToolExecutionResult, error) {
	start := time.Now()
	spec := c.spec(false)
	pol := s.policies.resolve(spec)
	res := &baagentv1.ToolExecutionResult{ToolCallId: req.GetToolCallId(), OutputLevel: req.GetOutputLevel()}
	finish := func() (*baagentv1.ToolExecutionResult, error) {
		s.record(ctx, c.Name, res, start)
		outcome := "success"
		switch {
		case res.GetApprovalRequired():
			outcome = "approval_required"
		case !res.GetSuccess():
			outcome = "error"
		}
		s.metrics.compositions.WithLabelValues(c.Name, outcome).Inc()
		s.log.DebugContext(ctx, "composition run", "composition", c.Name, "kind", string(c.Kind), "tool_call_id", req.GetToolCallId(),
			"outcome", outcome, "inner_calls", len(res.GetInnerCalls()), "error_code", res.GetErrorCode())
		return res, nil
	}
	input := req.GetParameters().AsMap()
	if schema, err := s.tools.schemas.get(c.InputSchema); err == nil && schema != nil {
		if err := schema.Validate(input); err != nil {
			fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "INVALID_ARGUMENTS", "%s: %v", c.Name, err))
			return finish()
		}
	}
	if !allowedBy(req.GetAllowedTools(), c.Name) {
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "TOOL_NOT_ALLOWED",
			"%s is not among the tools allowed in this context", c.Name))
		return finish()
	}
	switch pol.permission {
	case baagentv1.ToolPermission_TOOL_PERMISSION_DENY:
		fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "TOOL_DENIED",
			"%s is disabled by the operator's policy", c.Name))
		return finish()
	case baagentv1.ToolPermission_TOOL_PERMISSION_ASK:
		if !req.GetApproved() {
			res.ApprovalRequired = true
			fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "APPROVAL_REQUIRED",
				"%s needs the user's approval before it runs; nothing was executed", c.Name))
			return finish()
		}
	}

	var outs []*stepOutcome
	var err error
	switch c.Kind {
	case Parallel:
		outs, err = s.composeParallel(ctx, req, c, input)
	case Conditional:
		outs, err = s.composeConditional(ctx, req, c, input)
	default:
		outs, err = s.composeSequential(ctx, req, c, input)
	}
	if err != nil {
		return nil, err // the caller went away
	}
	s.composedResult(res, c, outs)
	return finish()
}

func (s *Server) composeSequential(ctx context.Context, req *baagentv1.ToolInvocationRequest, c *Composition, input map[string]any) ([]*stepOutcome, error) {
	var outs []*stepOutcome
	for i := range c.Steps {
		o, err := s.runStep(ctx, req, c, i, input, outs)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
		if !o.ok() {
			break
		}
	}
	return outs, nil
}

func (s *Server) composeParallel(ctx context.Context, req *baagentv1.ToolInvocationRequest, c *Composition, input map[string]any) ([]*stepOutcome, error) {
	outs := make([]*stepOutcome, len(c.Steps))
	errs := make([]error, len(c.Steps))
	var wg sync.WaitGroup
	for i := range c.Steps {
		wg.Go(func() { outs[i], errs[i] = s.runStep(ctx, req, c, i, input, nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return outs, nil
}

// composeConditional runs step 0, then the first branch whose predicate
// holds on its result (a branch without one is the default); with no
// branch taken the composition's result is step 0's.
func (s *Server) composeConditional(ctx context.Context, req *baagentv1.ToolInvocationRequest, c *Composition, input map[string]any) ([]*stepOutcome, error) {
	first, err := s.runStep(ctx, req, c, 0, input, nil)
	if err != nil || !first.ok() {
		return []*stepOutcome{first}, err
	}
	outs := []*stepOutcome{first}
	for i := 1; i < len(c.Steps); i++ {
		if w := c.Steps[i].When; w != nil && !w.holds(first.doc) {
			continue
		}
		o, err := s.runStep(ctx, req, c, i, input, outs)
		if err != nil {
			return nil, err
		}
		return append(outs, o), nil
	}
	return outs, nil
}

func (o *stepOutcome) ok() bool { return o.mapErr == nil && o.res.GetSuccess() }

// runStep builds a step's arguments and calls its tool, then its fallbacks
// while the call fails (but not for a call that awaits approval: another
// tool would sidestep the user's decision).
func (s *Server) runStep(ctx context.Context, req *baagentv1.ToolInvocationRequest, c *Composition, i int, input map[string]any, prev []*stepOutcome) (*stepOutcome, error) {
	st := c.Steps[i]
	o := &stepOutcome{}
	mapped, err := mapArgs(st.Args, func(sel selector) (any, error) {
		switch sel.root {
		case rootInput:
			return sel.eval(input)
		case rootStep:
			if sel.step >= len(prev) || prev[sel.step] == nil {
				return nil, fmt.Errorf("%s: step %d has not run", sel, sel.step)
			}
			return sel.eval(prev[sel.step].doc)
		}
		return nil, fmt.Errorf("%s: not allowed in arguments", sel)
	})
	var args *structpb.Struct
	if err == nil {
		m, _ := mapped.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		args, err = structpb.NewStruct(m)
	}
	if err != nil {
		o.mapErr = err
		return o, nil
	}
	id := fmt.Sprintf("%s/s%d", req.GetToolCallId(), i)
	for k, name := range append([]string{st.Tool}, st.Fallback...) {
		callID := id
		if k > 0 {
			callID = fmt.Sprintf("%s/f%d", id, k)
		}
		inner := &baagentv1.ToolInvocationRequest{
			ToolCallId: callID, ToolName: name, Parameters: args,
			CallerId: req.GetCallerId(), Tenant: req.GetTenant(), ConversationId: req.GetConversationId(), RunId: req.GetRunId(),
			ContextUsage: req.GetContextUsage(), AllowedTools: req.GetAllowedTools(), Approved: req.GetApproved(),
			OutputLevel: req.GetOutputLevel(), StorageDir: req.GetStorageDir(), PermissionLevel: req.GetPermissionLevel(),
			// Every step runs afresh, so that its data is there for the
			// steps after it: the result cache keeps observations only.
			CachePolicy: baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_NO_CACHE,
		}
		if k := req.GetIdempotencyKey(); k != "" {
			inner.IdempotencyKey = k + strings.TrimPrefix(callID, req.GetToolCallId())
		}
		cp := &capture{}
		r, err := s.invoke(context.WithValue(ctx, captureKey{}, cp), inner)
		if err != nil {
			return nil, err
		}
		o.res = r
		o.calls = append(o.calls, &baagentv1.InnerToolCall{ToolCallId: callID, ToolName: name, Arguments: args, Result: r})
		o.doc = stepDoc(r, cp)
		if r.GetSuccess() || r.GetApprovalRequired() {
			break
		}
	}
	return o, nil
}

// stepDoc is the document a step's selectors see.
func stepDoc(r *baagentv1.ToolExecutionResult, cp *capture) map[string]any {
	doc := map[string]any{
		"success":     r.GetSuccess(),
		"observation": r.GetObservation(),
		"error_code":  r.GetErrorCode(),
		"error_type":  strings.ToLower(strings.TrimPrefix(r.GetErrorType().String(), "TOOL_ERROR_TYPE_")),
		"artifact_id": r.GetArtifactId(),
	}
	if cp.ok {
		if d, err := jsonValue(cp.data); err == nil {
			doc["data"] = d
		}
	}
	return doc
}

// composedResult fills res from the steps' outcomes: one section per step
// that ran, success when every step that ran succeeded.
func (s *Server) composedResult(res *baagentv1.ToolExecutionResult, c *Composition, outs []*stepOutcome) {
	var b strings.Builder
	var failed *stepOutcome
	failedAt := -1
	for i, o := range outs {
		res.InnerCalls = append(res.InnerCalls, o.calls...)
		if o.res != nil && o.res.GetApprovalRequired() {
			res.ApprovalRequired = true
		}
		if !o.ok() && failed == nil {
			failed, failedAt = o, i
		}
		if o.res != nil {
			res.RetryCount += o.res.GetRetryCount()
		}
	}
	for i, o := range outs {
		name := c.Steps[i].Tool
		if n := len(o.calls); n > 0 {
			name = o.calls[n-1].GetToolName()
		}
		state := "ok"
		body := ""
		switch {
		case o.mapErr != nil:
			state, body = "not run", "The arguments could not be built: "+o.mapErr.Error()
		case !o.res.GetSuccess():
			state, body = "failed", o.res.GetObservation()
		default:
			body = o.res.GetObservation()
		}
		fmt.Fprintf(&b, "## Step %d of %d: %s (%s)\n%s\n\n", i+1, len(c.Steps), name, state, body)
	}
	sections := strings.TrimSuffix(b.String(), "\n\n")
	if failed != nil {
		switch {
		case failed.mapErr != nil:
			fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "COMPOSITION_MAPPING_FAILED",
				"%s: step %d (%s): %v", c.Name, failedAt+1, c.Steps[failedAt].Tool, failed.mapErr))
		default:
			te := tool.Errorf(failed.res.GetErrorType(), "COMPOSITION_STEP_FAILED", "%s: step %d (%s) failed with %s: %s",
				c.Name, failedAt+1, c.Steps[failedAt].Tool, failed.res.GetErrorCode(), failed.res.GetErrorMessage())
			fail(res, te)
		}
		sections = res.GetObservation() + "\n\n" + sections
	} else {
		res.Success = true
	}
	if len(sections) > truncate.MaxOutputBytes {
		hint := fmt.Sprintf("\n\n(Output truncated at %d bytes; each step's own result is in its observe event.)", truncate.MaxOutputBytes)
		sections, _ = truncate.Bytes(sections, truncate.MaxOutputBytes-len(hint))
		sections += hint
		res.Truncated = true
	}
	res.Observation = strings.ToValidUTF8(sections, "\uFFFD")
}
