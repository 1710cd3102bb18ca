// Package faults is the fault suite of issue 12: the suite in split mode
// (each service a `baagent -target=<svc>` process, NATS with a JetStream
// file store) while processes are killed with SIGKILL and restarted and the
// model endpoint misbehaves. Each test asserts what a client sees: runs end
// (complete, or a clear error), every event exactly once with contiguous
// seq and one terminal event, no run left RUNNING.
package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/reliability/harness"
)

// apiKey is the gateway key of tenant acme in every cluster here.
const (
	apiKey = "fault-suite-key-0000000000000001"
	tenant = "acme"
)

// baagentBin is built once by TestMain; every test reads it only.
// buildDir is where TestMain builds it, and tests build other binaries.
var baagentBin, buildDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := exec.LookPath("go"); err != nil {
		fmt.Fprintln(os.Stderr, "faults: the go command is needed to build cmd/baagent")
		return 1
	}
	dir, err := os.MkdirTemp("", "baagent-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	buildDir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if baagentBin, err = harness.BuildBaagent(ctx, root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// writeScenarios writes scripted-model scenarios (name → YAML) into a new
// directory and returns it.
func writeScenarios(t *testing.T, scenarios map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range scenarios {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startCluster starts the split-mode suite with the fault suite's key.
func startCluster(t *testing.T, opts harness.ClusterOptions) *harness.Cluster {
	t.Helper()
	opts.Baagent = baagentBin
	opts.APIKeys = map[string]string{apiKey: tenant}
	return harness.StartCluster(t, opts)
}

// gatewayClient is a client of the gateway's public gRPC API.
type gatewayClient struct {
	gw baagentv1.GatewayServiceClient
}

func newGatewayClient(t *testing.T, c *harness.Cluster) *gatewayClient {
	t.Helper()
	conn, err := grpc.NewClient(c.Addr["gateway"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &gatewayClient{gw: baagentv1.NewGatewayServiceClient(conn)}
}

func authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+apiKey)
}

// startRun starts a run of input and returns its id.
func (g *gatewayClient) startRun(ctx context.Context, t *testing.T, input string) string {
	t.Helper()
	resp, err := g.gw.StartRun(authed(ctx), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: input}}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("StartRun(%q): %v", input, err)
	}
	return resp.GetRun().GetRunId()
}

// getRun reads the run's record through the gateway.
func (g *gatewayClient) getRun(ctx context.Context, runID string) (*baagentv1.Run, error) {
	resp, err := g.gw.GetRun(authed(ctx), &baagentv1.GetRunRequest{RunId: runID})
	return resp.GetRun(), err
}

// waitFinished polls GetRun until the run is no longer queued or running.
func (g *gatewayClient) waitFinished(ctx context.Context, t *testing.T, runID string) *baagentv1.Run {
	t.Helper()
	var run *baagentv1.Run
	testkit.EventuallyContext(ctx, t, "run "+runID+" to finish", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := g.getRun(cctx, runID)
		if err != nil {
			return false, fmt.Sprintf("state %v, error %v", run.GetState(), err)
		}
		run = r
		switch r.GetState() {
		case baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_CANCELLED:
			return true, ""
		}
		return false, fmt.Sprintf("state %v", r.GetState())
	})
	return run
}

// recorder keeps what one client received of one run, across reconnects.
type recorder struct {
	mu         sync.Mutex
	events     []*baagentv1.Event
	reconnects int
	errs       []string // why each connection ended early
}

func (r *recorder) add(ev *baagentv1.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// cursor is where a reconnect resumes: after the last event received, or
// from the earliest retained one when nothing arrived yet.
func (r *recorder) cursor() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return "earliest"
	}
	return r.events[len(r.events)-1].GetCursor()
}

func (r *recorder) snapshot() []*baagentv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*baagentv1.Event(nil), r.events...)
}

// has reports whether an event satisfying f has been received.
func (r *recorder) has(f func(*baagentv1.Event) bool) bool {
	for _, ev := range r.snapshot() {
		if f(ev) {
			return true
		}
	}
	return false
}

func (r *recorder) connectionEnded(err error) {
	r.mu.Lock()
	r.reconnects++
	r.errs = append(r.errs, err.Error())
	r.mu.Unlock()
}

func isTerminal(ev *baagentv1.Event) bool {
	switch ev.GetType() {
	case "complete", "error", "cancelled":
		return true
	}
	return false
}

// followGRPC streams runID's events through the gateway's gRPC API until
// the terminal event, reconnecting from its cursor whenever the stream
// breaks (a gateway or NATS restart), until ctx ends. It returns when done.
func (g *gatewayClient) followGRPC(ctx context.Context, runID string, rec *recorder) error {
	for {
		done, err := g.streamOnce(ctx, runID, rec)
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gRPC stream of %s: %w (last: %v)", runID, ctx.Err(), err)
		}
		rec.connectionEnded(err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // a client's reconnect delay
		}
	}
}

func (g *gatewayClient) streamOnce(ctx context.Context, runID string, rec *recorder) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.gw.StreamRunEvents(authed(sctx), &baagentv1.StreamRunEventsRequest{RunId: runID, After: rec.cursor()})
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
			return false, fmt.Errorf("stream_reset: %v", protojson.Format(ev))
		}
		rec.add(ev)
		if isTerminal(ev) {
			return true, nil
		}
	}
}

// followSSE does what followGRPC does over Server-Sent Events, resuming
// with Last-Event-ID as EventSource does.
func followSSE(ctx context.Context, httpAddr, runID string, rec *recorder) error {
	for {
		done, err := sseOnce(ctx, httpAddr, runID, rec)
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("SSE stream of %s: %w (last: %v)", runID, ctx.Err(), err)
		}
		rec.connectionEnded(err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func sseOnce(ctx context.Context, httpAddr, runID string, rec *recorder) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/v1/runs/"+runID+"/events", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if c := rec.cursor(); c == "earliest" {
		q := req.URL.Query()
		q.Set("cursor", "earliest")
		req.URL.RawQuery = q.Encode()
	} else {
		req.Header.Set("Last-Event-ID", c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		// The run is over and everything up to our cursor was delivered.
		return rec.has(isTerminal), errors.New("204 before a terminal event")
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return false, fmt.Errorf("SSE %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && data.Len() > 0:
			ev := &baagentv1.Event{}
			if err := protojson.Unmarshal([]byte(data.String()), ev); err != nil {
				// Not an event envelope (slow_consumer notice): reconnect.
				var generic map[string]any
				if json.Unmarshal([]byte(data.String()), &generic) == nil {
					return false, fmt.Errorf("SSE notice: %s", data.String())
				}
				return false, fmt.Errorf("SSE data: %w", err)
			}
			data.Reset()
			if ev.GetType() == "stream_reset" {
				return false, fmt.Errorf("stream_reset: %v", protojson.Format(ev))
			}
			rec.add(ev)
			if isTerminal(ev) {
				return true, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, io.ErrUnexpectedEOF
}

// checkStream asserts what a resuming client must see: every event once,
// seq contiguous from 1, exactly one terminal event and it is the last.
func checkStream(t *testing.T, who string, evs []*baagentv1.Event) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatalf("%s: no events", who)
	}
	terminals := 0
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("%s: event %d has seq %d (want %d): missing or duplicated; types %v", who, i, ev.GetSeq(), i+1, types(evs))
		}
		if isTerminal(ev) {
			terminals++
		}
	}
	if terminals != 1 || !isTerminal(evs[len(evs)-1]) {
		t.Fatalf("%s: %d terminal events, last is %q; types %v", who, terminals, evs[len(evs)-1].GetType(), types(evs))
	}
}

// types lists event types, deltas left out.
func types(evs []*baagentv1.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.GetType() == "text_delta" || ev.GetType() == "thought_delta" {
			continue
		}
		out = append(out, fmt.Sprintf("%d:%s", ev.GetSeq(), ev.GetType()))
	}
	return out
}

// actOf reports whether ev is the act event of a call to tool.
func actOf(tool string) func(*baagentv1.Event) bool {
	return func(ev *baagentv1.Event) bool { return ev.GetAct().GetToolName() == tool }
}

// terminal returns the terminal event of a checked stream.
func terminal(evs []*baagentv1.Event) *baagentv1.Event { return evs[len(evs)-1] }

// startOptions are cluster options with the given scenarios as the
// scripted model's only ones.
func startOptions(t *testing.T, scenarios map[string]string) harness.ClusterOptions {
	return harness.ClusterOptions{ScenariosDir: writeScenarios(t, scenarios)}
}
