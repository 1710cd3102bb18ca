package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// Scenario c: the gateway is killed with SIGKILL mid-run and started again.
// A gRPC client and an SSE client per run reconnect with their cursors
// (the `after` field, Last-Event-ID) and together with what they had
// received before, get every event once; both see the same stream.
func TestGatewayRestartClientsResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const runs, steps, rows = 2, 6, 400000
	c := startCluster(t, startOptions(t, map[string]string{
		"gw-steps": stepsScenario("gw-steps", "gateway fault", steps, rows),
	}))
	g := newGatewayClient(t, c)
	type clients struct{ grpc, sse *recorder }
	ids := make([]string, runs)
	recs := make([]clients, runs)
	errs := make(chan error, 2*runs)
	for i := range runs {
		ids[i] = g.startRun(ctx, t, fmt.Sprintf("gateway fault %d", i))
		recs[i] = clients{grpc: &recorder{}, sse: &recorder{}}
		go func() { errs <- g.followGRPC(ctx, ids[i], recs[i].grpc) }()
		go func() { errs <- followSSE(ctx, c.HTTPAddr, ids[i], recs[i].sse) }()
	}
	testkit.EventuallyContext(ctx, t, "every client past the first tool call", func() (bool, string) {
		for _, r := range recs {
			if !r.grpc.has(actOf("sql_query")) || !r.sse.has(actOf("sql_query")) {
				return false, ""
			}
		}
		return true, ""
	})
	c.Restart("gateway")
	for range 2 * runs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range recs {
		g, s := r.grpc.snapshot(), r.sse.snapshot()
		checkStream(t, "gRPC client of "+ids[i], g)
		checkStream(t, "SSE client of "+ids[i], s)
		if len(g) != len(s) {
			t.Fatalf("run %s: gRPC client got %d events, SSE client %d", ids[i], len(g), len(s))
		}
		for j := range g {
			if g[j].GetType() != s[j].GetType() || g[j].GetCursor() != s[j].GetCursor() {
				t.Fatalf("run %s: event %d differs: gRPC %s %s, SSE %s %s", ids[i], j+1, g[j].GetType(), g[j].GetCursor(), s[j].GetType(), s[j].GetCursor())
			}
		}
		if last := terminal(g); last.GetType() != "complete" {
			t.Errorf("run %s ended %s: %s", ids[i], last.GetType(), last.GetError().GetMessage())
		}
		if r.grpc.reconnects == 0 || r.sse.reconnects == 0 {
			t.Errorf("run %s: reconnects gRPC %d, SSE %d: the restart did not cut the streams", ids[i], r.grpc.reconnects, r.sse.reconnects)
		}
		t.Logf("run %s: %d events; gRPC reconnects %d %v; SSE reconnects %d %v", ids[i], len(g), r.grpc.reconnects, r.grpc.errs, r.sse.reconnects, r.sse.errs)
	}
}
