// The suite's own tracing, end to end, against a real Jaeger: the suite in
// microservices mode (test/reliability/harness: each service its own
// `baagent -target=<service>` process) exports to it over OTLP gRPC, runs
// scripted scenarios with a skill activation and tool calls, and the tests
// read the run's trace back from the query API.
//
// What they need of the tracing implementation: the settings
// -otlp-endpoint (host:port of an OTLP gRPC receiver), -otlp-protocol=grpc,
// -otlp-insecure, -otlp-batch-size, -trace-sampling=always and -trace-tags
// (extra resource attributes, k=v); service.name baagent-<target>; the
// run's trace id as trace_id of the run in the HTTP API (GET
// /v1/runs/{id}); a span named "run" for each execution of a run, in the
// orchestrator, with the attribute baagent.run_id, a child of the
// orchestrator's StartRun server span; and every ended span exported when
// a process stops on SIGTERM. OTEL_BSP_SCHEDULE_DELAY, which the processes
// inherit, only makes exports prompter.

package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/reliability/harness"
)

// serviceName is the service.name of a -target's spans (the default of
// -trace-service-name).
func serviceName(svc string) string { return "baagent-" + svc }

// incarnationTag is the resource attribute (set with -trace-tags) that
// tells the processes of one service apart across a restart.
const incarnationTag = "baagent.test.incarnation"

// e2eScenario activates a skill (the skills service), then runs the given
// sql_query calls (the toolrunner), then answers with the last result.
func e2eScenario(name, phrase string, queries ...string) string {
	s := fmt.Sprintf(`name: %s
match:
  contains: [ %q ]
turns:
  - text: I'll use the data-quality-check skill for this.
    tool_calls:
      - name: skill
        arguments: { name: data-quality-check }
`, name, phrase)
	for i, q := range queries {
		s += fmt.Sprintf("  - text: Query %d.\n    tool_calls:\n      - name: sql_query\n        arguments:\n          query: %q\n", i+1, q)
	}
	return s + "  - text: \"Done: {{ .LastToolResult | firstRow | cell 0 }} counted.\"\n"
}

// slowQuery counts n rows of a recursive CTE: CPU in the toolrunner, long
// enough for the orchestrator to be killed while it runs.
func slowQuery(n int) string {
	return fmt.Sprintf("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < %d) SELECT count(*) AS n FROM c", n)
}

// tracedCluster is the split-mode suite (harness.Cluster, each service its
// own process) exporting to a Jaeger.
type tracedCluster struct {
	*harness.Cluster
	j    *Jaeger
	args map[string][]string // the cluster's ClusterOptions.Args (shared map)
	gw   baagentv1.GatewayServiceClient
}

// startTracedCluster builds cmd/baagent and starts every service with
// tracing on, exporting over OTLP gRPC to j; extra flags per service come
// last.
func startTracedCluster(ctx context.Context, t *testing.T, j *Jaeger, scenarios map[string]string, extra map[string][]string) *tracedCluster {
	t.Helper()
	root := repoRoot(t)
	bin, err := harness.BuildBaagent(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range scenarios {
		writeFile(t, filepath.Join(dir, name+".yaml"), text)
	}
	// Spans are exported at most 200 ms after they end (the OTel SDK's
	// batch delay, read from the environment every process inherits), so
	// that what a process had exported before it is killed is predictable.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	args := map[string][]string{}
	for _, svc := range config.Services {
		args[svc] = append([]string{
			"-otlp-endpoint=" + j.OTLPGRPCAddr,
			"-otlp-protocol=grpc",
			"-otlp-insecure",
			"-trace-sampling=always",
			"-trace-tags=" + incarnationTag + "=1",
		}, extra[svc]...)
	}
	c := harness.StartCluster(t, harness.ClusterOptions{Baagent: bin, ScenariosDir: dir, Args: args})
	conn, err := grpc.NewClient(c.Addr[config.TargetGateway], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &tracedCluster{Cluster: c, j: j, args: args, gw: baagentv1.NewGatewayServiceClient(conn)}
}

// startRun starts a run of input (tenant default: no API keys, loopback)
// and returns its id.
func (c *tracedCluster) startRun(ctx context.Context, t *testing.T, input string) string {
	t.Helper()
	resp, err := c.gw.StartRun(ctx, &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: input}}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("StartRun(%q): %v", input, err)
	}
	return resp.GetRun().GetRunId()
}

// runJSON reads the run through the gateway's HTTP API, as the protobuf
// JSON mapping (which names fields as the .proto does).
func (c *tracedCluster) runJSON(ctx context.Context, runID string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.HTTPAddr+"/v1/runs/"+runID, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET run %s: %s: %s", runID, resp.Status, body)
	}
	var out struct {
		Run map[string]any `json:"run"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	return out.Run, nil
}

var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// traceID reads the run's trace id, failing the test if it has none.
func (c *tracedCluster) traceID(ctx context.Context, t *testing.T, runID string) string {
	t.Helper()
	run, err := c.runJSON(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := run["trace_id"].(string)
	if !traceIDPattern.MatchString(id) {
		t.Fatalf("run %s: trace_id %q is not a trace id (32 lowercase hex digits); run: %v", runID, id, run)
	}
	return id
}

// stopAll stops every service with SIGTERM and waits until each has
// exited, so that every span they ended has been exported.
func (c *tracedCluster) stopAll(t *testing.T) {
	t.Helper()
	var procs []*harness.Proc
	for _, svc := range config.Services {
		if p := c.Proc(svc); p != nil {
			procs = append(procs, p)
			_ = syscall.Kill(p.Pid(), syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still running 30 s after SIGTERM", p.Name)
		}
	}
}

// events follows a run's events through the gateway's gRPC stream,
// resuming from its cursor when the stream breaks, until the terminal
// event or ctx ends.
type events struct {
	mu   sync.Mutex
	evs  []*baagentv1.Event
	done chan struct{}
	err  error
}

func (c *tracedCluster) follow(ctx context.Context, runID string) *events {
	e := &events{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		for {
			finished, err := c.streamOnce(ctx, runID, e)
			if finished {
				return
			}
			if ctx.Err() != nil {
				e.err = fmt.Errorf("events of %s: %w (last: %v)", runID, ctx.Err(), err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return e
}

func (c *tracedCluster) streamOnce(ctx context.Context, runID string, e *events) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	after := "earliest"
	if evs := e.snapshot(); len(evs) > 0 {
		after = evs[len(evs)-1].GetCursor()
	}
	stream, err := c.gw.StreamRunEvents(sctx, &baagentv1.StreamRunEventsRequest{RunId: runID, After: after})
	if err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return false, err
		}
		ev := msg.GetEvent()
		if ev.GetType() == "stream_reset" {
			return false, fmt.Errorf("stream_reset")
		}
		e.mu.Lock()
		e.evs = append(e.evs, ev)
		e.mu.Unlock()
		if isTerminal(ev) {
			return true, nil
		}
	}
}

func (e *events) snapshot() []*baagentv1.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.evs)
}

func (e *events) count(f func(*baagentv1.Event) bool) int {
	n := 0
	for _, ev := range e.snapshot() {
		if f(ev) {
			n++
		}
	}
	return n
}

// wait waits for the terminal event and returns it.
func (e *events) wait(t *testing.T) *baagentv1.Event {
	t.Helper()
	<-e.done
	if e.err != nil {
		t.Fatal(e.err)
	}
	evs := e.snapshot()
	return evs[len(evs)-1]
}

func isTerminal(ev *baagentv1.Event) bool {
	switch ev.GetType() {
	case "complete", "error", "cancelled":
		return true
	}
	return false
}

func actOf(tool string) func(*baagentv1.Event) bool {
	return func(ev *baagentv1.Event) bool { return ev.GetAct().GetToolName() == tool }
}

// readCtx bounds reading a trace back once every process has stopped: all
// their spans have been exported by then, and Jaeger stores them within
// moments, so a trace still incomplete after a minute is a failure.
func readCtx(ctx context.Context, t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ancestors returns the ids of s's ancestors within tr, nearest first.
func ancestors(tr *Trace, s Span) []string {
	var out []string
	for p := s.ParentSpanID; p != ""; {
		ps, ok := tr.Span(p)
		if !ok || slices.Contains(out, p) {
			break
		}
		out = append(out, p)
		p = ps.ParentSpanID
	}
	return out
}

// runSpans returns the "run" spans of runID in tr (one per execution).
func runSpans(tr *Trace, runID string) []Span {
	return tr.Select(func(s Span) bool {
		return s.Service == serviceName(config.TargetOrchestrator) && s.Name == "run" && s.Attrs["baagent.run_id"] == runID
	})
}

// tracesOfRun returns the ids of every trace in Jaeger with a "run" span of
// runID since since.
func tracesOfRun(ctx context.Context, t *testing.T, j *Jaeger, runID string, since time.Time) []string {
	t.Helper()
	found, err := j.FindTraces(ctx, TraceQuery{Service: serviceName(config.TargetOrchestrator), Operation: "run", Since: since.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range found {
		if len(runSpans(tr, runID)) > 0 {
			ids = append(ids, tr.ID)
		}
	}
	return ids
}

// missingServices lists the services of want without spans in tr.
func missingServices(tr *Trace, want []string) []string {
	have := tr.Services()
	var out []string
	for _, svc := range want {
		if !slices.Contains(have, serviceName(svc)) {
			out = append(out, serviceName(svc))
		}
	}
	return out
}

// checkEdges checks each parent/child edge across services: a server or
// consumer span's remote parent is a client or producer span, and a
// client span's children in other services are server spans.
func checkEdges(t *testing.T, tr *Trace) {
	t.Helper()
	for _, s := range tr.Spans {
		p, ok := tr.Span(s.ParentSpanID)
		if !ok || p.Service == s.Service {
			continue
		}
		switch {
		case s.Kind == KindServer && p.Kind != KindClient,
			s.Kind == KindConsumer && p.Kind != KindProducer && p.Kind != KindClient && p.Kind != KindServer,
			s.Kind != KindServer && s.Kind != KindConsumer:
			t.Errorf("span %s %q (kind %d) has the parent %s %q (kind %d) in another service, not a matching client/server or producer/consumer pair",
				s.Service, s.Name, s.Kind, p.Service, p.Name, p.Kind)
		}
	}
}

// The suite in microservices mode exports to Jaeger; a run with a skill
// activation and a tool call is one trace: the gateway's StartRun span is
// its only root, every other span's parent is in it, every service that
// took part has spans in it, and the toolrunner's, context's and skills'
// spans hang below the orchestrator's run span.
func TestRunIsOneTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	j := startJaeger(t)
	started := time.Now()
	c := startTracedCluster(ctx, t, j, map[string]string{
		"tracing-e2e": e2eScenario("tracing-e2e", "tracing e2e", "SELECT COUNT(*) AS n FROM orders"),
	}, nil)
	runID := c.startRun(ctx, t, "tracing e2e: how many orders?")
	evs := c.follow(ctx, runID)
	last := evs.wait(t)
	if last.GetType() != "complete" || !strings.HasPrefix(last.GetComplete().GetContent(), "Done: ") {
		t.Fatalf("run %s ended %s %q %q", runID, last.GetType(), last.GetComplete().GetContent(), last.GetError().GetMessage())
	}
	if evs.count(actOf("sql_query")) != 1 || evs.count(actOf("skill")) != 1 {
		t.Fatalf("run %s: %d skill and %d sql_query calls, want 1 each", runID, evs.count(actOf("skill")), evs.count(actOf("sql_query")))
	}
	traceID := c.traceID(ctx, t, runID)
	c.stopAll(t)

	var tr *Trace
	testkit.EventuallyContext(readCtx(ctx, t), t, "the whole trace "+traceID+" of run "+runID, func() (bool, string) {
		var err error
		if tr, err = j.GetTrace(ctx, traceID); err != nil {
			return false, err.Error()
		}
		missing, dangling, runs := missingServices(tr, config.Services), len(tr.Dangling()), len(runSpans(tr, runID))
		return len(missing) == 0 && dangling == 0 && runs == 1,
			fmt.Sprintf("services without spans %v (want none), %d spans whose parent is missing (want 0), %d run spans (want 1)\n%s", missing, dangling, runs, tr.Tree())
	})
	t.Logf("run %s, %s", runID, tr.Tree())

	roots := tr.Roots()
	if len(roots) != 1 || roots[0].Service != serviceName(config.TargetGateway) || roots[0].Kind != KindServer {
		t.Errorf("roots %v: want one, the gateway's StartRun server span", roots)
	}
	checkEdges(t, tr)
	run := runSpans(tr, runID)[0]
	for _, svc := range []string{config.TargetToolRunner, config.TargetContext, config.TargetSkills} {
		below := tr.Select(func(s Span) bool {
			return s.Service == serviceName(svc) && slices.Contains(ancestors(tr, s), run.SpanID)
		})
		if len(below) == 0 {
			t.Errorf("no span of %s below the run span %s", serviceName(svc), run.SpanID)
		}
	}
	if ids := tracesOfRun(ctx, t, j, runID, started); len(ids) != 1 || ids[0] != traceID {
		t.Errorf("traces with a run span of %s: %v, want only %s", runID, ids, traceID)
	}
	// The UI's API shows the same tree.
	v1, err := j.GetTraceV1(ctx, traceID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v1.Spans) != len(tr.Spans) || len(v1.Dangling()) != 0 || len(v1.Roots()) != 1 {
		t.Errorf("API v1: %d spans, %d dangling, %d roots; API v3: %d spans", len(v1.Spans), len(v1.Dangling()), len(v1.Roots()), len(tr.Spans))
	}
}

// The orchestrator is killed (SIGKILL) while the run's second sql_query
// call runs, and started again; the run resumes on the new process and
// completes, and it is still one trace: the new execution's run span is a
// child of StartRun's span (it may link to the lost execution), spans of
// both orchestrator processes are in the trace, and the only spans whose
// parent is missing are those whose parent died unexported with the killed
// process.
func TestRunIsOneTraceAcrossOrchestratorFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	j := startJaeger(t)
	started := time.Now()
	// Four queries of ~0.5-1.5 s each (different, so that doom-loop
	// detection does not see a repeated call): killed at the second, the
	// run has seconds of work left.
	const rows = 3000000
	c := startTracedCluster(ctx, t, j, map[string]string{
		"tracing-failover": e2eScenario("tracing-failover", "tracing failover",
			slowQuery(rows-3), slowQuery(rows-2), slowQuery(rows-1), slowQuery(rows)),
	}, map[string][]string{
		// Every span the orchestrator ends is exported at once, so that the
		// killed process's spans are in Jaeger before the kill.
		config.TargetOrchestrator: {"-otlp-batch-size=1"},
	})
	orch := serviceName(config.TargetOrchestrator)
	runID := c.startRun(ctx, t, "tracing failover: count")
	evs := c.follow(ctx, runID)
	traceID := c.traceID(ctx, t, runID)

	// Mid-run: the second sql_query has been sent, and StartRun's span
	// (the orchestrator's server span, every execution's parent) and the
	// first steps' spans have reached Jaeger.
	testkit.EventuallyContext(ctx, t, "the second sql_query call", func() (bool, string) {
		n := evs.count(actOf("sql_query"))
		return n >= 2, fmt.Sprintf("%d sql_query calls so far", n)
	})
	testkit.EventuallyContext(ctx, t, "the orchestrator's spans in Jaeger", func() (bool, string) {
		tr, err := j.GetTrace(ctx, traceID)
		if err != nil {
			return false, err.Error()
		}
		servers := tr.Select(func(s Span) bool { return s.Service == orch && s.Kind == KindServer })
		return len(servers) > 0 && len(tr.Select(func(s Span) bool { return s.Service == orch })) > 1, tr.Tree()
	})
	if evs.count(isTerminal) > 0 {
		t.Fatalf("run %s ended before the kill: make the scenario's queries slower", runID)
	}
	killed := time.Now()
	c.Kill(config.TargetOrchestrator)
	// The new process tags its spans as the second incarnation (Start
	// reads the cluster's Args map again).
	c.args[config.TargetOrchestrator] = append(slices.Clone(c.args[config.TargetOrchestrator]), "-trace-tags="+incarnationTag+"=2")
	c.Start(config.TargetOrchestrator)
	c.WaitServing(config.TargetOrchestrator)
	t.Logf("orchestrator back %s after the kill", time.Since(killed).Round(time.Millisecond))
	last := evs.wait(t)
	if last.GetType() != "complete" || last.GetComplete().GetContent() != fmt.Sprintf("Done: %d counted.", rows) {
		t.Fatalf("run %s ended %s %q %q", runID, last.GetType(), last.GetComplete().GetContent(), last.GetError().GetMessage())
	}
	if id := c.traceID(ctx, t, runID); id != traceID {
		t.Errorf("the run's trace id changed from %s to %s", traceID, id)
	}
	c.stopAll(t)

	incarnation := func(n string) func(Span) bool {
		return func(s Span) bool { return s.Service == orch && s.Resource[incarnationTag] == n }
	}
	var tr *Trace
	var newRun Span
	testkit.EventuallyContext(readCtx(ctx, t), t, "the whole trace "+traceID+" of run "+runID, func() (bool, string) {
		var err error
		if tr, err = j.GetTrace(ctx, traceID); err != nil {
			return false, err.Error()
		}
		runs := tr.Select(func(s Span) bool { return incarnation("2")(s) && s.Name == "run" && s.Attrs["baagent.run_id"] == runID })
		missing := missingServices(tr, config.Services)
		if len(runs) != 1 || len(missing) != 0 {
			return false, fmt.Sprintf("services without spans %v (want none), %d run spans of the new orchestrator (want 1)\n%s", missing, len(runs), tr.Tree())
		}
		newRun = runs[0]
		return true, ""
	})
	t.Logf("run %s, %s", runID, tr.Tree())

	if roots := tr.Roots(); len(roots) != 1 || roots[0].Service != serviceName(config.TargetGateway) {
		t.Errorf("roots %v: want one, the gateway's StartRun span (no execution may start a trace of its own)", roots)
	}
	if len(tr.Select(incarnation("1"))) == 0 || len(tr.Select(incarnation("2"))) == 0 {
		t.Errorf("want spans of both orchestrator processes in the trace")
	}
	parent, ok := tr.Span(newRun.ParentSpanID)
	if !ok || parent.Service != orch || parent.Kind != KindServer || !incarnation("1")(parent) {
		t.Errorf("the new execution's run span %s has the parent %s (%+v): want StartRun's server span of the first orchestrator", newRun.SpanID, newRun.ParentSpanID, parent)
	}
	for _, l := range newRun.Links {
		if l.TraceID != traceID {
			t.Errorf("the new execution's run span links to %s/%s, outside the run's trace", l.TraceID, l.SpanID)
		}
	}
	t.Logf("the new execution links to %v (the lost execution's span is never exported: it did not end)", newRun.Links)
	// Every process but the killed one exported everything it ended, so a
	// span whose parent is missing must be the killed process's, or the
	// remote child (server or consumer span) of one of its spans.
	for _, s := range tr.Dangling() {
		switch {
		case incarnation("1")(s):
		case s.Service != orch && (s.Kind == KindServer || s.Kind == KindConsumer):
		default:
			t.Errorf("span %s %q (kind %d, incarnation %q) has a parent %s that is not in the trace", s.Service, s.Name, s.Kind, s.Resource[incarnationTag], s.ParentSpanID)
		}
	}
	checkEdges(t, tr)
	toolsAfter := tr.Select(func(s Span) bool {
		return s.Service == serviceName(config.TargetToolRunner) && slices.Contains(ancestors(tr, s), newRun.SpanID)
	})
	if len(toolsAfter) == 0 {
		t.Errorf("no toolrunner span below the new execution's run span %s", newRun.SpanID)
	}
	if ids := tracesOfRun(ctx, t, j, runID, started); len(ids) != 1 || ids[0] != traceID {
		t.Errorf("traces with a run span of %s: %v, want only %s", runID, ids, traceID)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
