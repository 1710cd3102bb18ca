package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// planSteps is how many plan steps a planned benchmark run makes; each
// runs (stepsPerRun-1)/planSteps no-op iterations, the last also marking
// the step completed.
const planSteps = 3

// planningModel answers at once. Offered the plan tool, it plans
// planSteps steps; then it calls the no-op tool stepsPerRun-1 times in
// all, marking a plan step completed (update_plan, in the same response)
// with every third call; then it answers. Without the plan tool (plan
// NEVER) it is instantModel.
func planningModel(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	noops, planned := 0, false
	for _, m := range req.Messages {
		for _, c := range m.GetToolCalls() {
			noops += boolInt(c.GetName() == "noop")
			planned = planned || c.GetName() == "plan"
		}
	}
	offered := toolNames(req)
	switch {
	case !planned && slices.Contains(offered, "plan"):
		return callTools("", "plan", "plan", `{"steps":[{"description":"a","expected_output":"x"},{"description":"b","expected_output":"y"},{"description":"c","expected_output":"z"}]}`), nil
	case noops >= stepsPerRun-1 || len(offered) == 0:
		return answer("done"), nil
	}
	resp := callTools("", fmt.Sprintf("call_%d", noops), "noop", fmt.Sprintf(`{"i":%d}`, noops))
	per := (stepsPerRun - 1) / planSteps
	if slices.Contains(offered, "update_plan") && (noops+1)%per == 0 {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, &baagentv1.ToolCall{
			Id: fmt.Sprintf("mark_%d", noops), Name: "update_plan",
			Arguments: fmt.Sprintf(`{"reason":"done","mark":{"step_number":%d,"status":"completed","summary":"ok"}}`, (noops+1)/per),
		})
	}
	return resp, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkReActStepPlanned compares the platform's overhead per ReAct
// step of a planned run with an unplanned one, in -target=all wiring
// (as BenchmarkReActStep/target-all), one run at a time. Both make the
// same stepsPerRun-1 no-op tool calls; the planned run adds its plan call
// and a synthesis iteration (two model calls) and marks its steps in the
// same responses as the calls. Reported per step as in BenchmarkReActStep,
// and the wall time per run.
func BenchmarkReActStepPlanned(b *testing.B) {
	for _, variant := range []struct {
		name string
		mode baagentv1.PlanMode
	}{
		{"unplanned", baagentv1.PlanMode_PLAN_MODE_NEVER},
		{"planned", baagentv1.PlanMode_PLAN_MODE_ALWAYS},
	} {
		b.Run(variant.name, func(b *testing.B) {
			h := newHarness(b, planningModel, harnessOptions{inproc: true, real: realContextNoopTools, mutate: func(o *Options) { o.MaxConcurrentRuns = 16 }})
			ends := h.watchEnds()
			ctx := context.Background()
			runs := make([]*baagentv1.Run, 0, b.N)
			b.ResetTimer()
			began := time.Now()
			for range b.N {
				run := h.start(ctx, &baagentv1.RunSpec{Input: "bench", Plan: variant.mode})
				h.waitForgotten(ctx, ends, run.GetRunId())
				runs = append(runs, run)
			}
			elapsed := time.Since(began)
			b.StopTimer()
			var steps, toolSteps []float64
			plans := 0
			for _, run := range runs {
				evs := h.events(ctx, run.GetRunId())
				steps = append(steps, stepTimes(b, evs)...)
				toolSteps = append(toolSteps, noopStepTimes(evs)...)
				plans += countType(evs, "plan_step_end")
			}
			slices.Sort(toolSteps)
			b.ReportMetric(percentile(toolSteps, 0.50), "p50-ms/noop-step")
			if want := b.N * planSteps * boolInt(variant.mode == baagentv1.PlanMode_PLAN_MODE_ALWAYS); plans != want {
				b.Fatalf("%d plan steps ended, want %d", plans, want)
			}
			slices.Sort(steps)
			b.ReportMetric(percentile(steps, 0.50), "p50-ms/step")
			b.ReportMetric(percentile(steps, 0.99), "p99-ms/step")
			b.ReportMetric(float64(len(steps))/float64(b.N), "steps/run")
			b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/run")
		})
	}
}

// realContextNoopTools is the real context service with the fake
// toolrunner's no-op tool, as BenchmarkReActStep's real variants use.
func realContextNoopTools(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
	cs, _ := realPeers(t, js, tokens)
	return cs, newFakeToolRunner()
}

// noopStepTimes returns the time in ms of each step whose only tool call
// is the no-op tool (the steps both variants make alike), from its
// step_start to the next step_start.
func noopStepTimes(evs []*baagentv1.Event) []float64 {
	var out []float64
	var from time.Time
	var tools []string
	for _, e := range evs {
		if a := e.GetAct(); a != nil {
			tools = append(tools, a.GetToolName())
		}
		if e.GetStepStart() == nil && e.GetComplete() == nil {
			continue
		}
		at := e.GetTs().AsTime()
		if !from.IsZero() && slices.Equal(tools, []string{"noop"}) {
			out = append(out, float64(at.Sub(from).Microseconds())/1000)
		}
		from, tools = at, nil
	}
	return out
}
