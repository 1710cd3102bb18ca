package load

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Soak settings (environment):
//
//	BAAGENT_SOAK=30m            run the soak for this long (unset: skipped)
//	BAAGENT_SOAK_RATE=10        runs started per second
//	BAAGENT_SOAK_SAMPLE=10s     resource sampling interval
//	BAAGENT_SOAK_REPORT=file    write the machine-readable result there
//
// The first fifth of the duration (at least 3 minutes, at most half) is
// warm-up: caches fill, the toolrunner's open-workspace cache reaches its
// bound, JetStream's duplicate window turns over and it sizes its buffers.
// With BAAGENT_LOAD_HEAPPROFILE=P, heap profiles are written to P.first
// (end of warm-up) and P (end) for go tool pprof -diff_base. Then the median of the first window of samples is
// compared with the median of the last window.
const (
	soakMaxInFlight = 500
	// soakHeapPerRun bounds heap growth per run between the windows. What
	// may grow with the number of runs: the embedded JetStream's in-memory
	// index of the subjects it stores (one event subject per run, one
	// run-record key, one history subject per conversation), bounded by
	// the streams' age and size limits, not by the soak's length.
	soakHeapPerRun = 2 << 10
	// soakRSSPerRun bounds resident-memory growth per run likewise.
	soakRSSPerRun = 4 << 10
)

// TestSoak keeps a steady rate of runs through the suite for
// BAAGENT_SOAK, samples goroutines, heap, RSS and descriptors, and fails on
// growth between the first and last windows after warm-up, on any failed
// run, or if the suite cannot keep up with the rate.
func TestSoak(t *testing.T) {
	spec := os.Getenv("BAAGENT_SOAK")
	if spec == "" {
		t.Skip("soak: set BAAGENT_SOAK=30m (make soak)")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < time.Minute {
		t.Fatalf("BAAGENT_SOAK=%q: want a duration of at least 1m", spec)
	}
	rate := 10.0
	if v := os.Getenv("BAAGENT_SOAK_RATE"); v != "" {
		if rate, err = strconv.ParseFloat(v, 64); err != nil || rate <= 0 || rate > 1000 {
			t.Fatalf("BAAGENT_SOAK_RATE=%q: want runs per second in (0, 1000]", v)
		}
	}
	every := 10 * time.Second
	if v := os.Getenv("BAAGENT_SOAK_SAMPLE"); v != "" {
		if every, err = time.ParseDuration(v); err != nil || every < time.Second {
			t.Fatalf("BAAGENT_SOAK_SAMPLE=%q: want a duration of at least 1s", v)
		}
	}
	// Warm-up outlasts the streams' two-minute duplicate window, whose
	// message ids fill the server's memory until it turns over.
	warm := min(max(dur/5, 3*time.Minute), dur/2)

	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	e := newEnv(ctx, t, (soakMaxInFlight+runsPerTenant-1)/runsPerTenant, false)
	d := e.driver

	// A fixed pool of submitters fed by a ticker: a tick that finds them
	// all busy, or too many runs in flight, is counted as missed.
	work := make(chan int, submitClients)
	var wg sync.WaitGroup
	for range submitClients {
		wg.Go(func() {
			for i := range work {
				_, _ = d.Start(ctx, i)
			}
		})
	}
	var samples []timedSample
	start := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	sample := time.NewTicker(every)
	missed, ticks := 0, 0
	for time.Since(start) < dur && !t.Failed() {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
			ticks++
			c := d.Counters()
			if c.Accepted-c.Terminals >= soakMaxInFlight {
				missed++
				continue
			}
			select {
			case work <- ticks:
			default:
				missed++
			}
		case <-sample.C:
			s, err := ReadSample(true)
			if err != nil {
				t.Fatal(err)
			}
			c := d.Counters()
			if len(samples) > 0 && samples[len(samples)-1].At < warm && time.Since(start) >= warm {
				writeHeapProfile(t, ".first")
			}
			samples = append(samples, timedSample{At: time.Since(start), Runs: c.Terminals, Sample: s})
			t.Logf("%6.0fs runs=%d in_flight=%d %s", time.Since(start).Seconds(), c.Terminals, c.Accepted-c.Terminals, s)
			if c.Failed > 0 || c.SeqErrors > 0 || c.NATSErrors > 0 {
				t.Fatalf("counters %+v; problems %v; suite logs:\n%s", c, d.Problems(), e.suite.Logs)
			}
		}
	}
	tick.Stop()
	sample.Stop()
	close(work)
	wg.Wait()
	c := d.Counters()
	if err := d.WaitTerminals(ctx, c.Accepted); err != nil {
		t.Fatalf("runs still unfinished after the soak: %v; problems %v\ngoroutines:\n%s", err, d.Problems(), GoroutineProfile())
	}
	c = d.Counters()
	steps := d.Steps()
	res := soakResult{
		Duration: dur.String(), Rate: rate, Runs: c.Terminals, Completed: c.Completed, Failed: c.Failed + c.Refused,
		Missed: missed, Ticks: ticks, StepP50ms: msf(steps.Quantile(0.5)), StepP99ms: msf(steps.Quantile(0.99)),
		LoadAvg: loadAvg(), Race: raceEnabled,
	}
	res.First, res.Last, res.Growth = compareWindows(samples, warm)
	writeHeapProfile(t, "")
	line, _ := json.Marshal(res)
	t.Logf("soak-result: %s", line)
	if path := os.Getenv("BAAGENT_SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, append(line, '\n'), 0o600); err != nil {
			t.Errorf("BAAGENT_SOAK_REPORT: %v", err)
		}
	}
	if c.Failed != 0 || c.Refused != 0 || c.Completed != c.Accepted {
		t.Errorf("counters %+v; problems %v", c, d.Problems())
	}
	if missed*100 > ticks {
		t.Errorf("the suite did not keep up with %.1f runs/s: %d of %d starts missed (in flight at the limit or submitters busy)", rate, missed, ticks)
	}
	for _, problem := range res.Growth.problems() {
		t.Error(problem)
	}
}

// timedSample is one resource sample of the soak.
type timedSample struct {
	At   time.Duration
	Runs int // runs finished so far
	Sample
}

type soakResult struct {
	Duration  string  `json:"duration"`
	Rate      float64 `json:"rate_per_s"`
	Runs      int     `json:"runs"`
	Completed int     `json:"completed"`
	Failed    int     `json:"failed"`
	Missed    int     `json:"missed_starts"`
	Ticks     int     `json:"starts"`
	StepP50ms float64 `json:"step_p50_ms"`
	StepP99ms float64 `json:"step_p99_ms"`
	LoadAvg   string  `json:"loadavg"`
	Race      bool    `json:"race"`

	First, Last timedSample
	Growth      growth
}

// growth is how much the last window exceeds the first.
type growth struct {
	Runs                  int
	Goroutines, FDs       int
	HeapBytes, RSSBytes   int64
	HeapPerRun, RSSPerRun float64
	Err                   string `json:",omitempty"`
}

// compareWindows returns the medians of the first and last windows of
// samples after warm-up (each a fifth of them, at least three) and the
// growth between them.
func compareWindows(samples []timedSample, warm time.Duration) (first, last timedSample, g growth) {
	var after []timedSample
	for _, s := range samples {
		if s.At >= warm {
			after = append(after, s)
		}
	}
	n := max(3, len(after)/5)
	if len(after) < 2*n {
		g.Err = fmt.Sprintf("only %d samples after the %s warm-up; need %d: soak longer or sample more often", len(after), warm, 2*n)
		return first, last, g
	}
	first, last = median(after[:n]), median(after[len(after)-n:])
	g.Runs = last.Runs - first.Runs
	g.Goroutines = last.Goroutines - first.Goroutines
	g.FDs = last.FDs - first.FDs
	g.HeapBytes = int64(last.HeapInUse) - int64(first.HeapInUse)
	g.RSSBytes = int64(last.RSS) - int64(first.RSS)
	if g.Runs > 0 {
		g.HeapPerRun = float64(g.HeapBytes) / float64(g.Runs)
		g.RSSPerRun = float64(g.RSSBytes) / float64(g.Runs)
	}
	return first, last, g
}

// median takes the median of each measure over the window.
func median(w []timedSample) timedSample {
	mid := func(vals []float64) float64 {
		slices.Sort(vals)
		return vals[len(vals)/2]
	}
	pick := func(f func(timedSample) float64) float64 {
		vals := make([]float64, len(w))
		for i, s := range w {
			vals[i] = f(s)
		}
		return mid(vals)
	}
	return timedSample{
		At:   time.Duration(pick(func(s timedSample) float64 { return float64(s.At) })),
		Runs: int(pick(func(s timedSample) float64 { return float64(s.Runs) })),
		Sample: Sample{
			Goroutines: int(pick(func(s timedSample) float64 { return float64(s.Goroutines) })),
			HeapInUse:  uint64(pick(func(s timedSample) float64 { return float64(s.HeapInUse) })),
			RSS:        uint64(pick(func(s timedSample) float64 { return float64(s.RSS) })),
			PeakRSS:    uint64(pick(func(s timedSample) float64 { return float64(s.PeakRSS) })),
			FDs:        int(pick(func(s timedSample) float64 { return float64(s.FDs) })),
		},
	}
}

// problems lists the growth beyond the soak's tolerances: goroutines and
// descriptors must not grow (a little noise allowed), memory not by more
// than a bounded index's share per run.
func (g growth) problems() []string {
	if g.Err != "" {
		return []string{g.Err}
	}
	var out []string
	if g.Goroutines > 10 {
		out = append(out, fmt.Sprintf("goroutines grew by %d over %d runs", g.Goroutines, g.Runs))
	}
	if g.FDs > 10 {
		out = append(out, fmt.Sprintf("open descriptors grew by %d over %d runs", g.FDs, g.Runs))
	}
	if g.HeapPerRun > soakHeapPerRun {
		out = append(out, fmt.Sprintf("heap grew by %s over %d runs (%.0f B per run; the bound is %d)", MiB(uint64(g.HeapBytes)), g.Runs, g.HeapPerRun, soakHeapPerRun))
	}
	if g.RSSPerRun > soakRSSPerRun {
		out = append(out, fmt.Sprintf("RSS grew by %s over %d runs (%.0f B per run; the bound is %d)", MiB(uint64(g.RSSBytes)), g.Runs, g.RSSPerRun, soakRSSPerRun))
	}
	return out
}
