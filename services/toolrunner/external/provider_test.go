package external

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

var fastBackoff = retry.Backoff{Initial: 20 * time.Millisecond, Max: 300 * time.Millisecond}

// TestProviderSecondProcess runs the example ToolProvider in a second
// process, calls its tools, kills it and checks that its tools are withdrawn,
// then starts it again and checks that they come back.
func TestProviderSecondProcess(t *testing.T) {
	t.Parallel()

	bin := buildToolProvider(t)
	addr := freeAddr(t)
	kill := startToolProvider(t, bin, addr)

	cfg, err := Parse([]byte("providers:\n - {name: fx, address: '"+addr+"', timeout: 5s, refresh_interval: 1h}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Sources()[0]
	if src.Name() != "provider:fx" || len(src.Tools()) != 0 {
		t.Fatalf("before Run: %s offers %d tools", src.Name(), len(src.Tools()))
	}
	runManager(t, m)
	testkit.Eventually(t, 10*time.Second, "the provider's tools", func() bool { return len(src.Tools()) == 3 })

	conv := toolNamed(src, "convert_currency")
	if conv == nil {
		t.Fatal("convert_currency missing")
	}
	spec := conv.Spec()
	var schema map[string]any
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema["type"] != "object" || schema["properties"].(map[string]any)["amount"] == nil {
		t.Fatalf("parameters = %s (%v)", spec.Parameters, err)
	}
	if spec.Source != "provider:fx" || !spec.ReadOnly || spec.Version != "1.0.0" || spec.Timeout != 5*time.Second ||
		spec.CachePolicy != baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_MEDIUM {
		t.Fatalf("spec = %+v", spec)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := conv.Execute(ctx, tool.Call{ToolCallID: "call_1", Args: map[string]any{"amount": 100.0, "from": "EUR", "to": "USD"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Data.(map[string]any)["converted"]; got != 104.0 {
		t.Fatalf("converted = %v", got)
	}
	_, err = toolNamed(src, "business_days").Execute(ctx, tool.Call{ToolCallID: "call_2", Args: map[string]any{"start": "not a date", "end": "2025-01-01"}})
	if te := tool.Classify(err); te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS || te.Message == "" {
		t.Fatalf("bad date: %+v", te)
	}
	if gauge(t, m, "up", "provider:fx") != 1 || gauge(t, m, "tools", "provider:fx") != 3 {
		t.Fatal("metrics do not show the provider up with 3 tools")
	}

	// Crash the provider: its tools are withdrawn, calls fail as retryable.
	kill()
	testkit.Eventually(t, 10*time.Second, "the tools to be withdrawn", func() bool { return len(src.Tools()) == 0 })
	if gauge(t, m, "up", "provider:fx") != 0 {
		t.Fatal("up gauge still 1")
	}
	_, err = conv.Execute(ctx, tool.Call{Args: map[string]any{"amount": 1.0, "from": "EUR", "to": "USD"}})
	if te := tool.Classify(err); !tool.Retryable(te.Type) {
		t.Fatalf("a call while the provider is down should be retryable: %+v", te)
	}
	testkit.Eventually(t, 5*time.Second, "a failed describe to be counted", func() bool { return gauge(t, m, "list_failures", "provider:fx") >= 1 })

	// Start it again on the same address: the tools come back.
	startToolProvider(t, bin, addr)
	testkit.Eventually(t, 10*time.Second, "the tools to come back", func() bool { return len(src.Tools()) == 3 })
	if _, err := toolNamed(src, "add_business_days").Execute(ctx, tool.Call{Args: map[string]any{"start": "2025-01-10", "days": 1.0}}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if gauge(t, m, "restarts", "provider:fx") != 1 {
		t.Fatalf("restarts = %v, want 1", gauge(t, m, "restarts", "provider:fx"))
	}
}

// TestProviderNameCollisions checks that built-in names and names another
// source already offers are refused.
func TestProviderNameCollisions(t *testing.T) {
	t.Parallel()

	bin := buildToolProvider(t)
	addr := freeAddr(t)
	startToolProvider(t, bin, addr)
	doc := "providers:\n - {name: one, address: '" + addr + "'}\n - {name: two, address: '" + addr + "'}\n"
	cfg, err := Parse([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff, ReservedNames: append([]string{"business_days"}, DefaultReservedNames...)})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	one, two := m.Sources()[0], m.Sources()[1]
	testkit.Eventually(t, 10*time.Second, "both providers up", func() bool {
		return gauge(t, m, "up", "provider:one") == 1 && gauge(t, m, "up", "provider:two") == 1
	})
	// Both serve the same tools: whichever listed first owns the two free
	// names; business_days is a reserved name for both.
	n1, n2 := len(one.Tools()), len(two.Tools())
	if !(n1 == 2 && n2 == 0 || n1 == 0 && n2 == 2) {
		t.Fatalf("tools offered: one=%d two=%d, want 2 and 0", n1, n2)
	}
	for _, src := range m.Sources() {
		if toolNamed(src, "business_days") != nil {
			t.Fatalf("%s offers a reserved name", src.Name())
		}
	}
	if r := gauge(t, m, "refused", "provider:one") + gauge(t, m, "refused", "provider:two"); r != 4 {
		t.Fatalf("refused = %v, want 4 (1 + 3)", r)
	}
}

func TestProviderTLSFilesChecked(t *testing.T) {
	t.Parallel()

	cfg := Config{Providers: []ProviderConfig{{Name: "x", Address: "127.0.0.1:1", TLS: TLSConfig{Enabled: true, CAFile: "/nonexistent/ca.pem"}}}}
	if _, err := New(cfg, Options{}); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
