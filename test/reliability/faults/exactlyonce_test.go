package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcclient"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/reliability/harness"
)

// Exactly-once tool effects across crashes and replicas. Each test runs
// the suite with two toolrunner replicas (peers dial both through a
// static:/// target; workspaces and artifacts shared) that each run the MCP
// server test/mcp/appendserver, whose one tool, append_line, has a side
// effect: it appends its line to a file shared by both, 400 ms after it
// began (recorded in a second file, the "started" file, with the pid of
// the toolrunner that runs it). Four runs of five steps each append a
// distinct line ("run<i>-step<k>") while a process is killed or NATS
// restarted; afterwards each line must be in the file exactly once (at
// most once when the toolrunner executing it was killed, the call's
// observation then being TOOL_OUTCOME_UNKNOWN unless it completed).

const (
	eoRuns, eoSteps = 4, 5
	eoServer        = "ledger"
	eoTool          = "mcp__" + eoServer + "__append_line"
	// codeOutcomeUnknown is the observation's error code for a call whose
	// toolrunner died mid-call, so that nobody knows whether it took effect.
	codeOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN"
)

var appendServer struct {
	once sync.Once
	bin  string
	err  error
}

// appendServerBin builds test/mcp/appendserver once per test binary.
func appendServerBin(t *testing.T) string {
	t.Helper()
	appendServer.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		appendServer.bin, appendServer.err = harness.BuildAppendServer(ctx, harness.RepoRoot(t), buildDir)
	})
	if appendServer.err != nil {
		t.Fatal(appendServer.err)
	}
	return appendServer.bin
}

// eoLine is the line run i appends at step k (both from 1).
func eoLine(run, step int) string { return fmt.Sprintf("run%d-step%d", run, step) }

// eoStep is the step of a line, 0 if it is not one.
func eoStep(line string) int {
	_, after, ok := strings.Cut(line, "-step")
	if !ok {
		return 0
	}
	k, _ := strconv.Atoi(after)
	return k
}

// eoScenario is run i's script: one append_line per step, then an answer.
func eoScenario(run int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: exactly-once-%d\nmatch:\n  exact: [ %q ]\nturns:\n", run, eoInput(run))
	for k := 1; k <= eoSteps; k++ {
		fmt.Fprintf(&b, "  - text: Step %d.\n    tool_calls:\n      - name: %s\n        arguments: { line: %q }\n", k, eoTool, eoLine(run, k))
	}
	fmt.Fprintf(&b, "  - text: %q\n", eoAnswer(run))
	return b.String()
}

func eoInput(run int) string  { return fmt.Sprintf("exactly once run %d", run) }
func eoAnswer(run int) string { return fmt.Sprintf("run%d appended %d lines.", run, eoSteps) }

// ledger is the append server's output: the lines appended, and a record
// of every call as it began.
type ledger struct {
	file, started string
}

// startMark is one record of the started file.
type startMark struct {
	Line string `json:"line"`
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"` // the toolrunner process executing the call
}

// lines counts each line of the file.
func (l ledger) lines(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(l.file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for line := range strings.Lines(string(b)) {
		counts[strings.TrimSuffix(line, "\n")]++
	}
	return counts
}

// starts lists the calls that began, in order.
func (l ledger) starts(t *testing.T) []startMark {
	t.Helper()
	b, err := os.ReadFile(l.started)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []startMark
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m startMark
		if json.Unmarshal(sc.Bytes(), &m) == nil { // a line being written is skipped
			out = append(out, m)
		}
	}
	return out
}

// startedFrom returns the first call that began at step >= step, if any.
func (l ledger) startedFrom(t *testing.T, step int) (startMark, bool) {
	for _, m := range l.starts(t) {
		if eoStep(m.Line) >= step {
			return m, true
		}
	}
	return startMark{}, false
}

// eoCluster is a split-mode suite with two toolrunner replicas that each
// run the append server, and the scripted runs.
type eoCluster struct {
	*harness.Cluster
	g      *gatewayClient
	ledger ledger
	ids    []string
	recs   []*recorder
	errs   chan error
}

// startEOCluster starts the suite and waits until both toolrunner
// replicas offer append_line, as a tool with side effects.
func startEOCluster(ctx context.Context, t *testing.T) *eoCluster {
	t.Helper()
	dir := t.TempDir()
	l := ledger{file: filepath.Join(dir, "ledger.txt"), started: filepath.Join(dir, "started.jsonl")}
	tools := fmt.Sprintf(`mcp_servers:
  - name: %s
    stdio:
      command: %q
      args: [ -file, %q, -started-file, %q, -delay, 400ms ]
    timeout: 30s
`, eoServer, appendServerBin(t), l.file, l.started)
	toolsFile := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(toolsFile, []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	scenarios := map[string]string{}
	for i := range eoRuns {
		scenarios[fmt.Sprintf("exactly-once-%d", i)] = eoScenario(i)
	}
	opts := startOptions(t, scenarios)
	opts.Replicas = map[string]int{"toolrunner": 2}
	opts.Args = map[string][]string{"toolrunner": {"-tools-file=" + toolsFile}}
	c := &eoCluster{Cluster: startCluster(t, opts), ledger: l}
	c.g = newGatewayClient(t, c.Cluster)
	if !strings.HasPrefix(c.Addr["toolrunner"], "static:///") {
		t.Fatalf("peers dial the toolrunner at %q, want a static:/// target", c.Addr["toolrunner"])
	}
	for _, name := range c.Replicas("toolrunner") {
		c.waitTool(ctx, t, name)
	}
	return c
}

// waitTool waits until toolrunner replica name lists append_line, and
// checks that it is not read-only.
func (c *eoCluster) waitTool(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	conn, err := grpcclient.Dial(c.Addr[name], grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tr := baagentv1.NewToolRunnerServiceClient(conn)
	var def *baagentv1.ToolDefinition
	testkit.EventuallyContext(ctx, t, name+" offering "+eoTool, func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := tr.ListTools(cctx, &baagentv1.ListToolsRequest{Tenant: tenant})
		if err != nil {
			return false, ""
		}
		for _, d := range resp.GetTools() {
			if d.GetSchema().GetName() == eoTool {
				def = d
				return true, ""
			}
		}
		return false, ""
	})
	if def.GetReadOnly() {
		t.Fatalf("%s: %s is listed as read-only; the test needs a tool with side effects", name, eoTool)
	}
}

// startRuns starts the runs, each followed through the gateway's gRPC
// stream.
func (c *eoCluster) startRuns(ctx context.Context, t *testing.T) {
	t.Helper()
	c.errs = make(chan error, eoRuns)
	for i := range eoRuns {
		c.ids = append(c.ids, c.g.startRun(ctx, t, eoInput(i)))
		c.recs = append(c.recs, &recorder{})
		go func() { c.errs <- c.g.followGRPC(ctx, c.ids[i], c.recs[i]) }()
	}
}

// waitEvent waits until some run has received an event satisfying f.
func (c *eoCluster) waitEvent(ctx context.Context, t *testing.T, what string, f func(*baagentv1.Event) bool) {
	t.Helper()
	testkit.EventuallyContext(ctx, t, what, func() (bool, string) {
		return slices.ContainsFunc(c.recs, func(r *recorder) bool { return r.has(f) }), ""
	})
}

// waitStarted waits until a call at step >= step has begun in the append
// server (so the toolrunner executes it, and it has not appended yet).
func (c *eoCluster) waitStarted(ctx context.Context, t *testing.T, step int) startMark {
	t.Helper()
	var m startMark
	testkit.EventuallyContext(ctx, t, fmt.Sprintf("an append_line call of step %d or later begun", step), func() (bool, string) {
		var ok bool
		m, ok = c.ledger.startedFrom(t, step)
		return ok, ""
	})
	return m
}

// appendAct reports whether ev is the act of an append_line call at step
// >= step.
func appendAct(step int) func(*baagentv1.Event) bool {
	return func(ev *baagentv1.Event) bool {
		return ev.GetAct().GetToolName() == eoTool && eoStep(ev.GetAct().GetToolInput().GetFields()["line"].GetStringValue()) >= step
	}
}

// appendObserve reports whether ev is the observation of an append_line
// call at step >= step. The observation does not carry the arguments: the
// scripted model's call ids end in _<turn>_<n>, turn = step.
func appendObserve(step int) func(*baagentv1.Event) bool {
	return func(ev *baagentv1.Event) bool {
		if ev.GetObserve().GetToolName() != eoTool {
			return false
		}
		parts := strings.Split(ev.GetObserve().GetToolCallId(), "_")
		if len(parts) < 2 {
			return false
		}
		turn, err := strconv.Atoi(parts[len(parts)-2])
		return err == nil && turn >= step
	}
}

// check waits for every run to end and asserts the contract: each client
// saw every event once (seq contiguous from 1) and one terminal event,
// last; every run completed with its answer; and each line was appended
// exactly once. With atMostOnce (the toolrunner executing a call was
// killed) a line may be missing; its call's observation must then be a
// failure, TOOL_OUTCOME_UNKNOWN, and such an observation is the only
// failure allowed.
func (c *eoCluster) check(ctx context.Context, t *testing.T, atMostOnce bool) {
	t.Helper()
	for range eoRuns {
		if err := <-c.errs; err != nil {
			t.Fatal(err)
		}
	}
	counts := c.ledger.lines(t)
	began := map[string]int{}
	for _, m := range c.ledger.starts(t) {
		began[m.Line]++
	}
	expected := map[string]bool{}
	lineOf := map[string]string{} // tool call id → line
	for i := range eoRuns {
		evs := c.recs[i].snapshot()
		checkStream(t, "run "+c.ids[i], evs)
		if last := terminal(evs); last.GetType() != "complete" || last.GetComplete().GetContent() != eoAnswer(i) {
			t.Errorf("run %s ended %s %q: %s %s; types %v", c.ids[i], last.GetType(), last.GetComplete().GetContent(),
				last.GetError().GetCode(), last.GetError().GetMessage(), types(evs))
		}
		if run := c.g.waitFinished(ctx, t, c.ids[i]); run.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
			t.Errorf("run %s: record state %s", c.ids[i], run.GetState())
		}
		// The calls' observations, by line.
		observed := map[string][]*baagentv1.ObservePayload{}
		for _, ev := range evs {
			if a := ev.GetAct(); a.GetToolName() == eoTool {
				lineOf[a.GetToolCallId()] = a.GetToolInput().GetFields()["line"].GetStringValue()
			}
		}
		for _, ev := range evs {
			if o := ev.GetObserve(); o.GetToolName() == eoTool {
				observed[lineOf[o.GetToolCallId()]] = append(observed[lineOf[o.GetToolCallId()]], o)
			}
		}
		for k := 1; k <= eoSteps; k++ {
			line := eoLine(i, k)
			expected[line] = true
			obs := observed[line]
			var failed []string
			succeeded := false
			for _, o := range obs {
				if o.GetSuccess() {
					succeeded = true
				} else {
					failed = append(failed, o.GetErrorCode()+": "+o.GetObservation())
				}
			}
			switch n := counts[line]; {
			case len(obs) == 0:
				t.Errorf("%s: no observation of its call", line)
			case n > 1:
				t.Errorf("%s: appended %d times (calls begun in the append server: %d): the effect happened more than once", line, n, began[line])
			case n == 0 && !atMostOnce:
				t.Errorf("%s: never appended (calls begun: %d); observations %q", line, began[line], failed)
			case n == 0 && succeeded:
				t.Errorf("%s: never appended, yet its call was observed as a success", line)
			}
			for _, f := range failed {
				if !atMostOnce || !strings.HasPrefix(f, codeOutcomeUnknown+":") {
					t.Errorf("%s: observation failed (%d in the file, %d calls begun): %s", line, counts[line], began[line], f)
				} else {
					t.Logf("%s: outcome unknown (%d in the file): %s", line, counts[line], f)
				}
			}
		}
	}
	for line, n := range counts {
		if !expected[line] {
			t.Errorf("unexpected line %q (%d times) in the file", line, n)
		}
	}
	if t.Failed() {
		b, _ := os.ReadFile(c.ledger.file)
		s, _ := os.ReadFile(c.ledger.started)
		t.Logf("appended:\n%s\nbegun:\n%s", b, s)
	}
	var repeats []string
	for line, n := range began {
		if n > 1 {
			repeats = append(repeats, fmt.Sprintf("%s×%d", line, n))
		}
	}
	// Whether the fault made the orchestrator send a call again: each
	// answer a toolrunner gives is logged ("tool call", at debug level).
	var resent []string
	for id, n := range c.toolCallAnswers(t) {
		if n > 1 {
			resent = append(resent, fmt.Sprintf("%s×%d", lineOf[id], n))
		}
	}
	slices.Sort(repeats)
	slices.Sort(resent)
	t.Logf("%d lines appended; calls begun more than once in the append server: %v; calls answered more than once by the toolrunners: %v", len(counts), repeats, resent)
}

// toolCallAnswers counts the answers to each append_line call (by tool
// call id) in the toolrunner replicas' logs.
func (c *eoCluster) toolCallAnswers(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for line := range strings.Lines(c.Log("toolrunner")) {
		if !strings.Contains(line, `"msg":"tool call"`) {
			continue
		}
		var rec struct {
			Tool string `json:"tool"`
			ID   string `json:"tool_call_id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Tool == eoTool {
			n[rec.ID]++
		}
	}
	return n
}

// Scenario: the orchestrator (one replica) is killed with SIGKILL while
// runs execute, at one of three points, and started again; the runs
// resume on it from their checkpoints (after the run queue's ack wait)
// and call again, with the same idempotency key, any call whose result
// they had not checkpointed. The call's effect must happen once:
//   - before-call: as soon as a client sees a step's act event (the call
//     is being sent, or has just reached the toolrunner);
//   - mid-call: once the append server has begun a call (the toolrunner is
//     executing it; it appends 400 ms later);
//   - after-result: as soon as a client sees a step's observe event (the
//     call has ended; its checkpoint may not be written yet).
func TestExactlyOnceOrchestratorKilled(t *testing.T) {
	for _, point := range []string{"before-call", "mid-call", "after-result"} {
		t.Run(point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
			defer cancel()
			c := startEOCluster(ctx, t)
			c.startRuns(ctx, t)
			switch point {
			case "before-call":
				c.waitEvent(ctx, t, "an append_line act of step 2 or later", appendAct(2))
			case "mid-call":
				m := c.waitStarted(ctx, t, 2)
				t.Logf("killing the orchestrator while %s runs", m.Line)
			case "after-result":
				c.waitEvent(ctx, t, "an append_line observe of step 2 or later", appendObserve(2))
			}
			killed := time.Now()
			c.Kill("orchestrator")
			c.Start("orchestrator")
			c.WaitServing("orchestrator")
			c.check(ctx, t, false)
			t.Logf("runs ended %s after the kill", time.Since(killed).Round(time.Millisecond))
		})
	}
}

// Scenario: one of the two toolrunner replicas is killed with SIGKILL
// while it executes a call (its append server child dies with it, so the
// call most likely never appends). The run must go on and end; the line
// is appended at most once; and a call that did not complete normally is
// observed as TOOL_OUTCOME_UNKNOWN (the other replica, asked again with the
// same key, answers from the record that the dead one left), never run a
// second time. The killed replica stays down until the runs end, so the
// retry lands on the other one.
func TestExactlyOnceToolRunnerReplicaKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	c := startEOCluster(ctx, t)
	pids := map[int]string{}
	for _, name := range c.Replicas("toolrunner") {
		pids[c.Proc(name).Pid()] = name
	}
	c.startRuns(ctx, t)
	m := c.waitStarted(ctx, t, 2)
	victim, ok := pids[m.PPID]
	if !ok {
		t.Fatalf("the call of %s began in an append server whose parent %d is no toolrunner replica (%v)", m.Line, m.PPID, pids)
	}
	t.Logf("killing %s while it runs %s", victim, m.Line)
	killed := time.Now()
	c.Kill(victim)
	c.check(ctx, t, true)
	t.Logf("runs ended %s after the kill", time.Since(killed).Round(time.Millisecond))
	// The replica comes back and serves again.
	c.Start(victim)
	c.WaitServing(victim)
	c.waitTool(ctx, t, victim)
}

// Scenario: NATS (which holds the runs' queue, checkpoints and events, and
// the toolrunners' idempotency records) is stopped while a call executes,
// kept down until that call has appended its line (so the call ends while
// NATS is away), and started again on the same store. Every line once.
func TestExactlyOnceNATSRestartMidCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	c := startEOCluster(ctx, t)
	c.startRuns(ctx, t)
	m := c.waitStarted(ctx, t, 2)
	c.StopNATS()
	stopped := time.Now()
	testkit.EventuallyContext(ctx, t, m.Line+" appended while NATS is down", func() (bool, string) { return c.ledger.lines(t)[m.Line] > 0, "" })
	if err := c.StartNATS(); err != nil {
		t.Fatal(err)
	}
	t.Logf("NATS down for %s while %s ran", time.Since(stopped).Round(time.Millisecond), m.Line)
	c.check(ctx, t, false)
}
