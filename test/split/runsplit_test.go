package split_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRunSplitPrintsCommandsThatWork runs the launcher of `make run-split`
// (scripts/run-split) as a user would, on random ports so that it cannot
// clash with anything else on the machine, and runs every command it
// prints through `sh -c`, in another directory and with none of the
// caller's BAAGENT_* variables: each must succeed against the running
// suite as printed. Then SIGTERM stops the launcher, which must report
// that every process exited 0.
func TestRunSplitPrintsCommandsThatWork(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed: run-split prints curl commands, and this test runs every printed line")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build(ctx, t, repo, filepath.Join(bin, "baagent"), "./cmd/baagent")
	build(ctx, t, repo, filepath.Join(bin, "baagentctl"), "./cmd/baagentctl")
	build(ctx, t, repo, filepath.Join(bin, "nats-server"), "github.com/nats-io/nats-server/v2")
	build(ctx, t, repo, filepath.Join(bin, "run-split"), "./scripts/run-split")

	env := cleanEnv()
	launcher := exec.Command(filepath.Join(bin, "run-split"),
		"-repo", repo, "-baagent", filepath.Join(bin, "baagent"), "-nats-server", filepath.Join(bin, "nats-server"),
		"-baagentctl", filepath.Join(bin, "baagentctl"), "-dir", t.TempDir(), "-quiet")
	launcher.Env = append(slices.Clip(env), "RUN_SPLIT_PORTS=random")
	stdout, err := launcher.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	launcher.Stderr = &stderr
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	// One goroutine owns the launcher's stdout and reaps it: lines until
	// EOF, then its exit status.
	lines := make(chan string, 256)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- launcher.Wait()
	}()
	stopped := false
	defer func() {
		if !stopped {
			// SIGTERM lets the launcher stop its processes in order.
			_ = launcher.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(time.Minute):
				_ = launcher.Process.Kill()
			}
		}
	}()

	// The launcher prints the commands once every process is healthy.
	var out []string
	var commands []string
	inTry := false
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				stopped = true
				t.Fatalf("launcher ended before it was ready: %v\nstdout:\n%s\nstderr:\n%s", <-exited, strings.Join(out, "\n"), stderr.String())
			}
			out = append(out, line)
			switch {
			case strings.HasPrefix(line, "try"):
				inTry = true
			case inTry && strings.TrimSpace(line) == "":
				inTry, ready = false, true
			case inTry:
				commands = append(commands, strings.TrimSpace(line))
			}
		case <-ctx.Done():
			t.Fatalf("launcher not ready: %v\nstdout:\n%s\nstderr:\n%s", ctx.Err(), strings.Join(out, "\n"), stderr.String())
		}
	}
	t.Logf("run-split printed:\n%s", strings.Join(out, "\n"))
	if len(commands) < 4 {
		t.Fatalf("only %d commands printed: %q", len(commands), commands)
	}

	var sawAsk, sawKey bool
	work := t.TempDir() // not the repository: the lines must not depend on it
	for _, line := range commands {
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		cmd := exec.CommandContext(cctx, "sh", "-c", line)
		cmd.Dir = work
		cmd.Env = env
		cmd.Stdin = strings.NewReader("")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		ccancel()
		if err != nil {
			t.Fatalf("%s\nfailed: %v\nstdout:\n%s\nstderr:\n%s", line, err, o.String(), e.String())
		}
		if strings.TrimSpace(o.String()) == "" {
			t.Fatalf("%s\nprinted nothing (stderr: %s)", line, e.String())
		}
		if strings.Contains(line, " ask ") {
			sawAsk = true
			if !strings.Contains(o.String(), "completed") {
				t.Errorf("%s\ndid not complete:\n%s", line, o.String())
			}
		}
		if strings.Contains(line, "/v1/whoami") {
			sawKey = strings.Contains(o.String(), `"tenant":"default"`)
		}
		t.Logf("ok: %s", line)
	}
	if !sawAsk || !sawKey {
		t.Fatalf("the commands must ask a question (%v) and authenticate over HTTP as tenant default (%v): %q", sawAsk, sawKey, commands)
	}

	stopped = true
	if err := launcher.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var rest []string
		for line := range lines {
			rest = append(rest, line)
		}
		if err != nil || !strings.Contains(strings.Join(rest, "\n"), "every process exited 0") {
			t.Fatalf("launcher after SIGTERM: %v; want exit 0 and \"every process exited 0\", got:\n%s\nstderr:\n%s", err, strings.Join(rest, "\n"), stderr.String())
		}
	case <-time.After(90 * time.Second):
		_ = launcher.Process.Kill()
		t.Fatalf("launcher did not stop within 90 s of SIGTERM\nstderr:\n%s", stderr.String())
	}
}

// cleanEnv is this process's environment without the variables that
// would point baagentctl or the launcher elsewhere.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BAAGENT_") && !strings.HasPrefix(kv, "RUN_SPLIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine of exec.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
