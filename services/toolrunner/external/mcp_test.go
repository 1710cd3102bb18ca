package external

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// everythingServer locates the third-party MCP test server installed by
// `npm ci --prefix test/mcp`. Without it the MCP tests skip, unless
// BAAGENT_REQUIRE_MCP=1 (as in CI), where they fail.
func everythingServer(t *testing.T) (node, script string) {
	t.Helper()
	script, _ = filepath.Abs("../../../test/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	_, statErr := os.Stat(script)
	node, nodeErr := exec.LookPath("node")
	if statErr == nil && nodeErr == nil {
		return node, script
	}
	msg := "MCP integration test needs node and @modelcontextprotocol/server-everything: run `npm ci --prefix test/mcp`"
	if os.Getenv("BAAGENT_REQUIRE_MCP") == "1" {
		t.Fatalf("%s (BAAGENT_REQUIRE_MCP=1): %v %v", msg, statErr, nodeErr)
	}
	t.Skip(msg)
	return "", ""
}

func callTool(t *testing.T, src tool.Source, name string, args map[string]any) (tool.Result, error) {
	t.Helper()
	tl := toolNamed(src, name)
	if tl == nil {
		t.Fatalf("%s offers no tool %s", src.Name(), name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return tl.Execute(ctx, tool.Call{ToolCallID: "call_" + name, Args: args})
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestMCPStdio runs server-everything as a stdio child: lists and calls its
// tools, kills the child and checks the restart, then checks that stopping
// the manager stops the child.
func TestMCPStdio(t *testing.T) {
	node, script := everythingServer(t)
	t.Setenv("BAAGENT_TEST_SECRET", "must-not-leak")
	cfg := Config{MCPServers: []MCPServerConfig{{
		Name:  "ev",
		Stdio: &StdioConfig{Command: node, Args: []string{script, "stdio"}, Env: map[string]string{"FROM_CONFIG": "yes"}},
	}}}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Sources()[0]
	stop := runManager(t, m)
	testkit.Eventually(t, 30*time.Second, "server-everything's tools", func() bool { return toolNamed(src, "mcp__ev__echo") != nil })

	echo := toolNamed(src, "mcp__ev__echo").Spec()
	if echo.Source != "mcp:ev" || !echo.ReadOnly || echo.Version == "" || echo.Timeout != DefaultMCPTimeout {
		t.Fatalf("echo spec = %+v", echo)
	}
	var schema map[string]any
	if err := json.Unmarshal(echo.Parameters, &schema); err != nil || schema["properties"].(map[string]any)["message"] == nil {
		t.Fatalf("echo parameters = %s", echo.Parameters)
	}

	// The toolrunner validates arguments with jsonschema-go: every published
	// schema (zod's draft-07 output here) must resolve.
	for _, tl := range src.Tools() {
		var s jsonschema.Schema
		err := json.Unmarshal(tl.Spec().Parameters, &s)
		if err == nil {
			_, err = s.Resolve(nil)
		}
		if err != nil {
			t.Errorf("%s: parameters %s do not resolve: %v", tl.Spec().Name, tl.Spec().Parameters, err)
		}
	}

	res, err := callTool(t, src, "mcp__ev__echo", map[string]any{"message": "hello"})
	if err != nil || res.Data != "Echo: hello" {
		t.Fatalf("echo: %#v, %v", res.Data, err)
	}
	res, err = callTool(t, src, "mcp__ev__get-sum", map[string]any{"a": 2.0, "b": 3.0})
	if err != nil || !strings.Contains(res.Data.(string), "is 5") {
		t.Fatalf("get-sum: %#v, %v", res.Data, err)
	}
	res, err = callTool(t, src, "mcp__ev__get-structured-content", map[string]any{"location": "New York"})
	if m, ok := res.Data.(map[string]any); err != nil || !ok || len(m) == 0 {
		t.Fatalf("get-structured-content should return its structured content: %#v, %v", res.Data, err)
	}
	res, err = callTool(t, src, "mcp__ev__get-env", nil)
	if err != nil {
		t.Fatal(err)
	}
	if env := res.Data.(string); strings.Contains(env, "must-not-leak") || !strings.Contains(env, "FROM_CONFIG") {
		t.Fatalf("child environment: secret leaked or configured variable missing:\n%s", env)
	}
	// Bad arguments are the tool's failure, not retried.
	_, err = callTool(t, src, "mcp__ev__get-sum", map[string]any{"a": "two"})
	if te := tool.Classify(err); err == nil || tool.Retryable(te.Type) || te.Message == "" {
		t.Fatalf("bad arguments: %+v", te)
	}

	// Kill the child: its tools are withdrawn, then it is restarted.
	pid := m.mcps[0].childPID()
	if pid == 0 {
		t.Fatal("no child pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the tools to be withdrawn", func() bool { return len(src.Tools()) == 0 || m.mcps[0].childPID() != pid })
	testkit.Eventually(t, 30*time.Second, "the server to be restarted", func() bool {
		return m.mcps[0].childPID() != 0 && m.mcps[0].childPID() != pid && toolNamed(src, "mcp__ev__echo") != nil
	})
	if r := gauge(t, m, "restarts", "mcp:ev"); r != 1 {
		t.Fatalf("restarts = %v, want 1", r)
	}
	res, err = callTool(t, src, "mcp__ev__echo", map[string]any{"message": "again"})
	if err != nil || res.Data != "Echo: again" {
		t.Fatalf("echo after restart: %#v, %v", res.Data, err)
	}
	if !processGone(pid) {
		t.Fatalf("killed child %d still exists", pid)
	}

	// Shutdown stops the child and withdraws the tools.
	pid = m.mcps[0].childPID()
	stop()
	if !processGone(pid) {
		t.Fatalf("child %d still runs after Run returned", pid)
	}
	if len(src.Tools()) != 0 || gauge(t, m, "up", "mcp:ev") != 0 {
		t.Fatal("tools still offered after shutdown")
	}
}

// TestMCPStdioBadCommand checks that a server that cannot start is retried
// with backoff and counted, and offers nothing.
func TestMCPStdioBadCommand(t *testing.T) {
	t.Parallel()

	cfg := Config{MCPServers: []MCPServerConfig{
		{Name: "broken", Stdio: &StdioConfig{Command: filepath.Join(t.TempDir(), "no-such-server")}},
		{Name: "exits", Stdio: &StdioConfig{Command: "/bin/sh", Args: []string{"-c", "echo not an MCP server >&2; exit 3"}}},
	}}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	testkit.Eventually(t, 10*time.Second, "several failed starts", func() bool {
		return gauge(t, m, "list_failures", "mcp:broken") >= 3 && gauge(t, m, "list_failures", "mcp:exits") >= 3
	})
	for _, src := range m.Sources() {
		if len(src.Tools()) != 0 {
			t.Fatalf("%s never started but offers tools", src.Name())
		}
	}
}

// TestMCPStreamableHTTP runs server-everything's streamable HTTP transport
// in its own process, calls a tool through it, stops the server and checks
// that the tools are withdrawn and come back when it returns.
func TestMCPStreamableHTTP(t *testing.T) {
	t.Parallel()

	node, script := everythingServer(t)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	start := func() (kill func()) {
		cmd := exec.Command(node, script, "streamableHttp")
		cmd.Env = append(os.Environ(), "PORT="+port)
		cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := false
		kill = func() {
			if !done {
				done = true
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
		t.Cleanup(kill)
		testkit.Eventually(t, 30*time.Second, "the HTTP server to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		return kill
	}
	kill := start()

	cfg, err := Parse([]byte("mcp_servers:\n - name: web\n   http: {url: 'http://"+addr+"/mcp', headers: {X-Test: yes}}\n   tools: [echo, get-sum]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff, KeepAlive: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Sources()[0]
	runManager(t, m)
	testkit.Eventually(t, 30*time.Second, "the HTTP server's tools", func() bool { return len(src.Tools()) == 2 })
	res, err := callTool(t, src, "mcp__web__echo", map[string]any{"message": "over http"})
	if err != nil || res.Data != "Echo: over http" {
		t.Fatalf("echo: %#v, %v", res.Data, err)
	}

	kill()
	testkit.Eventually(t, 30*time.Second, "the tools to be withdrawn", func() bool { return len(src.Tools()) == 0 })
	start()
	testkit.Eventually(t, 30*time.Second, "the tools to come back", func() bool { return len(src.Tools()) == 2 })
	res, err = callTool(t, src, "mcp__web__get-sum", map[string]any{"a": 1.0, "b": 1.0})
	if err != nil || !strings.Contains(res.Data.(string), "is 2") {
		t.Fatalf("get-sum after restart: %#v, %v", res.Data, err)
	}
	if te := tool.Classify(unavailable("mcp:web")); te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RESOURCE_ERROR {
		t.Fatal(te)
	}
}
