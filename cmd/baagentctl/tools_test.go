package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/toolrunner"
)

// toolsCLI runs `baagentctl tools ARGS` against a toolrunner on loopback
// seeded with the sample dataset.
func toolsCLI(t *testing.T) func(args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := toolrunner.New(toolrunner.Options{
		Logger:           slog.New(slog.DiscardHandler),
		WorkspaceDir:     filepath.Join(dir, "ws"),
		ArtifactDir:      filepath.Join(dir, "art"),
		WorkspaceSeedDir: filepath.Join("..", "..", "examples", "data"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { s.Register(gs) })
	return func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		argv := append([]string{"--toolrunner-addr", conn.Target(), "tools"}, args...)
		code := run(ctx, argv, strings.NewReader(""), &out, &errOut, func(string) string { return "" })
		return code, out.String(), errOut.String()
	}
}

func TestToolsList(t *testing.T) {
	t.Parallel()

	ctl := toolsCLI(t)
	code, out, errOut := ctl("list")
	if code != 0 || !strings.HasPrefix(out, "NAME") || !strings.Contains(out, "sql_query") || !strings.Contains(out, "builtin") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	code, out, _ = ctl("list", "--json", "--allowed", "file_*")
	var resp struct {
		Tools []struct {
			Schema struct{ Name string } `json:"schema"`
		} `json:"tools"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || len(resp.Tools) != 4 {
		t.Fatalf("list --json --allowed: %d %q", code, out)
	}
}

func TestToolsInvoke(t *testing.T) {
	t.Parallel()

	ctl := toolsCLI(t)
	code, out, errOut := ctl("invoke", "sql_query", "--args", `{"query":"SELECT COUNT(*) AS n FROM products"}`)
	if code != 0 || !strings.Contains(out, "| n |") || !strings.Contains(out, "| 30 |") {
		t.Fatalf("invoke: %d %q %q", code, out, errOut)
	}
	// Flags before NAME, a named conversation, machine-readable output.
	code, out, _ = ctl("invoke", "--conversation", "c2", "--json", "--tool-call-id", "call_7", "file_write", "--args", `{"path":"a.txt","content":"x"}`)
	if code != 0 || !strings.Contains(out, `"tool_call_id":"call_7"`) || !strings.Contains(out, `"success":true`) {
		t.Fatalf("invoke --json: %d %q", code, out)
	}
	if code, out, _ = ctl("invoke", "file_read", "--args", `{"path":"a.txt"}`); code != 1 || !strings.Contains(out, "FILE_NOT_FOUND") {
		t.Fatalf("other conversation's file (default conversation cli): %d %q", code, out)
	}
	if code, out, _ = ctl("invoke", "file_read", "--conversation", "c2", "--args", `{"path":"a.txt"}`); code != 0 || !strings.Contains(out, "1\tx") {
		t.Fatalf("same conversation: %d %q", code, out)
	}
	if code, out, _ = ctl("invoke", "no_such_tool"); code != 1 || !strings.HasPrefix(out, "Operation failed.") {
		t.Fatalf("failed tool exit status: %d %q", code, out)
	}
	if code, _, _ := ctl("invoke", "sql_query", "--args", "not json"); code != 2 {
		t.Fatalf("bad --args: %d", code)
	}
	if code, _, _ := ctl("invoke"); code != 2 {
		t.Fatalf("missing NAME: %d", code)
	}
	if code, _, _ := ctl(); code != 2 {
		t.Fatalf("no subcommand: %d", code)
	}
}
