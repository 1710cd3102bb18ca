// Package browser drives the gateway's dashboard in headless Chromium: the
// whole suite runs in-process (-target=all with the scripted model) and
// dashboard.mjs, a playwright-core script, uses the page as a person would.
package browser

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/tracing"
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

	script, err := filepath.Abs("dashboard.mjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(),
		"BAAGENT_URL="+base,
		"CHROMIUM="+chromiumPath,
		"SCREENSHOT_DIR="+shots,
		"USER_DATA_DIR="+t.TempDir(),
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("dashboard.mjs output:\n%s", out)
	t.Logf("screenshots in %s", shots)
	if err != nil {
		t.Fatalf("dashboard.mjs: %v", err)
	}
	if !strings.Contains(string(out), "PASS dashboard") {
		t.Fatal("dashboard.mjs ended without its PASS line")
	}
	for _, name := range []string{"deep-dive.png", "clarification.png"} {
		if st, err := os.Stat(filepath.Join(shots, name)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing or empty: %v", name, err)
		}
	}
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
	scenarios := t.TempDir()
	for _, pattern := range []string{"../../examples/scenarios/*.yaml", "testdata/scenarios/*.yaml"} {
		copyFiles(t, pattern, scenarios)
	}
	args := []string{
		"-data-dir=" + t.TempDir(),
		"-metrics-addr=127.0.0.1:0",
		"-embedded-nats-addr=127.0.0.1:0",
		"-gateway-http-listen=127.0.0.1:0",
		"-skills-dir=../../examples/skills",
		"-workspace-seed-dir=../../examples/data",
		"-scenarios-dir=" + scenarios,
		"-log-level=warn",
		"-trace-link-template=http://localhost:16686/trace/{trace_id}",
	}
	for _, svc := range config.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	cfg, err := app.LoadConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	var over atomic.Bool
	log := slog.New(slog.NewTextHandler(testWriter{t, &over}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Traced (to an exporter that keeps nothing), so that runs have trace
	// ids the dashboard links to.
	a, err := app.New(ctx, cfg, log, app.WithTracing(func(c *tracing.Config) { c.Exporter = discard{} }))
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("app.Run: %v", err)
		}
		over.Store(true)
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

func copyFiles(t *testing.T, pattern, dir string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", pattern, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testWriter sends the suite's warnings to the test log until the test
// is over (a straggling log line must not panic in t.Log).
type testWriter struct {
	t    *testing.T
	over *atomic.Bool
}

func (w testWriter) Write(p []byte) (int, error) {
	if !w.over.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
