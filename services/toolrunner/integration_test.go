package toolrunner

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// TestSalesQuestionOverGRPC answers the sample question through the real
// RPC, over the committed sample dataset seeded into a new workspace.
func TestSalesQuestionOverGRPC(t *testing.T) {
	t.Parallel()

	s, _ := newTestServer(t, func(o *Options) { o.WorkspaceSeedDir = filepath.Join("..", "..", "examples", "data") })
	c := baagentv1.NewToolRunnerServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { s.Register(gs) }))
	r := req("sql_query", map[string]any{"query": `
		SELECT p.category, ROUND(SUM(o.quantity * o.unit_price), 2) AS revenue
		FROM orders o JOIN products p ON p.product_id = o.product_id
		WHERE o.order_date BETWEEN '2026-07-01' AND '2026-09-30'
		GROUP BY p.category ORDER BY revenue DESC`})
	r.ToolCallId = "call_q3"
	resp, err := c.Invoke(t.Context(), &baagentv1.InvokeRequest{Request: r})
	if err != nil {
		t.Fatal(err)
	}
	res := resp.GetResult()
	if !res.GetSuccess() || res.GetToolCallId() != "call_q3" {
		t.Fatalf("%v", res)
	}
	lines := strings.Split(res.GetObservation(), "\n")
	if len(lines) < 5 || lines[0] != "| category | revenue |" || !strings.HasPrefix(lines[2], "| Software |") ||
		!strings.HasPrefix(lines[3], "| Hardware |") || !strings.HasPrefix(lines[4], "| Services |") {
		t.Fatalf("Q3 2026 revenue by category:\n%s", res.GetObservation())
	}

	for _, q := range []string{"SELECT COUNT(*) FROM orders", "SELECT COUNT(*) FROM customers", "SELECT COUNT(*) FROM products"} {
		resp, err := c.Invoke(t.Context(), &baagentv1.InvokeRequest{Request: req("sql_query", map[string]any{"query": q})})
		if err != nil || !resp.GetResult().GetSuccess() {
			t.Fatalf("%s: %v %v", q, resp, err)
		}
	}
	list, err := c.ListTools(t.Context(), &baagentv1.ListToolsRequest{Tenant: "acme"})
	if err != nil || len(list.GetTools()) != 7 {
		t.Fatalf("ListTools: %v %v", list, err)
	}
	for _, d := range list.GetTools() {
		if d.GetSchema().GetParameters().GetFields()["type"].GetStringValue() != "object" || d.GetVersion() == "" || d.GetSource() != "builtin" {
			t.Errorf("definition %v", d)
		}
	}
}
