package external

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/testkit"
)

func TestManagerRunLifecycle(t *testing.T) {
	t.Parallel()

	m, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Sources()) != 0 {
		t.Fatal("sources without configuration")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	testkit.Eventually(t, 5*time.Second, "Run to have started", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.running
	})
	if err := m.Run(ctx); !errors.Is(err, ErrRunTwice) {
		t.Fatalf("second Run: %v", err)
	}
	select { // with nothing configured, Run still waits for its context
	case err := <-done:
		t.Fatalf("Run returned before its context ended: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestManagerMetricsRegistration(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	cfg := Config{
		Providers:  []ProviderConfig{{Name: "p", Address: "127.0.0.1:1"}},
		MCPServers: []MCPServerConfig{{Name: "s", Stdio: &StdioConfig{Command: "x"}}},
	}
	m, err := New(cfg, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{m.Sources()[0].Name(), m.Sources()[1].Name()}; got[0] != "provider:p" || got[1] != "mcp:s" {
		t.Fatalf("sources = %v", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	for _, name := range []string{"baagent_toolrunner_external_source_up", "baagent_toolrunner_external_source_tools",
		"baagent_toolrunner_external_source_restarts_total", "baagent_toolrunner_external_source_list_failures_total",
		"baagent_toolrunner_external_source_refused_tools"} {
		if series[name] != 2 {
			t.Errorf("%s: %d series, want 2 (one per source, from the start)", name, series[name])
		}
	}
	// A second manager on the same registry is refused, not a panic.
	if _, err := New(cfg, Options{Registerer: reg}); err == nil {
		t.Fatal("duplicate registration accepted")
	}
}
