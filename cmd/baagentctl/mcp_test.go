package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMCPCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte(strings.Repeat("0f", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(dir, "tools.yaml")
	// Nothing listens on port 1: authorizing fails at discovery.
	if err := os.WriteFile(tools, []byte("mcp_servers:\n  - name: linear\n    http: {url: \"http://127.0.0.1:1/mcp\"}\n    auth: oauth\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, "../../examples/scenarios", "-api-keys=mcp-test-key-0123456789=acme", "-tools-file="+tools,
		"-mcp-oauth-key-file="+key, "-mcp-oauth-redirect-url=http://127.0.0.1:9/v1/mcp/oauth/callback")
	addr := "--addr=" + a.Addr("gateway").String()
	k := "--api-key=mcp-test-key-0123456789"

	code, stdout, stderr := ctl(t, addr, k, "mcp", "status", "linear")
	if code != 0 || !strings.Contains(stdout, "linear: not authorized (run: baagentctl mcp authorize linear)") {
		t.Fatalf("status: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = ctl(t, addr, k, "mcp", "revoke", "linear")
	if code != 0 || !strings.Contains(stdout, "there was no authorization") {
		t.Fatalf("revoke: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = ctl(t, addr, k, "mcp", "authorize", "github")
	if code != 1 || !strings.Contains(stderr, "NotFound") {
		t.Fatalf("authorize unknown: exit %d %s", code, stderr)
	}
	code, _, stderr = ctl(t, addr, k, "mcp", "authorize", "linear")
	if code != 1 || !strings.Contains(stderr, "protected resource metadata") || !strings.Contains(stderr, "Unavailable") {
		t.Fatalf("authorize unreachable: exit %d %s", code, stderr)
	}
	if code, _, _ := ctl(t, addr, k, "mcp", "status"); code != 2 {
		t.Fatalf("status without a server: exit %d, want 2", code)
	}
	if code, _, _ := ctl(t, addr, "mcp", "status", "linear"); code != 1 {
		t.Fatalf("status without a key: exit %d, want 1", code)
	}
}
