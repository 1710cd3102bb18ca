// Package browser drives the gateway's dashboard in headless Chromium: the
// whole suite runs in-process (-target=all with the scripted model) and
// dashboard.mjs, a playwright-core script, uses the page as a person would.
package browser

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/test/suite"
)

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// chromiumPath is Debian's chromium package, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// requireEnv makes missing browser dependencies a failure instead of a
// skip (CI sets it once it has installed them).
const requireEnv = "BAAGENT_REQUIRE_BROWSER"

// artifactsEnv names a directory to keep the screenshots in; without it
// they go to t.ArtifactDir() (kept with go test -artifacts).
const artifactsEnv = "BAAGENT_BROWSER_ARTIFACTS"

func TestDashboardInChromium(t *testing.T) {
	node := browserDeps(t)
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := startSuite(ctx, t)

	runScript(ctx, t, node, "dashboard.mjs", "PASS dashboard", []string{
		"BAAGENT_URL=" + base,
		"SCREENSHOT_DIR=" + shots,
		"PLAN_FIXTURE=" + writePlanFixture(t),
	}, shots, "deep-dive.png", "clarification.png", "plan-tablet.png")
}

// runScript runs script, one of this directory's playwright-core scripts,
// in node with CHROMIUM, a fresh USER_DATA_DIR and env set. The test fails
// unless the script succeeds, prints its pass line and leaves each of the
// screenshots in shots non-empty. It returns the script's output.
func runScript(ctx context.Context, t *testing.T, node, script, pass string, env []string, shots string, screenshots ...string) []byte {
	t.Helper()
	path, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, path)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromiumPath, "USER_DATA_DIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("%s output:\n%s", script, out)
	t.Logf("screenshots in %s", shots)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if !strings.Contains(string(out), pass) {
		t.Fatalf("%s ended without its %s line", script, pass)
	}
	for _, name := range screenshots {
		if st, err := os.Stat(filepath.Join(shots, name)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing or empty: %v", name, err)
		}
	}
	return out
}

// browserDeps returns node's path, or skips (fails with
// BAAGENT_REQUIRE_BROWSER=1) when Chromium, node or the npm packages are
// missing.
func browserDeps(t *testing.T) string {
	t.Helper()
	var missing []string
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, chromiumPath+" (apt-get install -y chromium)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "test/browser/node_modules (npm ci --prefix test/browser)")
	}
	if len(missing) > 0 {
		msg := "browser test needs " + strings.Join(missing, ", ")
		if os.Getenv(requireEnv) == "1" {
			t.Fatal(msg + "; " + requireEnv + "=1 makes this a failure")
		}
		t.Skip(msg)
	}
	return node
}

func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		return t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%s: %v", artifactsEnv, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// startSuite runs every service in this process on free loopback ports
// with a temporary data dir, the shipped skills and sample data, and the
// shipped scenarios plus this test's own; it returns the dashboard URL
// once a run can be started.
func startSuite(ctx context.Context, t *testing.T) string {
	t.Helper()
	a := suite.Start(ctx, t, suite.Options{
		Args: []string{"-trace-link-template=http://localhost:16686/trace/{trace_id}"},
		// Traced (to an exporter that keeps nothing), so that runs have
		// trace ids the dashboard links to.
		App: []app.Option{app.WithTracing(func(c *tracing.Config) { c.Exporter = discard{} })},
	})
	base := "http://" + a.GatewayHTTPAddr().String()
	waitReady(ctx, t, base)
	return base
}

// waitReady polls until the gateway answers an authenticated API call that
// goes through to the orchestrator.
func waitReady(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	testkit.EventuallyContext(ctx, t, "the gateway at "+base, func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs?page_size=1", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status + " " + string(b)
	})
}
