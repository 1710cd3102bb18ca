package toolrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Bounds of command hooks.
const (
	// maxHookOutputBytes bounds what a command hook may print on stdout.
	maxHookOutputBytes = 4 << 20
	// maxHookStderrBytes is how much of its stderr is kept for the error.
	maxHookStderrBytes = 2 << 10
	// maxHookProcesses bounds the processes of one command hook running
	// at once; a call waits for a slot within the hook's timeout.
	maxHookProcesses = 16
	// hookWaitDelay is how long Wait waits for the pipes after the process
	// was killed (a grandchild may hold them).
	hookWaitDelay = time.Second
)

// commandHookInput is the JSON a command hook reads on stdin.
type commandHookInput struct {
	Phase          HookPhase      `json:"phase"`
	Hook           string         `json:"hook"`
	ToolCallID     string         `json:"tool_call_id"`
	ToolName       string         `json:"tool_name"`
	Tenant         string         `json:"tenant"`
	ConversationID string         `json:"conversation_id"`
	RunID          string         `json:"run_id,omitempty"`
	CallerID       string         `json:"caller_id,omitempty"`
	Arguments      map[string]any `json:"arguments"`
	Data           any            `json:"data,omitempty"`
}

// commandPreOutput is the JSON a pre command hook prints on stdout.
type commandPreOutput struct {
	Decision  string          `json:"decision"`
	Reason    string          `json:"reason"`
	Arguments json.RawMessage `json:"arguments"`
}

// commandPostOutput is the JSON a post command hook prints on stdout.
type commandPostOutput struct {
	Data       json.RawMessage `json:"data"`
	Redactions []string        `json:"redactions"`
	Annotation string          `json:"annotation"`
}

// commandHook runs a program (no shell) per call: the call as JSON on
// stdin, the verdict as JSON on stdout. The program is killed, with its
// process group, when the hook's timeout passes.
type commandHook struct {
	argv  []string
	slots chan struct{}
}

func newCommandHook(argv []string) *commandHook {
	return &commandHook{argv: append([]string(nil), argv...), slots: make(chan struct{}, maxHookProcesses)}
}

func (c *commandHook) close() error { return nil }

func (c *commandHook) pre(ctx context.Context, call hookCall) (preVerdict, error) {
	out, err := c.exchange(ctx, commandInput(HookPre, call))
	if err != nil {
		return preVerdict{}, err
	}
	return parseCommandPre(out)
}

func (c *commandHook) post(ctx context.Context, call hookCall) (postVerdict, error) {
	out, err := c.exchange(ctx, commandInput(HookPost, call))
	if err != nil {
		return postVerdict{}, err
	}
	return parseCommandPost(out)
}

func commandInput(p HookPhase, c hookCall) commandHookInput {
	in := commandHookInput{
		Phase: p, Hook: c.call.GetHook(), ToolCallID: c.call.GetToolCallId(), ToolName: c.call.GetToolName(),
		Tenant: c.call.GetTenant(), ConversationID: c.call.GetConversationId(), RunID: c.call.GetRunId(),
		CallerID: c.call.GetCallerId(), Arguments: c.args, Data: c.data,
	}
	if in.Arguments == nil {
		in.Arguments = map[string]any{}
	}
	return in
}

// exchange runs the program once with in on stdin and returns its stdout.
func (c *commandHook) exchange(ctx context.Context, in commandHookInput) ([]byte, error) {
	stdin, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encoding the call: %w", err)
	}
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return nil, errors.New("no free process slot")
	}
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	// Only PATH: the toolrunner's environment holds its own secrets.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdout := &boundedBuffer{max: maxHookOutputBytes}
	stderr := &boundedBuffer{max: maxHookStderrBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	hookProcessGroup(cmd)
	cmd.WaitDelay = hookWaitDelay
	err = cmd.Run()
	hookKillGroup(cmd)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return nil, fmt.Errorf("%s: %v: %s", c.argv[0], err, msg)
		}
		return nil, fmt.Errorf("%s: %v", c.argv[0], err)
	}
	if stdout.overflow {
		return nil, fmt.Errorf("%s: output exceeds %d bytes", c.argv[0], maxHookOutputBytes)
	}
	return stdout.Bytes(), nil
}

// boundedBuffer keeps the first max bytes written to it and drops the
// rest, so that a chatty program neither blocks nor grows memory.
type boundedBuffer struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.overflow = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// keys (a misspelt key must not read as "allow").
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("no JSON on stdout")
		}
		return fmt.Errorf("stdout is not the hook's JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("stdout has more than one JSON value")
	}
	return nil
}

// parseCommandPre reads a pre command hook's stdout.
func parseCommandPre(b []byte) (preVerdict, error) {
	var o commandPreOutput
	if err := decodeStrict(b, &o); err != nil {
		return preVerdict{}, err
	}
	v := preVerdict{reason: o.Reason}
	switch strings.ToLower(o.Decision) {
	case "allow":
		v.decision = baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_ALLOW
	case "deny":
		v.decision = baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_DENY
	case "rewrite":
		v.decision = baagentv1.ToolHookDecision_TOOL_HOOK_DECISION_REWRITE
		if len(o.Arguments) == 0 || string(o.Arguments) == "null" {
			return preVerdict{}, errors.New(`"rewrite" needs "arguments"`)
		}
		if err := json.Unmarshal(o.Arguments, &v.args); err != nil {
			return preVerdict{}, fmt.Errorf(`"arguments" must be a JSON object: %v`, err)
		}
		if v.args == nil {
			return preVerdict{}, errors.New(`"arguments" must be a JSON object`)
		}
	default:
		return preVerdict{}, fmt.Errorf(`"decision" must be allow, deny or rewrite, got %q`, boundText(o.Decision, 64))
	}
	return v, nil
}

// parseCommandPost reads a post command hook's stdout; a missing "data"
// keeps the result's data, `"data": null` replaces it with null.
func parseCommandPost(b []byte) (postVerdict, error) {
	var o commandPostOutput
	if err := decodeStrict(b, &o); err != nil {
		return postVerdict{}, err
	}
	v := postVerdict{redactions: o.Redactions, annotation: o.Annotation}
	if len(o.Data) > 0 {
		v.replace = true
		if err := json.Unmarshal(o.Data, &v.data); err != nil {
			return postVerdict{}, fmt.Errorf(`"data": %v`, err)
		}
	}
	return v, nil
}
