// Package chatapi drives the gateway's OpenAI-compatible Chat Completions
// and AI SDK UI message stream with the official clients: the whole suite
// runs in-process (-target=all with the scripted model) and chat.mjs uses
// the `openai` and `ai` npm packages against it.
package chatapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/suite"
)

// requireEnv makes missing Node dependencies a failure instead of a skip
// (make test sets it once it has installed them).
const requireEnv = "BAAGENT_REQUIRE_CHATAPI"

// The suite's API key and model.
const (
	apiKey = "chatapi-key-0123456789"
	model  = "gpt-4o"
)

func TestOfficialClients(t *testing.T) {
	node := nodeDeps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	base := startSuite(ctx, t)
	// chat.mjs asks the same few questions many times over: with
	// interaction patterns on, the fourth successful run of a kind would be
	// offered a learned pattern for reuse (a decision), which is not what
	// this test of the chat interfaces is about.
	disablePatterns(ctx, t, base)

	script, err := filepath.Abs("chat.mjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "BAAGENT_URL="+base, "BAAGENT_API_KEY="+apiKey, "BAAGENT_MODEL="+model)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("chat.mjs output:\n%s", out)
	if err != nil {
		t.Fatalf("chat.mjs: %v", err)
	}
	if !strings.Contains(string(out), "PASS chatapi") {
		t.Fatal("chat.mjs ended without its PASS line")
	}
}

// nodeDeps returns node's path, or skips (fails with
// BAAGENT_REQUIRE_CHATAPI=1) when node or the npm packages are missing.
func nodeDeps(t *testing.T) string {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	for _, pkg := range []string{"openai", "ai"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			missing = append(missing, "test/chatapi/node_modules/"+pkg+" (npm ci --prefix test/chatapi)")
		}
	}
	if len(missing) > 0 {
		msg := "chatapi test needs " + strings.Join(missing, ", ")
		if os.Getenv(requireEnv) == "1" {
			t.Fatal(msg + "; " + requireEnv + "=1 makes this a failure")
		}
		t.Skip(msg)
	}
	return node
}

// startSuite runs every service in this process on free loopback ports
// with one API key, a failed-auth limit of 3 (so chat.mjs can see a 429),
// the shipped skills, sample data and scenarios plus this test's own; it
// returns the gateway's HTTP base URL once a run can be started.
func startSuite(ctx context.Context, t *testing.T) string {
	t.Helper()
	a := suite.Start(ctx, t, suite.Options{
		Args: []string{"-model=" + model, "-gateway-auth-failure-limit=3"},
		Env:  map[string]string{"BAAGENT_API_KEYS": apiKey + "=acme"},
	})
	base := "http://" + a.GatewayHTTPAddr().String()
	testkit.EventuallyContext(ctx, t, "the gateway at "+base, func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs?page_size=1", nil)
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status + " " + string(b)
	})
	return base
}

// disablePatterns turns interaction patterns off for the suite's tenant
// through the public settings API.
func disablePatterns(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, base+"/v1/memory/settings", bytes.NewReader([]byte(`{"patterns_enabled":false}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Settings struct {
			PatternsEnabled *bool `json:"patterns_enabled"`
		} `json:"settings"`
	}
	// protojson leaves a false field out.
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || (got.Settings.PatternsEnabled != nil && *got.Settings.PatternsEnabled) {
		t.Fatalf("PATCH /v1/memory/settings: %s %s", resp.Status, b)
	}
}
