// Package tracing holds the tracing integration tests: a real Jaeger v2
// (./bin/jaeger, built by `make bin/jaeger` from the pinned tools module
// tools/jaeger) with memory storage, its OTLP receivers and query API on
// free loopback ports, one Jaeger per test. The tests export spans to it
// and read them back through its query API: smoke_test.go with the OTel
// SDK alone (the harness itself), suite_test.go with the suite in
// microservices mode (a run is one trace, across an orchestrator failover
// too).
//
// Without bin/jaeger the tests skip, unless CI or BAAGENT_REQUIRE_JAEGER is
// set (true, 1): then they fail, so that CI cannot pass without them.
package tracing

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jaegerReadyTimeout bounds one start of Jaeger, until its health check
// and query API answer (it takes tens of milliseconds when idle; a busy
// 2-core machine loading the 120 MB binary is slower).
const jaegerReadyTimeout = 60 * time.Second

// Jaeger is a running Jaeger v2 process.
type Jaeger struct {
	// OTLPGRPCAddr and OTLPHTTPAddr are the OTLP receiver's host:port for
	// gRPC and for HTTP (POST /v1/traces).
	OTLPGRPCAddr, OTLPHTTPAddr string
	// QueryURL is the base URL of the query API (and UI), http://host:port.
	QueryURL string
	// HealthURL is the health check extension's status URL.
	HealthURL string
	// ConfigPath and LogPath are its configuration and its output.
	ConfigPath, LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// requireJaeger reports whether a missing bin/jaeger fails the tests
// instead of skipping them: under CI (.ci/run runs with CI=true and
// builds it) or when BAAGENT_REQUIRE_JAEGER says so.
func requireJaeger() bool {
	for _, env := range []string{"CI", "BAAGENT_REQUIRE_JAEGER"} {
		if v, err := strconv.ParseBool(os.Getenv(env)); err == nil && v {
			return true
		}
	}
	return false
}

// repoRoot finds the repository root above the test's working directory
// (the package directory): the directory whose go.mod is the main
// module's.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(b) == "github.com/baagent/baagent" {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod of github.com/baagent/baagent above %s", dir)
		}
	}
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// jaegerBinary returns the path of bin/jaeger, skipping the test (or
// failing it, see requireJaeger) when it has not been built.
func jaegerBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(repoRoot(t), "bin", "jaeger")
	if _, err := os.Stat(bin); err != nil {
		if requireJaeger() {
			t.Fatalf("%s is missing (%v): build it with `make bin/jaeger`; CI or BAAGENT_REQUIRE_JAEGER is set, so the tracing tests may not skip", bin, err)
		}
		t.Skipf("%s is missing: `make bin/jaeger` builds Jaeger v2 for the tracing tests (they fail instead of skipping when CI or BAAGENT_REQUIRE_JAEGER is set)", bin)
	}
	return bin
}

// freePorts returns n distinct free loopback ports. They are free when
// looked at; startJaeger retries with others when one has been taken since.
func freePorts(n int) ([]int, error) {
	// Every listener stays open until all are taken, so the ports differ.
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// jaegerConfig is an all-in-one Jaeger v2 configuration reduced to what
// the tests use: the OTLP receiver (gRPC and HTTP) writing straight to
// memory storage (no batch processor, so that a span is queryable once its
// export has been answered), the query extension (HTTP API v1 and v3,
// gRPC) reading it, and the health check. Every listener is on a loopback
// port given by the test; the collector's own metrics are off (they would
// listen on :8888), and so is the query extension's self-tracing.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info

extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %[1]s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: %[2]s
    grpc:
      endpoint: %[3]s

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[4]s
      http:
        endpoint: %[5]s

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// startJaeger starts bin/jaeger with memory storage on free loopback ports
// and waits until it is ready; it is stopped when the test ends (its log
// is shown if the test failed).
func startJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	dir := t.TempDir()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		j, err := launchJaeger(bin, dir, attempt)
		if err != nil {
			t.Fatal(err)
		}
		err = j.waitReady(jaegerReadyTimeout)
		if err == nil {
			t.Cleanup(func() {
				if err := j.stop(); err != nil {
					t.Errorf("jaeger: %v", err)
				}
				if t.Failed() {
					t.Logf("jaeger log (%s), end:\n%s", j.LogPath, tail(j.log(), 4000))
				}
			})
			t.Logf("jaeger ready: OTLP gRPC %s, OTLP HTTP %s, query %s", j.OTLPGRPCAddr, j.OTLPHTTPAddr, j.QueryURL)
			return j
		}
		_ = j.stop()
		// A port found free may have been taken before Jaeger bound it.
		if attempt < attempts && strings.Contains(j.log(), "address already in use") {
			t.Logf("jaeger start %d: a port was taken, again with others", attempt)
			continue
		}
		t.Fatalf("jaeger did not start: %v; log:\n%s", err, tail(j.log(), 4000))
	}
}

// launchJaeger writes a configuration with free ports into dir and starts
// the process.
func launchJaeger(bin, dir string, attempt int) (*Jaeger, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	j := &Jaeger{
		HealthURL:    "http://" + addr(0) + "/status",
		QueryURL:     "http://" + addr(1),
		OTLPGRPCAddr: addr(3),
		OTLPHTTPAddr: addr(4),
		ConfigPath:   filepath.Join(dir, fmt.Sprintf("jaeger-%d.yaml", attempt)),
		LogPath:      filepath.Join(dir, fmt.Sprintf("jaeger-%d.log", attempt)),
		done:         make(chan struct{}),
	}
	cfg := fmt.Sprintf(jaegerConfig, addr(0), addr(1), addr(2), addr(3), addr(4))
	if err := os.WriteFile(j.ConfigPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(j.LogPath)
	if err != nil {
		return nil, err
	}
	j.cmd = exec.Command(bin, "--config", j.ConfigPath)
	j.cmd.Dir = dir
	j.cmd.Stdout, j.cmd.Stderr = log, log
	if err := j.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		j.err = j.cmd.Wait()
		log.Close()
		close(j.done)
	}()
	return j, nil
}

// waitReady polls the health check until it reports every component OK
// (the receivers are started last) and the query API until it answers.
func (j *Jaeger) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	ready := func(url string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
		}
		return nil
	}
	var last error
	for {
		if last = ready(j.HealthURL); last == nil {
			if last = ready(j.QueryURL + "/api/v3/services"); last == nil {
				return nil
			}
		}
		select {
		case <-j.done:
			return fmt.Errorf("jaeger exited before it was ready: %v", j.err)
		case <-ctx.Done():
			return fmt.Errorf("jaeger not ready after %s: %v", timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the process with SIGTERM (SIGKILL after 10 s) and waits for
// it; an exit other than the one SIGTERM asks for is an error.
func (j *Jaeger) stop() error {
	select {
	case <-j.done:
		return fmt.Errorf("exited before it was stopped: %v", j.err)
	default:
	}
	_ = j.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.done:
	case <-time.After(10 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.done
		return errors.New("still running 10 s after SIGTERM: killed")
	}
	var exit *exec.ExitError
	if j.err != nil && !(errors.As(j.err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM) {
		return fmt.Errorf("exit after SIGTERM: %v", j.err)
	}
	return nil
}

// log returns what the process has written.
func (j *Jaeger) log() string {
	b, err := os.ReadFile(j.LogPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
