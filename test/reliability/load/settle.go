package load

import (
	"context"
	"fmt"
	"time"
)

// Tolerance is how far above a baseline a resource may stay.
type Tolerance struct {
	Goroutines int
	HeapInUse  uint64
	FDs        int
}

// Within reports whether s is within tol of base, and if not, why.
func (tol Tolerance) Within(base, s Sample) (bool, string) {
	var why string
	if s.Goroutines > base.Goroutines+tol.Goroutines {
		why += fmt.Sprintf(" goroutines %d > %d+%d;", s.Goroutines, base.Goroutines, tol.Goroutines)
	}
	if s.HeapInUse > base.HeapInUse+tol.HeapInUse {
		why += fmt.Sprintf(" heap %s > %s+%s;", MiB(s.HeapInUse), MiB(base.HeapInUse), MiB(tol.HeapInUse))
	}
	if s.FDs > base.FDs+tol.FDs {
		why += fmt.Sprintf(" fds %d > %d+%d;", s.FDs, base.FDs, tol.FDs)
	}
	return why == "", why
}

// WaitSettled polls (after a GC each time) until the resource use is within
// tol of base, and returns the last sample; the error says what stayed
// above when ctx ends first.
func WaitSettled(ctx context.Context, base Sample, tol Tolerance, every time.Duration) (Sample, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s, err := ReadSample(true)
		if err != nil {
			return s, err
		}
		ok, why := tol.Within(base, s)
		if ok {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("not back to baseline (%s) after the deadline:%s", base, why)
		case <-t.C:
		}
	}
}

// WaitQuiet polls until the goroutine count is the same on `n`
// consecutive samples taken `every` apart (the suite is idle), or ctx ends;
// it returns the last sample, taken after a GC.
func WaitQuiet(ctx context.Context, n int, every time.Duration) (Sample, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, same := -1, 0
	for {
		s, err := ReadSample(true)
		if err != nil {
			return s, err
		}
		if s.Goroutines == last {
			same++
		} else {
			last, same = s.Goroutines, 1
		}
		if same >= n {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("goroutines never settled (last %d): %w", last, ctx.Err())
		case <-t.C:
		}
	}
}

// Peak samples resource use every `every` until stopped and keeps the
// highest value of each.
type Peak struct {
	stop chan struct{}
	done chan struct{}
	max  Sample
	err  error
}

// StartPeak starts sampling.
func StartPeak(every time.Duration) *Peak {
	p := &Peak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s, err := ReadSample(false)
			if err != nil {
				p.err = err
				return
			}
			p.max.Goroutines = max(p.max.Goroutines, s.Goroutines)
			p.max.HeapInUse = max(p.max.HeapInUse, s.HeapInUse)
			p.max.RSS = max(p.max.RSS, s.RSS)
			p.max.PeakRSS = max(p.max.PeakRSS, s.PeakRSS)
			p.max.FDs = max(p.max.FDs, s.FDs)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// Stop stops sampling and returns the peaks.
func (p *Peak) Stop() (Sample, error) {
	close(p.stop)
	<-p.done
	return p.max, p.err
}
