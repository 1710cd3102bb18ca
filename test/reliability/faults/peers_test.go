package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// failFast bounds how long a run may take to report a dead peer.
const failFast = 20 * time.Second

// Scenario d: context or skills killed with SIGKILL. A direct call answers
// Unavailable at once; a run started meanwhile ends quickly (finished, or a
// clear error naming the service) instead of hanging; after a restart, runs
// finish again — also one that was mid-tool-call while the peer was down
// and back.
func TestContextOrSkillsKilled(t *testing.T) {
	for _, svc := range []string{"context", "skills"} {
		t.Run(svc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const rows = 2000000
			c := startCluster(t, startOptions(t, map[string]string{
				"peer-steps": stepsScenario("peer-steps", "peer fault", 2, 50000),
				"peer-slow":  stepsScenario("peer-slow", "slow peer fault", 1, rows),
			}))
			g := newGatewayClient(t, c)

			c.Kill(svc)
			conn, err := grpc.NewClient(c.Addr[svc], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			began := time.Now()
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			if svc == "context" {
				_, err = baagentv1.NewContextServiceClient(conn).GetHistory(cctx, &baagentv1.GetHistoryRequest{Tenant: tenant, ConversationId: "c1"})
			} else {
				_, err = baagentv1.NewSkillsServiceClient(conn).ListSkills(cctx, &baagentv1.ListSkillsRequest{Tenant: tenant})
			}
			ccancel()
			if status.Code(err) != codes.Unavailable || time.Since(began) > 2*time.Second {
				t.Fatalf("call to the dead %s: %v after %s", svc, err, time.Since(began))
			}

			// A run while the peer is down ends fast.
			began = time.Now()
			runID := g.startRun(ctx, t, "peer fault while down")
			rctx, rcancel := context.WithTimeout(ctx, failFast)
			run := g.waitFinished(rctx, t, runID)
			rcancel()
			took := time.Since(began)
			switch {
			case run.GetState() == baagentv1.RunState_RUN_STATE_COMPLETED:
			case run.GetState() == baagentv1.RunState_RUN_STATE_FAILED && strings.Contains(run.GetError().GetMessage(), svc):
			default:
				t.Fatalf("run with %s down: %s %v", svc, run.GetState(), run.GetError())
			}
			t.Logf("run with %s down ended %s in %s: %s %s", svc, run.GetState(), took.Round(time.Millisecond), run.GetError().GetCode(), run.GetError().GetMessage())

			// Restarted: a new run finishes.
			c.Start(svc)
			c.WaitServing(svc)
			runID = g.startRun(ctx, t, "peer fault after restart")
			if run := g.waitFinished(ctx, t, runID); run.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
				t.Fatalf("run after %s restarted: %s %v", svc, run.GetState(), run.GetError())
			}

			// Killed and restarted while a run is in a tool call: the
			// run's next call to the peer finds it back.
			runID = g.startRun(ctx, t, "slow peer fault")
			rec := &recorder{}
			errs := make(chan error, 1)
			go func() { errs <- g.followGRPC(ctx, runID, rec) }()
			testkit.EventuallyContext(ctx, t, "the sql_query act", func() (bool, string) { return rec.has(actOf("sql_query")), "" })
			c.Kill(svc)
			c.Start(svc)
			c.WaitServing(svc)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			evs := rec.snapshot()
			checkStream(t, "run "+runID, evs)
			if last := terminal(evs); last.GetType() != "complete" || last.GetComplete().GetContent() != fmt.Sprintf("Done: %d rows counted.", rows) {
				t.Errorf("run across a %s restart ended %s: %s %s", svc, last.GetType(), last.GetError().GetCode(), last.GetError().GetMessage())
			}
		})
	}
}
