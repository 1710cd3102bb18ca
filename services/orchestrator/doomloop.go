package orchestrator

import (
	"time"
)

// The doom-loop detector (see docs/concepts/runs.md#doom-loops): the same tool
// with the same arguments called `threshold` times within `time_window_ms`
// among the last `detection_window` calls means the model is stuck; the run
// asks the user whether to stop, continue or correct.
const (
	doomThreshold = 3
	doomWindow    = 60 * time.Second
	doomCalls     = 10
)

// callSig is one call in the detection window. Args are the model's
// arguments verbatim, compared for equality.
type callSig struct {
	Tool string    `json:"tool"`
	Args string    `json:"args"`
	At   time.Time `json:"at"`
}

// doomDetector keeps the last doomCalls calls of a run.
type doomDetector struct {
	calls []callSig
}

// observe records a call and reports whether it completes a loop: with
// it, doomThreshold calls of the window have its tool and arguments within
// doomWindow.
func (d *doomDetector) observe(tool, args string, at time.Time) bool {
	d.calls = append(d.calls, callSig{Tool: tool, Args: args, At: at})
	if len(d.calls) > doomCalls {
		d.calls = d.calls[len(d.calls)-doomCalls:]
	}
	same := 0
	for _, c := range d.calls {
		if c.Tool == tool && c.Args == args && at.Sub(c.At) < doomWindow {
			same++
		}
	}
	return same >= doomThreshold
}

// forget drops the calls of tool with args, so that after the user's
// decision the same call is counted afresh.
func (d *doomDetector) forget(tool, args string) {
	kept := d.calls[:0]
	for _, c := range d.calls {
		if c.Tool != tool || c.Args != args {
			kept = append(kept, c)
		}
	}
	d.calls = kept
}

func (d *doomDetector) window() []callSig { return append([]callSig(nil), d.calls...) }

func (d *doomDetector) restore(calls []callSig) {
	d.calls = append(d.calls[:0], calls...)
	if len(d.calls) > doomCalls {
		d.calls = d.calls[len(d.calls)-doomCalls:]
	}
}
