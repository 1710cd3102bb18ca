package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for baagent in a child process, so
// the signal handling of the real main is tested without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("BAAGENT_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestBadSettingsExitWithNamedError(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-target=database"}, `setting target: unknown target "database"`},
		{[]string{"-config=/nonexistent/baagent.yaml"}, "config file: open /nonexistent/baagent.yaml"},
		{[]string{"-log-level=chatty"}, "setting log-level"},
	}
	for _, tc := range cases {
		var out strings.Builder
		code := run(context.Background(), tc.args, func(string) string { return "" }, &out)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: output %q does not contain %q", tc.args, out.String(), tc.want)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"-h"}, func(string) string { return "" }, &out); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	if !strings.Contains(out.String(), "-target") {
		t.Errorf("-h output lacks -target:\n%s", out.String())
	}
}

func TestSIGTERMExitsZeroWithinFiveSeconds(t *testing.T) {
	args := []string{
		"-data-dir=" + t.TempDir(),
		"-skills-dir=../../examples/skills", "-workspace-seed-dir=../../examples/data", "-scenarios-dir=../../examples/scenarios",
		"-metrics-addr=127.0.0.1:0",
		"-embedded-nats-addr=127.0.0.1:0",
		"-gateway-http-listen=127.0.0.1:0",
	}
	for _, svc := range []string{"gateway", "orchestrator", "toolrunner", "skills", "context", "tokens"} {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BAAGENT_TEST_RUN_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// Wait for the "running" log line: every port is bound and NATS is up.
	running := make(chan struct{})
	logs := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			select {
			case logs <- line:
			default:
			}
			var rec struct{ Msg string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "baagent running" && !signalled {
				signalled = true
				close(running)
			}
		}
	}()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatalf("baagent did not report running within 30 s; logs:\n%s", drainLogs(logs))
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("exit status %d after SIGTERM, want 0; logs:\n%s", exit.ExitCode(), drainLogs(logs))
		} else if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("shutdown took %s, want ≤ 5 s", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGTERM; logs:\n%s", drainLogs(logs))
	}
}

func drainLogs(logs chan string) string {
	var b strings.Builder
	for {
		select {
		case l := <-logs:
			b.WriteString(l + "\n")
		default:
			return b.String()
		}
	}
}
