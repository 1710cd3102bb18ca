package doomloop

import (
	"testing"
	"time"
)

func TestObserveFlagsTheThirdSameCallWithinTheWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000, 0)
	for _, tc := range []struct {
		name  string
		calls []Call
		want  []bool
	}{
		{"same call three times", []Call{{"q", "1", t0}, {"q", "1", t0.Add(time.Second)}, {"q", "1", t0.Add(2 * time.Second)}}, []bool{false, false, true}},
		{"other arguments", []Call{{"q", "1", t0}, {"q", "2", t0}, {"q", "1", t0}}, []bool{false, false, false}},
		{"other tool", []Call{{"q", "1", t0}, {"r", "1", t0}, {"q", "1", t0}}, []bool{false, false, false}},
		{"first call out of the time window", []Call{{"q", "1", t0}, {"q", "1", t0.Add(Window)}, {"q", "1", t0.Add(Window + time.Second)}}, []bool{false, false, false}},
	} {
		var d Detector
		for i, c := range tc.calls {
			if got := d.Observe(c.Tool, c.Args, c.At); got != tc.want[i] {
				t.Errorf("%s: call %d: Observe = %v, want %v", tc.name, i, got, tc.want[i])
			}
		}
	}
}

func TestDetectionWindowKeepsTheLastCalls(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000, 0)
	var d Detector
	d.Observe("q", "1", t0)
	d.Observe("q", "1", t0)
	for i := range Calls - 1 {
		d.Observe("other", string(rune('a'+i)), t0)
	}
	if d.Observe("q", "1", t0) {
		t.Error("a call that left the detection window still counts")
	}
	if n := len(d.Window()); n != Calls {
		t.Errorf("window holds %d calls, want %d", n, Calls)
	}
}

func TestForgetAndRestore(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000, 0)
	var d Detector
	d.Observe("q", "1", t0)
	d.Observe("q", "1", t0)
	d.Forget("q", "1")
	if d.Observe("q", "1", t0) || len(d.Window()) != 1 {
		t.Errorf("forgotten calls still count: %v", d.Window())
	}
	var r Detector
	many := make([]Call, Calls+3)
	r.Restore(many)
	if len(r.Window()) != Calls {
		t.Errorf("restored window holds %d calls, want %d", len(r.Window()), Calls)
	}
	w := r.Window()
	w[0].Tool = "changed"
	if r.Window()[0].Tool == "changed" {
		t.Error("Window shares the detector's storage")
	}
}
