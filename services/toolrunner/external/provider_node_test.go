package external

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// TestProviderNodeJS runs examples/toolprovider/node (the same tools in
// Node.js with @grpc/grpc-js) and checks that it answers exactly as the Go
// provider does: a ToolProvider may be written in any language. It skips
// without `npm ci --prefix examples/toolprovider/node`, unless
// BAAGENT_REQUIRE_NODE_PROVIDER=1.
func TestProviderNodeJS(t *testing.T) {
	t.Parallel()

	dir, _ := filepath.Abs("../../../examples/toolprovider/node")
	_, statErr := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js"))
	node, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		msg := "the Node.js provider test needs node and `npm ci --prefix examples/toolprovider/node`"
		if os.Getenv("BAAGENT_REQUIRE_NODE_PROVIDER") == "1" {
			t.Fatalf("%s (BAAGENT_REQUIRE_NODE_PROVIDER=1): %v %v", msg, statErr, nodeErr)
		}
		t.Skip(msg)
	}
	nodeAddr, goAddr := freeAddr(t), freeAddr(t)
	startServer(t, exec.Command(node, filepath.Join(dir, "server.js"), "--addr", nodeAddr))
	startToolProvider(t, buildToolProvider(t), goAddr)

	cfg, err := Parse([]byte("providers:\n - {name: node, address: '"+nodeAddr+"'}\n - {name: go, address: '"+goAddr+"', tools: [none]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Go provider serves the same names, so it is registered with a
	// filter that keeps none of them; its tools are called directly below.
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	nodeSrc := m.Sources()[0]
	testkit.Eventually(t, 20*time.Second, "the Node.js provider's tools", func() bool { return len(nodeSrc.Tools()) == 3 })

	goCfg, _ := Parse([]byte("providers:\n - {name: go, address: '"+goAddr+"'}\n"), nil)
	gm, err := New(goCfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, gm)
	goSrc := gm.Sources()[0]
	testkit.Eventually(t, 20*time.Second, "the Go provider's tools", func() bool { return len(goSrc.Tools()) == 3 })

	for _, tl := range nodeSrc.Tools() {
		g := toolNamed(goSrc, tl.Spec().Name)
		if g == nil {
			t.Fatalf("the Go provider has no %s", tl.Spec().Name)
		}
		if string(g.Spec().Parameters) != string(tl.Spec().Parameters) || g.Spec().Description != tl.Spec().Description {
			t.Errorf("%s: schemas differ:\n go   %s\n node %s", tl.Spec().Name, g.Spec().Parameters, tl.Spec().Parameters)
		}
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"convert_currency", map[string]any{"amount": 250.0, "from": "GBP", "to": "JPY"}},
		{"convert_currency", map[string]any{"amount": 1.0, "from": "EUR", "to": "XAU"}},
		{"business_days", map[string]any{"start": "2025-03-01", "end": "2025-03-31", "holidays": []any{"2025-03-17"}}},
		{"business_days", map[string]any{"start": "2025-02-30", "end": "2025-03-31"}},
		{"add_business_days", map[string]any{"start": "2025-12-23", "days": 3.0, "holidays": []any{"2025-12-25", "2025-12-26"}}},
		{"add_business_days", map[string]any{"start": "2025-01-06", "days": -7.0}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range calls {
		nres, nerr := toolNamed(nodeSrc, c.tool).Execute(ctx, tool.Call{Args: c.args})
		gres, gerr := toolNamed(goSrc, c.tool).Execute(ctx, tool.Call{Args: c.args})
		if (nerr == nil) != (gerr == nil) {
			t.Errorf("%s %v: node error %v, go error %v", c.tool, c.args, nerr, gerr)
			continue
		}
		if nerr != nil {
			ne, ge := tool.Classify(nerr), tool.Classify(gerr)
			if ne.Type != ge.Type || ne.Code != ge.Code {
				t.Errorf("%s %v: node %v/%s, go %v/%s", c.tool, c.args, ne.Type, ne.Code, ge.Type, ge.Code)
			}
			continue
		}
		if !reflect.DeepEqual(nres.Data, gres.Data) {
			t.Errorf("%s %v:\n node %v\n go   %v", c.tool, c.args, nres.Data, gres.Data)
		}
	}
}
