package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/orchestrator/internal/workplan"
)

// faultPlanScenario plans two steps; step 1 writes a note (a side effect)
// and runs a slow query, step 2 runs slow queries, so that a kill lands
// in the middle of step 2.
const faultPlanScenario = `name: fault-plan
match:
  contains: [ "fault plan test" ]
turns:
  - tool_calls:
      - name: plan
        arguments:
          steps:
            - { description: write the first note, expected_output: a note }
            - { description: count a lot, expected_output: a count }
  - tool_calls:
      - name: note_write
        arguments: { note: "first" }
  - tool_calls:
      - name: update_plan
        arguments: { reason: written, mark: { step_number: 1, status: completed, summary: note written } }
  - tool_calls:
      - name: sql_query
        arguments:
          query: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 400000) SELECT count(*) AS n FROM c"
  - tool_calls:
      - name: sql_query
        arguments:
          query: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000) SELECT count(*) AS n FROM c"
  - tool_calls:
      - name: update_plan
        arguments: { reason: counted, mark: { step_number: 2, status: completed, summary: counted } }
  - text: "Planned and done: {{ with index .AllToolResults 4 }}{{ .Content | firstRow | cell 0 }}{{ end }} rows counted."
`

// TestFaultKillReplicaMidPlan kills (SIGKILL) the orchestrator process
// executing a planned run while plan step 2 is in progress; the other
// replica resumes the run at step 2: step 1's write is not executed again,
// its plan_step_start and plan_step_end are not published again, and the
// run completes with every step completed.
func TestFaultKillReplicaMidPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/baagent and runs processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fc := startFaultCluster(ctx, t, "fault-plan.yaml", faultPlanScenario)
	replicas := []*replicaProc{fc.start("r0"), fc.start("r1")}
	js, cps, store, counting := fc.js, fc.cps, fc.store, fc.counting

	var run *baagentv1.Run
	testkit.EventuallyContext(ctx, t, "StartRun on a starting replica", func() (bool, string) {
		resp, err := baagentv1.NewOrchestratorServiceClient(dial(t, replicas[0].addr)).StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{
			Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "fault plan test", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS},
		})
		run = resp.GetRun()
		return err == nil, fmt.Sprint(err)
	})
	// Wait until step 2 is in progress, then kill its replica. Polled at
	// Eventually's short fixed interval: step 2 lasts only a moment.
	var owner string
	deadline, _ := ctx.Deadline()
	testkit.Eventually(t, time.Until(deadline), "the run reaching plan step 2", func() bool {
		cp, _, err := cps.Load(ctx, testTenant, run.GetRunId())
		if err == nil && cp != nil && cp.Plan != nil && cp.Plan.Decode() == nil && cp.Plan.Phase == workplan.PhaseExecuting &&
			cp.Plan.StepStarted && cp.Plan.WorkPlan().GetCurrentStep() == 2 {
			owner = cp.Owner
		}
		return owner != ""
	})
	killed := false
	for i, p := range replicas {
		if replicaName(p) == owner {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			killed = true
			replicas[i] = fc.start("r-restarted")
		}
	}
	if !killed {
		t.Fatalf("owner %s is not one of the replicas", owner)
	}
	waitFinishedRecord(ctx, t, store, run.GetRunId(), "after the kill")
	rec, _, err := store.Get(ctx, testTenant, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	if rec.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || !strings.HasPrefix(rec.GetFinalAnswer(), "Planned and done: 300000 rows") {
		t.Fatalf("run %s %q %v", rec.GetState(), rec.GetFinalAnswer(), rec.GetError())
	}
	evs := readEvents(ctx, t, js, testTenant, run.GetRunId())
	checkEnvelope(t, run, evs)
	starts, ends := planStepNumbers(evs)
	if len(starts) < 2 || starts[0] != 1 || starts[1] != 2 || countInt(starts, 1) != 1 || len(ends) != 2 || ends[0] != 1 || ends[1] != 2 {
		t.Errorf("plan steps started %v ended %v: %v", starts, ends, types(evs))
	}
	if n := counting.count(run.GetRunId() + ":s2:c0"); n != 1 {
		t.Errorf("step 1's note_write ran %d times", n)
	}
	for _, st := range rec.GetPlan().GetSteps() {
		if st.GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED {
			t.Errorf("plan step %v", st)
		}
	}
}

func countInt(s []int32, v int32) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
