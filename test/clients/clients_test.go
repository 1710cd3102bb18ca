// Package clients runs the examples of the generated clients against the
// whole suite, in-process (-target=all with the scripted model): the Python
// example on Debian's python3-grpcio and the TypeScript one on Connect for
// Node. Each starts a run with StartRunStream, prints its events from the
// first and answers the run's clarification question; the test checks the
// output and, over the Go client, that the answer reached the run.
package clients

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/suite"
)

// requireEnv makes missing client dependencies a failure instead of a skip
// (make test sets it).
const requireEnv = "BAAGENT_REQUIRE_CLIENTS"

// Debian bookworm's interpreter, the one python3-grpcio and
// python3-protobuf install for (.ci/run installs them).
const python = "/usr/bin/python3"

const (
	question = "Clients test, ask me which quarters to compare."
	answer   = "Q3 and Q4"
)

func TestPythonClientExample(t *testing.T) {
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		missing(t, fmt.Sprintf("%s with grpc and protobuf (apt-get install -y python3-grpcio python3-protobuf): %v: %s", python, err, out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr, gw := startSuite(ctx, t)
	cmd := exec.CommandContext(ctx, python, "../../clients/python/examples/ask.py", question, answer)
	cmd.Env = append(os.Environ(), "PYTHONPATH=../../clients/python", "BAAGENT_GRPC="+addr)
	checkExample(ctx, t, cmd, gw)
}

func TestTypeScriptClientExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node")
	}
	const pkg = "../../clients/typescript"
	if _, err := os.Stat(filepath.Join(pkg, "node_modules", "@connectrpc", "connect-node", "package.json")); err != nil {
		missing(t, "clients/typescript/node_modules (npm ci --prefix clients/typescript)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Compile the example (type-checking it against the generated
	// declarations) while the suite starts.
	tsc := exec.CommandContext(ctx, node, "node_modules/typescript/bin/tsc", "-p", "examples/tsconfig.json")
	tsc.Dir = pkg
	compiled := make(chan error, 1)
	go func() {
		out, err := tsc.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("tsc: %v\n%s", err, out)
		}
		compiled <- err
	}()
	addr, gw := startSuite(ctx, t)
	if err := <-compiled; err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, filepath.Join(pkg, "examples", "dist", "ask.js"), question, answer)
	cmd.Env = append(os.Environ(), "BAAGENT_GRPC=http://"+addr)
	checkExample(ctx, t, cmd, gw)
}

func missing(t *testing.T, what string) {
	t.Helper()
	msg := "the generated clients' test needs " + what
	if os.Getenv(requireEnv) == "1" {
		t.Fatal(msg + "; " + requireEnv + "=1 makes this a failure")
	}
	t.Skip(msg)
}

// checkExample runs an example and checks what it printed: the run first,
// then the events from seq 1 in order, the question, the final answer; and
// that the run recorded the example's answer (not a timeout).
func checkExample(ctx context.Context, t *testing.T, cmd *exec.Cmd, gw baagentv1.GatewayServiceClient) {
	t.Helper()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("%s output:\n%s", filepath.Base(cmd.Args[1]), out)
	if err != nil {
		t.Fatalf("example: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var runID string
	var seq int
	var asked, completed bool
	for sc.Scan() {
		line := sc.Text()
		switch f := strings.Fields(line); {
		case runID == "":
			if len(f) != 2 || f[0] != "run" {
				t.Fatalf("first line %q, want `run RUN_ID`", line)
			}
			runID = f[1]
		case strings.HasPrefix(line, "  question: "):
			asked = true
		case len(f) == 2 && f[0] == fmt.Sprint(seq+1):
			seq++
			completed = completed || f[1] == "complete"
		}
	}
	if seq < 5 || !asked || !completed {
		t.Fatalf("example printed events 1..%d (question %v, complete %v); want every event from seq 1, the question and the complete event", seq, asked, completed)
	}
	if !strings.Contains(string(out), "Quarterly revenue as you asked") {
		t.Fatal("the final answer is missing from the output")
	}
	st, err := gw.StreamRunEvents(ctx, &baagentv1.StreamRunEventsRequest{RunId: runID, After: "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	var answered *baagentv1.ClarificationAnsweredPayload
	n := 0
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if a := m.GetEvent().GetClarificationAnswered(); a != nil {
			answered = a
		}
	}
	if answered == nil || answered.GetAnswer() != answer || answered.GetTimedOut() {
		t.Fatalf("clarification_answered = %v, want the example's answer %q", answered, answer)
	}
	if n != seq {
		t.Fatalf("the run has %d events, the example printed %d", n, seq)
	}
}

// startSuite runs every service in this process on free loopback ports
// (no API keys: the gateway serves loopback callers as tenant default) with
// the shipped skills, sample data and scenarios plus this test's own; it
// returns the gateway's gRPC address once a run can be started, and a Go
// client of it.
func startSuite(ctx context.Context, t *testing.T) (string, baagentv1.GatewayServiceClient) {
	t.Helper()
	a := suite.Start(ctx, t, suite.Options{})
	addr := a.Addr("gateway").String()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	gw := baagentv1.NewGatewayServiceClient(conn)
	testkit.EventuallyContext(ctx, t, "the gateway at "+addr, func() (bool, string) {
		_, err := gw.ListRuns(ctx, &baagentv1.ListRunsRequest{PageSize: 1})
		return err == nil, fmt.Sprint(err)
	})
	return addr, gw
}
