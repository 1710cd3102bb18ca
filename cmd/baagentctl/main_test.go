package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/topology"
)

// startSuite runs -target=all in-process on free loopback ports and returns
// the baagentctl flags that point at it.
func startSuite(t *testing.T) []string {
	t.Helper()
	a := startApp(t, "../../examples/scenarios")
	var flags []string
	for _, svc := range topology.Services {
		name := "--" + svc + "-addr"
		if svc == topology.Gateway {
			name = "--addr"
		}
		flags = append(flags, name+"="+a.Addr(svc).String())
	}
	return flags
}

// startApp runs -target=all in-process on free loopback ports with the
// example skills and data, the scenarios in scenariosDir and the extra
// flags, until the test ends.
func startApp(t *testing.T, scenariosDir string, extra ...string) *app.App {
	t.Helper()
	args := []string{
		"-data-dir=" + t.TempDir(), "-skills-dir=../../examples/skills", "-workspace-seed-dir=../../examples/data", "-scenarios-dir=" + scenariosDir,
		"-metrics-addr=127.0.0.1:0", "-embedded-nats-addr=127.0.0.1:0", "-gateway-http-listen=127.0.0.1:0",
		"-log-level=error",
	}
	args = append(args, extra...)
	for _, svc := range topology.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	cfg, err := app.LoadConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, ctx, a.Run)
	return a
}

func ctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = run(ctx, args, strings.NewReader(""), &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

func TestHealthAllServing(t *testing.T) {
	t.Parallel()

	flags := startSuite(t)
	// Health may be asked before the servers flip to SERVING; the suite is
	// ready when health says so, which is what we wait for with a deadline.
	deadline := time.Now().Add(20 * time.Second)
	var (
		code           int
		stdout, stderr string
	)
	for {
		code, stdout, stderr = ctl(t, append(flags, "--json", "health")...)
		if code == 0 || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 {
		t.Fatalf("health exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var rows []healthResult
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	if len(rows) != len(topology.Services) {
		t.Fatalf("%d rows, want %d", len(rows), len(topology.Services))
	}
	for _, r := range rows {
		if r.Status != "SERVING" {
			t.Errorf("%s: %s", r.Service, r.Status)
		}
	}

	// The table form names every service.
	code, stdout, _ = ctl(t, append(flags, "health")...)
	if code != 0 {
		t.Fatalf("health (table) exit %d", code)
	}
	for _, svc := range topology.Services {
		if !strings.Contains(stdout, svc) {
			t.Errorf("table lacks %s:\n%s", svc, stdout)
		}
	}
}

func TestHealthFailsWhenAServiceIsDown(t *testing.T) {
	t.Parallel()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	code, stdout, _ := ctl(t, "--json", "--timeout=2s", "--tokens-addr="+dead, "health", "tokens")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var rows []healthResult
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status != "UNREACHABLE" || rows[0].Addr != dead {
		t.Fatalf("rows = %+v, want tokens UNREACHABLE at %s", rows, dead)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()

	if code, _, stderr := ctl(t, "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := ctl(t, "health", "database"); code != 2 || !strings.Contains(stderr, `unknown service "database"`) {
		t.Errorf("unknown service: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := ctl(t); code != 2 {
		t.Errorf("no command: exit %d, want 2", code)
	}
	if code, _, _ := ctl(t, "version", "--bogus"); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()

	code, stdout, _ := ctl(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "baagentctl ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	code, stdout, _ = ctl(t, "version", "--json")
	var v struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || v.Version == "" || v.GoVersion == "" {
		t.Errorf("version --json: exit %d, %q", code, stdout)
	}
}

func TestEnvironmentSetsAddresses(t *testing.T) {
	t.Parallel()

	c := newCLI(nil, io.Discard, io.Discard, func(k string) string {
		return map[string]string{"BAAGENT_ADDR": "gw:1", "BAAGENT_TOKENS_ADDR": "tok:2"}[k]
	})
	if c.addrs[topology.Gateway] != "gw:1" || c.addrs[topology.Tokens] != "tok:2" || c.addrs[topology.Skills] != "localhost:7703" {
		t.Errorf("addrs = %v", c.addrs)
	}
}
