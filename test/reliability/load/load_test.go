package load

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/baagent/baagent/services/orchestrator"
)

// Load test sizes. Runs per tenant stay below the orchestrator's
// per-tenant limit (runs queued or in progress), so that all runs are
// admitted at once; the total stays below its queue limit.
const (
	defaultLoadRuns = 1000
	// raceLoadRuns is the default under the race detector, which makes
	// every step 5-20x slower (SQLite, transpiled from C, most of all):
	// still hundreds of runs at once through every concurrent path.
	raceLoadRuns  = 250
	runsPerTenant = orchestrator.DefaultMaxRunsPerTenant * 3 / 4
	warmupRuns    = orchestrator.DefaultMaxConcurrentRuns
	submitClients = 128
	loadDeadline  = 170 * time.Second
)

// loadTolerance is how far above the pre-load baseline the process may
// stay once the load is over. What legitimately stays: the toolrunner
// keeps up to 256 recently used workspaces open (one descriptor each,
// bounded by design), idle HTTP/2 and HTTP/1 connections between the
// services and to the scripted model (a few goroutines and descriptors
// each), and bounded caches (token counts, JetStream's per-subject index
// of the streams).
var loadTolerance = Tolerance{Goroutines: 40, HeapInUse: 48 << 20, FDs: 256 + 40}

// TestLoad runs 1,000 runs of a three-step scenario concurrently through
// the gateway of an in-process -target=all suite with the scripted model,
// checks every run completed with the expected answer and contiguous
// events, reports the step times and the memory cost, and checks that
// goroutines, heap and descriptors come back to their baseline.
// BAAGENT_LOAD_RUNS changes the number of runs; BAAGENT_LOAD_REPORT names a
// file for the machine-readable result.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: not in -short")
	}
	runs := defaultLoadRuns
	if raceEnabled {
		runs = raceLoadRuns
	}
	runs = envInt(t, "BAAGENT_LOAD_RUNS", runs)
	if runs > orchestrator.DefaultMaxQueuedRuns {
		t.Fatalf("BAAGENT_LOAD_RUNS=%d: at most %d runs fit in the run queue at once", runs, orchestrator.DefaultMaxQueuedRuns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadDeadline)
	defer cancel()

	env := newEnv(ctx, t, (runs+runsPerTenant-1)/runsPerTenant, true)
	d := env.driver

	// Warm-up: lazy initialisation (connections, SQLite, caches) is not
	// growth. Then the baseline, once the suite is idle.
	env.runBatch(ctx, t, 0, warmupRuns)
	d.ResetStats()
	base, err := WaitQuiet(ctx, 3, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	writeHeapProfile(t, ".base")
	if err := ResetPeakRSS(); err != nil {
		t.Logf("peak RSS cannot be reset (%v): VmHWM covers the whole test process", err)
	}
	peak := StartPeak(50 * time.Millisecond)

	start := time.Now()
	ids := d.Submit(ctx, warmupRuns, runs, submitClients)
	submitted := time.Since(start)
	if err := d.WaitTerminals(ctx, warmupRuns+runs); err != nil {
		peak.Stop()
		t.Fatalf("%v; counters %+v; problems %v; suite logs:\n%s\ngoroutines:\n%s", err, d.Counters(), d.Problems(), env.suite.Logs, GoroutineProfile())
	}
	wall := time.Since(start)
	top, err := peak.Stop()
	if err != nil {
		t.Fatal(err)
	}
	c := d.Counters()
	if c.Refused != 0 || c.Failed != 0 || c.SeqErrors != 0 || c.NATSErrors != 0 || c.Completed != warmupRuns+runs {
		t.Fatalf("counters %+v, want all %d runs completed; problems:\n%v\nsuite logs:\n%s", c, warmupRuns+runs, d.Problems(), env.suite.Logs)
	}
	if problems := d.Verify(ctx, ids, warmupRuns, submitClients); len(problems) > 0 {
		t.Fatalf("runs read back through the gateway: %v", problems)
	}

	settleCtx, settleCancel := context.WithTimeout(ctx, 60*time.Second)
	defer settleCancel()
	settleStart := time.Now()
	after, err := WaitSettled(settleCtx, base, loadTolerance, 250*time.Millisecond)
	settled := time.Since(settleStart)
	steps, runTimes := d.Steps(), d.RunTimes()
	res := Result{
		Runs: runs, Steps: steps.Count(), MaxInFlight: c.MaxInFlight,
		WallSeconds: wall.Seconds(), SubmitSeconds: submitted.Seconds(), RunsPerSecond: float64(runs) / wall.Seconds(),
		StepP50ms: msf(steps.Quantile(0.5)), StepP99ms: msf(steps.Quantile(0.99)), StepMaxms: msf(steps.Max()),
		RunP50ms: msf(runTimes.Quantile(0.5)), RunP99ms: msf(runTimes.Quantile(0.99)),
		Base: base, Peak: top, After: after, SettleSeconds: settled.Seconds(),
		HeapPerRunBytes:     perRun(top.HeapInUse, base.HeapInUse, runs),
		RSSPerRunBytes:      perRun(top.PeakRSS, base.RSS, runs),
		RetainedPerRunBytes: perRun(after.HeapInUse, base.HeapInUse, runs),
		GoMaxProcs:          runtime.GOMAXPROCS(0), Race: raceEnabled,
		LoadAvg:      loadAvg(),
		DataDirBytes: dirBytes(env.dataDir),
	}
	res.report(t)
	writeHeapProfile(t, "")
	if err != nil {
		t.Fatalf("%v\nopen descriptors by kind: %v\ngoroutines:\n%s", err, FDKinds(), GoroutineProfile())
	}
	if c.MaxInFlight < runs*3/4 {
		t.Errorf("at most %d runs were in flight at once; the test must hold most of its %d runs queued or running together", c.MaxInFlight, runs)
	}
}

// Result is the machine-readable outcome of a load test.
type Result struct {
	Runs          int     `json:"runs"`
	Steps         uint64  `json:"steps"`
	MaxInFlight   int     `json:"max_in_flight"`
	WallSeconds   float64 `json:"wall_s"`
	SubmitSeconds float64 `json:"submit_s"`
	RunsPerSecond float64 `json:"runs_per_s"`
	StepP50ms     float64 `json:"step_p50_ms"`
	StepP99ms     float64 `json:"step_p99_ms"`
	StepMaxms     float64 `json:"step_max_ms"`
	RunP50ms      float64 `json:"run_p50_ms"`
	RunP99ms      float64 `json:"run_p99_ms"`

	Base, Peak, After   Sample
	SettleSeconds       float64 `json:"settle_s"`
	HeapPerRunBytes     float64 `json:"heap_per_run_bytes"`
	RSSPerRunBytes      float64 `json:"rss_per_run_bytes"`
	RetainedPerRunBytes float64 `json:"retained_heap_per_run_bytes"`
	GoMaxProcs          int     `json:"gomaxprocs"`
	Race                bool    `json:"race"`
	LoadAvg             string  `json:"loadavg"`
	// DataDirBytes is the suite's state on disk after the load: JetStream
	// (events, run records, history) and the conversations' workspaces.
	DataDirBytes int64 `json:"data_dir_bytes"`
}

func (r Result) report(t *testing.T) {
	t.Helper()
	t.Logf("%d runs × %d steps in %.1fs (submitted in %.1fs, %.1f runs/s), at most %d in flight; race=%v GOMAXPROCS=%d load %s",
		r.Runs, StepsPerRun, r.WallSeconds, r.SubmitSeconds, r.RunsPerSecond, r.MaxInFlight, r.Race, r.GoMaxProcs, r.LoadAvg)
	t.Logf("step time (step_start → next step_start/terminal): p50 %.1fms p99 %.1fms max %.1fms over %d steps; run (start → terminal) p50 %.0fms p99 %.0fms",
		r.StepP50ms, r.StepP99ms, r.StepMaxms, r.Steps, r.RunP50ms, r.RunP99ms)
	t.Logf("before: %s", r.Base)
	t.Logf("peak:   %s", r.Peak)
	t.Logf("after:  %s (settled in %.1fs)", r.After, r.SettleSeconds)
	t.Logf("on disk: %s in the data directory (%.0f KiB per run, workspaces included)", MiB(uint64(r.DataDirBytes)), float64(r.DataDirBytes)/1024/float64(r.Runs+warmupRuns))
	t.Logf("per run: heap %.1f KiB at peak, RSS %.1f KiB at peak, %.0f B heap retained", r.HeapPerRunBytes/1024, r.RSSPerRunBytes/1024, r.RetainedPerRunBytes)
	line, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load-result: %s", line)
	if path := os.Getenv("BAAGENT_LOAD_REPORT"); path != "" {
		if err := os.WriteFile(path, append(line, '\n'), 0o600); err != nil {
			t.Errorf("BAAGENT_LOAD_REPORT: %v", err)
		}
	}
}

// env is a running suite and a driver following it.
type env struct {
	suite   *Suite
	driver  *Driver
	dataDir string
}

// newEnv starts the suite with the load scenario and a driver; both stop
// when the test ends.
func newEnv(ctx context.Context, t *testing.T, tenants int, keep bool) *env {
	t.Helper()
	root := repoRoot(t)
	scenarios := t.TempDir()
	if err := WriteScenario(scenarios); err != nil {
		t.Fatal(err)
	}
	expected, err := ExpectedAnswer(filepath.Join(root, "examples", "data"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	s, err := StartSuite(ctx, SuiteOptions{RepoRoot: root, DataDir: dataDir, ScenariosDir: scenarios, Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("suite shutdown: %v", err)
		}
	})
	d, err := NewDriver(DriverOptions{
		GatewayAddr: s.App.Addr("gateway").String(),
		NATSURL:     s.App.NATS().ConnectedUrl(),
		Keys:        s.Keys,
		Expected:    expected,
		Keep:        keep,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return &env{suite: s, driver: d, dataDir: dataDir}
}

// runBatch runs n runs from run first and fails the test unless all
// complete.
func (e *env) runBatch(ctx context.Context, t *testing.T, first, n int) {
	t.Helper()
	want := e.driver.Counters().Terminals + n
	e.driver.Submit(ctx, first, n, submitClients)
	if err := e.driver.WaitTerminals(ctx, want); err != nil {
		t.Fatalf("%v; problems %v; suite logs:\n%s", err, e.driver.Problems(), e.suite.Logs)
	}
	if c := e.driver.Counters(); c.Failed != 0 || c.Refused != 0 {
		t.Fatalf("counters %+v; problems %v; suite logs:\n%s", c, e.driver.Problems(), e.suite.Logs)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// writeHeapProfile writes a heap profile to BAAGENT_LOAD_HEAPPROFILE plus
// suffix, if set, to see what stays after the load:
// go tool pprof -sample_index=inuse_space -diff_base=P.base P.
func writeHeapProfile(t *testing.T, suffix string) {
	path := os.Getenv("BAAGENT_LOAD_HEAPPROFILE")
	if path == "" {
		return
	}
	path += suffix
	f, err := os.Create(path)
	if err != nil {
		t.Errorf("BAAGENT_LOAD_HEAPPROFILE: %v", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Errorf("BAAGENT_LOAD_HEAPPROFILE: %v", err)
	}
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func perRun(peak, base uint64, runs int) float64 {
	if peak < base {
		return 0
	}
	return float64(peak-base) / float64(runs)
}

// loadAvg is the 1-, 5- and 15-minute load averages.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(data) == 0 {
		return "unknown"
	}
	f := string(data)
	for i, n := 0, 0; i < len(f); i++ {
		if f[i] == ' ' {
			if n++; n == 3 {
				return f[:i]
			}
		}
	}
	return f
}
