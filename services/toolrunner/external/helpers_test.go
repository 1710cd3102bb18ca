package external

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/services/toolrunner/tool"
)

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a server that must come back on the same address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// testLogger writes the component's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runManager starts m.Run and stops it at the end of the test, failing the
// test if Run does not return promptly.
func runManager(t *testing.T, m *Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("Run did not return within 20s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// toolNamed returns the tool of src named name, or nil.
func toolNamed(src tool.Source, name string) tool.Tool {
	for _, tl := range src.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	return nil
}

func gauge(t *testing.T, m *Manager, which, source string) float64 {
	t.Helper()
	switch which {
	case "up":
		return testutil.ToFloat64(m.metrics.up.WithLabelValues(source))
	case "tools":
		return testutil.ToFloat64(m.metrics.tools.WithLabelValues(source))
	case "restarts":
		return testutil.ToFloat64(m.metrics.restarts.WithLabelValues(source))
	case "list_failures":
		return testutil.ToFloat64(m.metrics.listFailures.WithLabelValues(source))
	case "refused":
		return testutil.ToFloat64(m.metrics.refused.WithLabelValues(source))
	}
	t.Fatalf("no metric %s", which)
	return 0
}

// buildToolProvider builds examples/toolprovider/go once per test binary.
var buildOnce struct {
	sync.Once
	path string
	err  error
	out  []byte
}

func buildToolProvider(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolprovider-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "toolprovider")
		cmd := exec.Command("go", "build", "-o", buildOnce.path, "../../../examples/toolprovider/go")
		buildOnce.out, buildOnce.err = cmd.CombinedOutput()
	})
	if buildOnce.err != nil {
		t.Fatalf("go build examples/toolprovider/go: %v\n%s", buildOnce.err, buildOnce.out)
	}
	return buildOnce.path
}

// startToolProvider runs the example provider as a second process on addr
// and waits until it serves. The returned function kills it (SIGKILL, like a
// crash) and waits for it to exit.
func startToolProvider(t *testing.T, bin, addr string) (kill func()) {
	t.Helper()
	return startServer(t, exec.Command(bin, "-addr", addr))
}

// startServer starts cmd, a provider that prints `listening on ...` when it
// serves, and waits for that line.
func startServer(t *testing.T, cmd *exec.Cmd) (kill func()) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("toolprovider did not start: %q, %v", line, err)
	}
	return kill
}
