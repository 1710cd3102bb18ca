// Package split_test proves microservices mode on loopback: NATS and each
// service as its own `baagent -target=<service>` process, with the flags of
// k8s/overlays/dev, answer the revenue scenario exactly as `-target=all`
// does through the gateway's public API, and every process exits 0 on
// SIGTERM.
package split_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/logging"
	"github.com/baagent/baagent/test/split/splitrun"
)

const question = "Which product category had the highest revenue last quarter?"

// devAPIKey is the development key of k8s/overlays/dev (tenant "default").
const devAPIKey = "dev-only-api-key-0000000000000001"

// outcome is what a run produced, independent of ids and timings.
type outcome struct {
	answer string
	tools  []string // tool names in call order
	events []string // event types in order, deltas left out
}

func TestSplitModeAnswersAsAllInOne(t *testing.T) {
	// The whole test, builds included, is bounded.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build(ctx, t, repo, filepath.Join(bin, "baagent"), "./cmd/baagent")
	build(ctx, t, repo, filepath.Join(bin, "nats-server"), "github.com/nats-io/nats-server/v2")

	dir := t.TempDir()
	suite, err := splitrun.Start(ctx, splitrun.Options{
		RepoRoot: repo, Baagent: filepath.Join(bin, "baagent"), NATSServer: filepath.Join(bin, "nats-server"),
		Dir: dir, ReadyTimeout: 60 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = suite.Stop(10 * time.Second)
		}
	}()
	for _, svc := range config.Services {
		if !slices.Contains(suite.Args[svc], "-target="+svc) {
			t.Fatalf("%s started with %v", svc, suite.Args[svc])
		}
		// Exactly the services that use NATS reach the suite's server.
		if got := slices.Contains(suite.Args[svc], "-nats-url="+suite.NATSURL); got != config.NeedsNATS(svc) {
			t.Fatalf("%s: NeedsNATS=%v but started with %v (NATS at %s)", svc, config.NeedsNATS(svc), suite.Args[svc], suite.NATSURL)
		}
	}
	split, err := runScenario(ctx, suite.Addr[config.TargetGateway], devAPIKey)
	if err != nil {
		t.Fatalf("split mode: %v", err)
	}

	all, err := runAllInOne(ctx, t, repo)
	if err != nil {
		t.Fatalf("-target=all: %v", err)
	}

	if split.answer == "" || split.answer != all.answer {
		t.Fatalf("answers differ:\nsplit: %q\nall:   %q", split.answer, all.answer)
	}
	if !slices.Equal(split.tools, all.tools) || !slices.Contains(split.tools, "sql_query") {
		t.Fatalf("tool calls differ: split %v, all %v", split.tools, all.tools)
	}
	if !slices.Equal(split.events, all.events) {
		t.Fatalf("event sequences differ:\nsplit: %v\nall:   %v", split.events, all.events)
	}
	t.Logf("both modes answered after %d events: %.120s…", len(split.events), split.answer)

	stopped = true
	if err := suite.Stop(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

// build compiles a main package into out.
func build(ctx context.Context, t *testing.T, repo, out, pkg string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// runAllInOne runs the same question through -target=all in this process.
func runAllInOne(ctx context.Context, t *testing.T, repo string) (outcome, error) {
	dataDir := t.TempDir()
	args := []string{
		"-target=all", "-data-dir=" + dataDir, "-metrics-addr=127.0.0.1:0",
		"-embedded-nats-addr=127.0.0.1:0", "-gateway-http-listen=127.0.0.1:0",
		"-skills-dir=" + filepath.Join(repo, "examples", "skills"),
		"-scenarios-dir=" + filepath.Join(repo, "examples", "scenarios"),
		"-workspace-seed-dir=" + filepath.Join(repo, "examples", "data"),
		"-token-encoders-file=" + filepath.Join(repo, "k8s", "base", "config", "token_encoders.yaml"),
		"-tools-file=" + filepath.Join(repo, "k8s", "base", "config", "tools.yaml"),
	}
	for _, svc := range config.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	cfg, err := app.LoadConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		return outcome{}, err
	}
	log, err := logging.New(io.Discard, "warn")
	if err != nil {
		return outcome{}, err
	}
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return outcome{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("-target=all: %v", err)
		}
	}()
	return runScenario(ctx, a.Addr(config.TargetGateway).String(), "")
}

// runScenario starts a run of question through the gateway's public gRPC
// API and follows its event stream until the terminal event, as a client in
// any language would. apiKey is empty when the gateway serves loopback
// clients without keys (-target=all with none configured).
func runScenario(ctx context.Context, gatewayAddr, apiKey string) (outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if apiKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+apiKey)
	}
	conn, err := grpc.NewClient(gatewayAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return outcome{}, err
	}
	defer conn.Close()
	gw := baagentv1.NewGatewayServiceClient(conn)
	resp, err := gw.StartRun(ctx, &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: question}}, grpc.WaitForReady(true))
	if err != nil {
		return outcome{}, fmt.Errorf("StartRun: %w", err)
	}
	runID := resp.GetRun().GetRunId()
	// "earliest": the run may have published before the stream started.
	stream, err := gw.StreamRunEvents(ctx, &baagentv1.StreamRunEventsRequest{RunId: runID, After: "earliest"})
	if err != nil {
		return outcome{}, fmt.Errorf("StreamRunEvents: %w", err)
	}
	var out outcome
	for {
		msg, err := stream.Recv()
		if err != nil {
			return out, fmt.Errorf("run %s after %v: %w", runID, out.events, err)
		}
		ev := msg.GetEvent()
		switch p := ev.GetPayload().(type) {
		case *baagentv1.Event_TextDelta, *baagentv1.Event_ThoughtDelta:
			continue // chunking is the transport's business
		case *baagentv1.Event_Act:
			out.tools = append(out.tools, p.Act.GetToolName())
		case *baagentv1.Event_Complete:
			out.answer = p.Complete.GetContent()
		case *baagentv1.Event_Error:
			return out, errors.New("run failed: " + p.Error.GetMessage())
		}
		out.events = append(out.events, ev.GetType())
		if runevent.IsTerminal(ev) {
			return out, nil
		}
	}
}

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("go"); err != nil {
		fmt.Fprintln(os.Stderr, "split: the go command is needed to build the binaries")
		os.Exit(1)
	}
	os.Exit(m.Run())
}
