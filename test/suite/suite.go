// Package suite starts the whole suite (-target=all) inside a test
// process, as the end-to-end tests that drive it from outside (a browser,
// Node clients, generated clients) need it.
package suite

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/config"
)

// Options changes the suite Start runs.
type Options struct {
	// Args are more flags, after the defaults (a later flag wins).
	Args []string
	// Env is the environment the configuration reads (BAAGENT_API_KEYS,
	// …); nothing else of the test process's environment is read.
	Env map[string]string
	// App are options of app.New.
	App []app.Option
}

// Start runs every service in this process on free loopback ports with a
// temporary data dir, the shipped skills and sample data, and the shipped
// scenarios plus the calling test's own (testdata/scenarios, when the
// package has one); it stops the suite when the test ends. The caller
// waits for what it needs to be ready.
func Start(ctx context.Context, t *testing.T, o Options) *app.App {
	t.Helper()
	scenarios := t.TempDir()
	CopyFiles(t, "../../examples/scenarios/*.yaml", scenarios)
	if own, _ := filepath.Glob("testdata/scenarios/*.yaml"); len(own) > 0 {
		CopyFiles(t, "testdata/scenarios/*.yaml", scenarios)
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
	}
	for _, svc := range config.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	cfg, err := app.LoadConfig(append(args, o.Args...), func(k string) string { return o.Env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	var over atomic.Bool
	log := slog.New(slog.NewTextHandler(logWriter{t, &over}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, cfg, log, o.App...)
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
	return a
}

// CopyFiles copies the files matching pattern into dir; no match fails
// the test.
func CopyFiles(t *testing.T, pattern, dir string) {
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

// logWriter sends the suite's warnings to the test log until the test is
// over (a straggling log line must not panic in t.Log).
type logWriter struct {
	t    *testing.T
	over *atomic.Bool
}

func (w logWriter) Write(p []byte) (int, error) {
	if !w.over.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
