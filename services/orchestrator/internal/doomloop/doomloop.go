// Package doomloop detects a run stuck in a loop
// (docs/concepts/runs.md): the same tool with the same arguments called
// Threshold times within Window among the last Calls calls means the model
// is stuck; the run asks the user whether to stop, continue or correct.
package doomloop

import (
	"time"
)

// The detector's parameters: threshold, time window and detection window.
const (
	Threshold = 3
	Window    = 60 * time.Second
	Calls     = 10
)

// Call is one call in the detection window. Args are the model's
// arguments verbatim, compared for equality. It is
// stored in the run's checkpoint.
type Call struct {
	Tool string    `json:"tool"`
	Args string    `json:"args"`
	At   time.Time `json:"at"`
}

// Detector keeps the last Calls calls of a run. The zero value is ready
// to use.
type Detector struct {
	calls []Call
}

// Observe records a call and reports whether it completes a loop: with
// it, Threshold calls of the window have its tool and arguments within
// Window.
func (d *Detector) Observe(tool, args string, at time.Time) bool {
	d.calls = append(d.calls, Call{Tool: tool, Args: args, At: at})
	if len(d.calls) > Calls {
		d.calls = d.calls[len(d.calls)-Calls:]
	}
	same := 0
	for _, c := range d.calls {
		if c.Tool == tool && c.Args == args && at.Sub(c.At) < Window {
			same++
		}
	}
	return same >= Threshold
}

// Forget drops the calls of tool with args, so that after the user's
// decision the same call is counted afresh.
func (d *Detector) Forget(tool, args string) {
	kept := d.calls[:0]
	for _, c := range d.calls {
		if c.Tool != tool || c.Args != args {
			kept = append(kept, c)
		}
	}
	d.calls = kept
}

// Window returns a copy of the detection window, for a checkpoint.
func (d *Detector) Window() []Call { return append([]Call(nil), d.calls...) }

// Restore sets the detection window from a checkpoint's.
func (d *Detector) Restore(calls []Call) {
	d.calls = append(d.calls[:0], calls...)
	if len(d.calls) > Calls {
		d.calls = d.calls[len(d.calls)-Calls:]
	}
}
