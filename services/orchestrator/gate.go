package orchestrator

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// Gates settle the step's tool calls that the toolrunner must not simply
// run: a call that completes a doom loop, a question for the user, a call
// the toolrunner refused for want of the user's approval, a delegation to
// a sub-agent. runTools passes each call without a result through an
// ordered list of gates; the first gate that settles it (answers it, or
// pauses the run on a question about it) ends its passage.

// gate is one check of a tool call.
type gate interface {
	// applies reports whether the gate concerns the call.
	applies(c gateCall) bool
	// check settles the call or lets it through. An error ends the run.
	check(ctx context.Context, r *run, c gateCall) (verdict, error)
}

// beforeRun are the gates a call passes, in the model's order of the
// calls, before any call of the step runs: the user decides about a doom
// loop before the repeated call runs, and questions are asked before
// anything else happens.
var beforeRun = []gate{doomLoopGate{}, askGate{}, planGate{}}

// afterRun settle, in the model's order, the calls the toolrunner did not
// answer: a delegation starts once the step's other calls are done, and a
// refused call is asked about once it is known to need approval. Every
// call left without a result after the toolrunner is one of theirs.
var afterRun = []gate{taskGate{}, permissionGate{}}

// gateCall is the call a gate looks at.
type gateCall struct {
	i    int // position in the step's tool calls
	call *baagentv1.ToolCall
	rec  checkpoint.ToolRecord // its record when the gate looks at it
	st   *stepState
	ts   *toolset
	// caller is who makes the step's calls: the innermost skill active
	// when the step began (activations in the step apply from the next).
	caller string
}

// verdictKind is what a gate makes of a call.
type verdictKind uint8

const (
	// verdictPass: not settled here; the next gate looks, then the call runs.
	verdictPass verdictKind = iota
	// verdictAnswered: res is the call's result; it does not run (again).
	verdictAnswered
	// verdictWaiting: the run pauses on a question about the call (r.paused).
	verdictWaiting
)

// verdict is a gate's decision about a call.
type verdict struct {
	kind verdictKind
	res  *callResult
}

func answeredBy(res *callResult) verdict { return verdict{kind: verdictAnswered, res: res} }

// askUser pauses the run on w, a question about the step's call i.
func (r *run) askUser(i int, w *hitl.Wait) (verdict, error) {
	return verdict{kind: verdictWaiting}, r.pause(i, w)
}

// gateCalls passes every call still without a result through gates, in
// the model's order; a call answered is completed (published and
// checkpointed) at once. It returns true when the run pauses.
func (r *run) gateCalls(ctx context.Context, gates []gate, st *stepState, ts *toolset, caller string, results []*callResult) (bool, error) {
	for i, c := range st.msg.GetToolCalls() {
		if results[i] != nil {
			continue
		}
		gc := gateCall{i: i, call: c, rec: st.record(i), st: st, ts: ts, caller: caller}
		for _, g := range gates {
			if !g.applies(gc) {
				continue
			}
			v, err := g.check(ctx, r, gc)
			if err != nil {
				return false, err
			}
			if v.kind == verdictWaiting {
				return true, nil
			}
			if v.kind == verdictAnswered {
				if err := r.complete(st, i, v.res); err != nil {
					return false, err
				}
				results[i] = v.res
				break
			}
			gc.rec = st.record(i) // a gate that passes may have noted a decision
		}
	}
	return false, nil
}
