package toolrunner

import (
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baagent/baagent/internal/validate"
)

// Bounds of the `hooks:` section.
const (
	// DefaultHookTimeout bounds one hook call when its entry sets none.
	DefaultHookTimeout = 2 * time.Second
	// MaxHookTimeout is the longest timeout a hook entry may set.
	MaxHookTimeout = 30 * time.Second
	maxHooks       = 32
	maxHookTools   = 64
	maxHookArgv    = 64
	maxHookName    = 64
)

// HookPhase says when a hook runs.
type HookPhase string

// The hook phases.
const (
	// HookPre runs after the permission and argument checks, before the call.
	HookPre HookPhase = "pre"
	// HookPost runs on a successful result, before it is formatted.
	HookPost HookPhase = "post"
)

// HookConfig is one entry of the tools file's `hooks:` section.
type HookConfig struct {
	// Name identifies the hook in errors, logs and metrics.
	Name string
	// Phase is pre or post.
	Phase HookPhase
	// Tools are glob patterns (path.Match) of the tool names it applies to.
	Tools []string
	// Timeout bounds one call of the hook.
	Timeout time.Duration
	// FailOpen lets the call go on unchanged when the hook fails or times
	// out (`on_error: allow`); by default a failing hook fails the call.
	FailOpen bool
	// Address is the ToolHookService gRPC target of a gRPC hook.
	Address string
	// TLS secures a gRPC hook's connection (off: plaintext).
	TLS HookTLS
	// Command is the argv of a command hook (no shell).
	Command []string
}

type hookYAML struct {
	Name    string        `yaml:"name"`
	Phase   string        `yaml:"phase"`
	Tools   []string      `yaml:"tools"`
	Timeout time.Duration `yaml:"timeout"`
	OnError string        `yaml:"on_error"`
	GRPC    *hookGRPCYAML `yaml:"grpc"`
	Command []string      `yaml:"command"`
}

type hookGRPCYAML struct {
	Address string  `yaml:"address"`
	TLS     HookTLS `yaml:"tls"`
}

// LoadHooks reads the `hooks:` section of a tools file; a missing section
// is no hooks.
func LoadHooks(file string) ([]HookConfig, error) { return loadSection(file, ParseHooks) }

// ParseHooks decodes and checks the `hooks:` section of a tools file.
// Errors name the entry (`hooks[2].phase`).
func ParseHooks(b []byte) ([]HookConfig, error) {
	f, err := decodeToolsFile(b)
	if err != nil {
		return nil, err
	}
	var e validate.Errors
	if len(f.Hooks) > maxHooks {
		e.Addf("hooks", "at most %d hooks, got %d", maxHooks, len(f.Hooks))
		return nil, violations(&e)
	}
	seen := map[string]bool{}
	out := make([]HookConfig, 0, len(f.Hooks))
	for i, h := range f.Hooks {
		field := validate.Index("hooks", i)
		c := HookConfig{Name: h.Name, Phase: HookPhase(h.Phase), Tools: h.Tools, Timeout: h.Timeout, Command: h.Command}
		if !hookNameOK(h.Name) {
			e.Addf(field+".name", "must be 1-%d characters of [A-Za-z0-9_.-], got %q", maxHookName, h.Name)
		}
		if seen[h.Name] {
			e.Addf(field+".name", "%q is used by an earlier hook", h.Name)
		}
		seen[h.Name] = true
		if c.Phase != HookPre && c.Phase != HookPost {
			e.Addf(field+".phase", "must be pre or post, got %q", h.Phase)
		}
		switch {
		case len(h.Tools) == 0:
			e.Add(field+".tools", "required: the tool names or globs the hook applies to (\"*\" for all)")
		case len(h.Tools) > maxHookTools:
			e.Addf(field+".tools", "at most %d patterns, got %d", maxHookTools, len(h.Tools))
		}
		for j, p := range h.Tools {
			validate.ToolPattern(&e, validate.Index(field+".tools", j), p)
		}
		switch {
		case h.Timeout == 0:
			c.Timeout = DefaultHookTimeout
		case h.Timeout < time.Millisecond || h.Timeout > MaxHookTimeout:
			e.Addf(field+".timeout", "must be between 1ms and %s, got %s", MaxHookTimeout, h.Timeout)
		}
		switch h.OnError {
		case "", "deny":
		case "allow":
			c.FailOpen = true
		default:
			e.Addf(field+".on_error", "must be deny or allow, got %q", h.OnError)
		}
		switch {
		case h.GRPC != nil && len(h.Command) > 0:
			e.Add(field, "set either grpc or command, not both")
		case h.GRPC == nil && len(h.Command) == 0:
			e.Add(field, "set grpc: {address} or command: [argv...]")
		case h.GRPC != nil:
			c.Address, c.TLS = h.GRPC.Address, h.GRPC.TLS
			if t := h.GRPC.TLS; !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "") {
				e.Add(field+".grpc.tls.enabled", "must be true when other tls keys are set")
			}
			if t := h.GRPC.TLS; (t.CertFile == "") != (t.KeyFile == "") {
				e.Add(field+".grpc.tls", "set both cert_file and key_file, or neither")
			}
			if c.Address == "" {
				e.Add(field+".grpc.address", "required")
			} else if conn, err := grpc.NewClient(c.Address, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
				e.Addf(field+".grpc.address", "not a gRPC target: %v", err)
			} else {
				_ = conn.Close()
			}
		default:
			if len(h.Command) > maxHookArgv {
				e.Addf(field+".command", "at most %d arguments, got %d", maxHookArgv, len(h.Command))
			}
			if h.Command[0] == "" {
				e.Add(validate.Index(field+".command", 0), "required: the program to run")
			}
			for j, a := range h.Command {
				if strings.ContainsRune(a, 0) {
					e.Add(validate.Index(field+".command", j), "must not contain NUL")
				}
			}
		}
		out = append(out, c)
	}
	if e.Len() > 0 {
		return nil, violations(&e)
	}
	return out, nil
}

// violations joins e's violations into one error.
func violations(e *validate.Errors) error {
	var msgs []string
	for _, v := range e.Violations() {
		msgs = append(msgs, v.GetField()+": "+v.GetDescription())
	}
	return errors.New(strings.Join(msgs, "; "))
}

// hookNameOK reports whether name is a hook name: it becomes a metric label.
func hookNameOK(name string) bool {
	if name == "" || len(name) > maxHookName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
