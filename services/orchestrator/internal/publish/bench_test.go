package publish

import (
	"context"
	"strconv"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
)

// BenchmarkEmit is the cost of one event published pipelined (every run)
// and fenced (a run that may have a sub-agent working: one conditional
// publish and its ack per event), flushed every 8 events like a step.
func BenchmarkEmit(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	js, _ := natstest.Connect(b, natstest.StartNATS(b).ClientURL(), "bench")
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		b.Fatal(err)
	}
	for _, fenced := range []bool{false, true} {
		b.Run("fenced="+strconv.FormatBool(fenced), func(b *testing.B) {
			p, err := New(js, &baagentv1.Run{Tenant: "acme", RunId: "run_bench_" + strconv.FormatInt(time.Now().UnixNano(), 10)}, "")
			if err != nil {
				b.Fatal(err)
			}
			if err := p.EmitNow(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{}}}); err != nil {
				b.Fatal(err)
			}
			if fenced {
				if err := p.Fence(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := p.Emit(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: "a thought of a few words"}}}); err != nil {
					b.Fatal(err)
				}
				if i++; i%8 == 0 {
					if err := p.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
