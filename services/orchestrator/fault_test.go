package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
	"github.com/baagent/baagent/services/skills"
	"github.com/baagent/baagent/services/tokens"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// The fault test: two orchestrator replicas as separate processes
// (cmd/baagent -target=orchestrator) against an embedded NATS and the
// other services in this process; the replica executing runs is killed
// with SIGKILL at random points (between steps, during model and tool
// calls) and restarted, until at least faultKills runs have lost their
// replica. Every run must complete on the surviving replica with the
// scripted answer, each write must have been executed once (counted by the
// tool itself, not by the answers its callers saw), and every event stream
// must be contiguous with one terminal event.

const faultKills = 20

// faultScenario writes two files and runs a slow query (so kills land
// during tool calls too), then answers quoting the query's result.
const faultScenario = `name: fault-writes
match:
  contains: [ "fault test" ]
turns:
  - text: Writing the first report.
    tool_calls:
      - name: note_write
        arguments: { note: "first" }
  - tool_calls:
      - name: sql_query
        arguments:
          query: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000) SELECT count(*) AS n FROM c"
  - tool_calls:
      - name: note_write
        arguments: { note: "second" }
      - name: sql_query
        arguments:
          query: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 200000) SELECT count(*) AS n FROM c"
  - text: "Done: {{ .LastToolResult | firstRow | cell 0 }} rows counted."
`

// countingWrites is a tool source with one tool with side effects,
// note_write, that counts its executions by idempotency key. It takes a
// while, so that kills land during it too, and like an external process
// it completes its effect even when its caller has gone.
type countingWrites struct {
	mu     sync.Mutex
	writes map[string]int
}

func (c *countingWrites) Name() string { return "fault-test" }

func (c *countingWrites) Tools() []tool.Tool { return []tool.Tool{c} }

func (c *countingWrites) Spec() tool.Spec {
	return tool.Spec{
		Name: "note_write", Description: "Writes a note (a side effect).", Version: "1", Source: "test",
		Parameters: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}},"required":["note"]}`),
	}
}

func (c *countingWrites) Execute(_ context.Context, call tool.Call) (tool.Result, error) {
	<-time.After(30 * time.Millisecond)
	c.mu.Lock()
	c.writes[call.IdempotencyKey]++
	c.mu.Unlock()
	return tool.Result{Data: "written"}, nil
}

func (c *countingWrites) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[key]
}

func serveTCP(t *testing.T, register func(grpc.ServiceRegistrar)) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func freePort(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// replicaProc is one orchestrator process.
type replicaProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

func TestFaultKillReplicaMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/baagent and runs processes")
	}
	// Each kill costs a recovery (RunAckWait) plus whatever the machine
	// takes to redo the lost work, which a busy machine or the race
	// detector multiplies several times over: the budget is what the test
	// binary's -timeout leaves, not a fixed figure tuned on an idle one.
	budget := 9 * time.Minute
	if d, ok := t.Deadline(); ok {
		budget = time.Until(d) - 30*time.Second // to fail with a message and clean up
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	fc := startFaultCluster(ctx, t, "fault.yaml", faultScenario)
	replicas := []*replicaProc{fc.start("r0"), fc.start("r1")}
	js, cps, store, counting, start := fc.js, fc.cps, fc.store, fc.counting, fc.start
	startRun := func(i int) (run *baagentv1.Run) {
		testkit.EventuallyContext(ctx, t, "StartRun on a starting replica", func() (bool, string) {
			c := baagentv1.NewOrchestratorServiceClient(dial(t, replicas[i%2].addr))
			resp, err := c.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: fmt.Sprintf("fault test %d", i)}})
			run = resp.GetRun()
			return err == nil, fmt.Sprint(err)
		})
		return run
	}

	kills, lost, iter, began := 0, 0, 0, time.Now()
	var all []*baagentv1.Run
	for lost < faultKills {
		iter++
		batch := []*baagentv1.Run{startRun(iter * 3), startRun(iter*3 + 1), startRun(iter*3 + 2)}
		all = append(all, batch...)
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		// Kill the replica executing the most unfinished runs.
		owners := map[string]int{}
		for _, r := range batch {
			rec, _, err := store.Get(ctx, testTenant, r.GetRunId())
			if err != nil || isFinished(rec.GetState()) {
				continue
			}
			if cp, _, err := cps.Load(ctx, testTenant, r.GetRunId()); err == nil && cp != nil {
				owners[cp.Owner]++
			}
		}
		victim, most := -1, 0
		for i, p := range replicas {
			if n := owners[replicaName(p)]; n > most {
				victim, most = i, n
			}
		}
		if victim >= 0 {
			_ = replicas[victim].cmd.Process.Signal(syscall.SIGKILL)
			<-replicas[victim].done
			kills++
			lost += most
			replicas[victim] = start(fmt.Sprintf("r%d-%d", victim, kills))
		}
		for _, r := range batch {
			waitFinishedRecord(ctx, t, store, r.GetRunId(), fmt.Sprintf("after %d kills in %s", kills, time.Since(began).Round(time.Second)))
		}
		if ctx.Err() != nil {
			t.Fatalf("out of time after %d kills (%d runs lost a replica)", kills, lost)
		}
	}
	t.Logf("%d iterations, %d kills, %d runs lost their replica mid-run, in %s", iter, kills, lost, time.Since(began).Round(time.Second))

	for _, r := range all {
		rec, _, err := store.Get(ctx, testTenant, r.GetRunId())
		if err != nil {
			t.Fatal(err)
		}
		if rec.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || rec.GetFinalAnswer() != "Done: 200000 rows counted." {
			t.Errorf("run %s: %s %q %v", r.GetRunId(), rec.GetState(), rec.GetFinalAnswer(), rec.GetError())
		}
		evs := readEvents(ctx, t, js, testTenant, r.GetRunId())
		checkEnvelope(t, r, evs)
		if uint64(len(evs)) != rec.GetLastSeq() {
			t.Errorf("run %s: %d events, record last_seq %d", r.GetRunId(), len(evs), rec.GetLastSeq())
		}
		for _, key := range []string{r.GetRunId() + ":s1:c0", r.GetRunId() + ":s3:c0"} {
			if n := counting.count(key); n != 1 {
				t.Errorf("run %s: note_write %s ran %d times", r.GetRunId(), key, n)
			}
		}
	}
}

// faultCluster is what the fault tests kill replicas in: an embedded NATS
// server, the tokens, skills, context and toolrunner services on loopback
// in this process, and a freshly built cmd/baagent that start launches as
// an orchestrator replica against them.
type faultCluster struct {
	js       jetstream.JetStream
	cps      *checkpoint.Store
	store    *runstore.Store
	counting *countingWrites
	// start launches a replica whose data directory is named name; the
	// test's cleanup kills it.
	start func(name string) *replicaProc
}

// startFaultCluster builds cmd/baagent and starts the peers, with the one
// scenario (written to scenarioFile) the scripted model replays.
func startFaultCluster(ctx context.Context, t *testing.T, scenarioFile, scenario string) *faultCluster {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "baagent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/baagent/baagent/cmd/baagent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	scenarios := filepath.Join(dir, "scenarios")
	if err := os.MkdirAll(scenarios, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scenarios, scenarioFile), []byte(scenario), 0o600); err != nil {
		t.Fatal(err)
	}

	srvNATS := natstest.StartNATSIn(t, filepath.Join(dir, "nats"))
	_, js := connectProvisioned(ctx, t, srvNATS.ClientURL())

	discard := slog.New(slog.DiscardHandler)
	tok, err := tokens.New(tokens.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	sk, err := skills.New(skills.Options{Logger: discard, Root: "../../examples/skills"})
	if err != nil {
		t.Fatal(err)
	}
	tokAddr := serveTCP(t, func(gs grpc.ServiceRegistrar) { tok.Register(gs) })
	skAddr := serveTCP(t, func(gs grpc.ServiceRegistrar) { sk.Register(gs) })
	tokConn, err := grpc.NewClient(tokAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tokConn.Close() })
	counting := &countingWrites{writes: map[string]int{}}
	cs, tr := realPeersWith(t, js, baagentv1.NewTokensServiceClient(tokConn), []tool.Source{counting})
	peerAddr := serveTCP(t, func(gs grpc.ServiceRegistrar) {
		baagentv1.RegisterContextServiceServer(gs, cs)
		baagentv1.RegisterToolRunnerServiceServer(gs, tr)
	})

	start := func(name string) *replicaProc {
		addr := freePort(t)
		cmd := exec.Command(bin, "-target=orchestrator", "-nats-url", srvNATS.ClientURL(),
			"-orchestrator-listen", addr, "-metrics-addr", "127.0.0.1:0", "-log-level", "warn",
			"-tokens-addr", tokAddr, "-skills-addr", skAddr, "-context-addr", peerAddr, "-toolrunner-addr", peerAddr,
			"-scenarios-dir", scenarios, "-data-dir", filepath.Join(dir, name))
		cmd.Stderr = &prefixWriter{t: t, prefix: name}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &replicaProc{cmd: cmd, addr: addr, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
		return p
	}
	cpKV, err := js.KeyValue(ctx, natsx.BucketCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	runsKV, err := js.KeyValue(ctx, natsx.BucketRuns)
	if err != nil {
		t.Fatal(err)
	}
	return &faultCluster{js: js, cps: checkpoint.NewStore(cpKV), store: runstore.New(runsKV), counting: counting, start: start}
}

// replicaName is the default Replica of a process: <host>-<pid>.
func replicaName(p *replicaProc) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, p.cmd.Process.Pid)
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func waitFinishedRecord(ctx context.Context, t *testing.T, store *runstore.Store, runID, when string) {
	for {
		rec, _, err := store.Get(ctx, testTenant, runID)
		if err == nil && isFinished(rec.GetState()) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("run %s did not finish %s (%v, %v)", runID, when, rec.GetState(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// prefixWriter logs a process's stderr lines in the test log.
type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log(w.prefix + ": " + line)
	}
	return len(b), nil
}
