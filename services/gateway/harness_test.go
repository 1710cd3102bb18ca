package gateway

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// Test keys (16+ bytes, as the configuration requires).
const (
	keyAcme    = "acme-key-0123456789"
	keyInitech = "initech-key-0123456789"
)

// fakeOrchestrator is an in-memory OrchestratorService keyed by tenant, as
// the real one is; tests publish the run's events themselves.
type fakeOrchestrator struct {
	baagentv1.UnimplementedOrchestratorServiceServer
	mu   sync.Mutex
	runs map[string]*baagentv1.Run // tenant/run_id
	n    int
	// fail, if set, is asked first by every method: a non-nil error is
	// the answer.
	fail func(method string) error
	// onStart, if set, is called by StartRun with the new run before it
	// answers: a run that publishes events at once.
	onStart func(run *baagentv1.Run)
}

func (f *fakeOrchestrator) failure(method string) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail == nil {
		return nil
	}
	return fail(method)
}

func (f *fakeOrchestrator) put(run *baagentv1.Run) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[run.Tenant+"/"+run.RunId] = run
}

func (f *fakeOrchestrator) StartRun(_ context.Context, req *baagentv1.OrchestratorServiceStartRunRequest) (*baagentv1.OrchestratorServiceStartRunResponse, error) {
	if err := f.failure("StartRun"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.n++
	id := fmt.Sprintf("run-%d", f.n)
	f.mu.Unlock()
	run := &baagentv1.Run{RunId: id, Tenant: req.Tenant, Input: req.GetSpec().GetInput(), State: baagentv1.RunState_RUN_STATE_QUEUED, CreatedAt: timestamppb.Now(),
		ConversationId: cmp.Or(req.GetSpec().GetConversationId(), "conv-"+id), Model: req.GetSpec().GetModel(), Labels: req.GetSpec().GetLabels()}
	f.put(run)
	f.mu.Lock()
	onStart := f.onStart
	f.mu.Unlock()
	if onStart != nil {
		onStart(run)
	}
	return &baagentv1.OrchestratorServiceStartRunResponse{Run: run}, nil
}

func (f *fakeOrchestrator) GetRun(_ context.Context, req *baagentv1.OrchestratorServiceGetRunRequest) (*baagentv1.OrchestratorServiceGetRunResponse, error) {
	if err := f.failure("GetRun"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	run, ok := f.runs[req.Tenant+"/"+req.RunId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "run %s not found", req.RunId)
	}
	return &baagentv1.OrchestratorServiceGetRunResponse{Run: run}, nil
}

// ListRuns pages by run id, page_size runs (default 50) after the id in
// page_token; the token is the last id of a page followed by more. A
// conversation filter leaves out the runs recorded with another
// conversation (runs recorded without one always match).
func (f *fakeOrchestrator) ListRuns(_ context.Context, req *baagentv1.OrchestratorServiceListRunsRequest) (*baagentv1.OrchestratorServiceListRunsResponse, error) {
	if err := f.failure("ListRuns"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var runs []*baagentv1.Run
	for _, r := range f.runs {
		if r.Tenant == req.Tenant && r.RunId > req.PageToken && (req.ConversationId == "" || r.ConversationId == "" || r.ConversationId == req.ConversationId) {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b *baagentv1.Run) int { return strings.Compare(a.RunId, b.RunId) })
	size := int(cmp.Or(req.PageSize, 50))
	out := &baagentv1.OrchestratorServiceListRunsResponse{Runs: runs}
	if len(runs) > size {
		out.Runs = runs[:size]
		out.NextPageToken = runs[size-1].RunId
	}
	return out, nil
}

// env is a gateway on loopback with JetStream and the fake orchestrator.
type env struct {
	t      testing.TB
	js     jetstream.JetStream
	orch   *fakeOrchestrator
	srv    *Server
	reg    *prometheus.Registry
	base   string // http://127.0.0.1:port
	client baagentv1.GatewayServiceClient
	stop   func() error // ends Run and returns its error; idempotent
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := newEnvTB(t, opts)
	e.t = t
	return e
}

func newEnvTB(t testing.TB, opts Options) *env {
	t.Helper()
	js, _ := natstest.JetStream(t)
	return newEnvJS(t, opts, js)
}

// newEnvJS is a gateway reading events from js (a NATS server the test
// started elsewhere).
func newEnvJS(t testing.TB, opts Options, js jetstream.JetStream) *env {
	t.Helper()
	orch := &fakeOrchestrator{runs: map[string]*baagentv1.Run{}}
	oconn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterOrchestratorServiceServer(gs, orch) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.Registerer = reg
	opts.JetStream = js
	opts.Orchestrator = baagentv1.NewOrchestratorServiceClient(oconn)
	opts.HTTPListener = lis
	if opts.APIKeys == nil {
		opts.APIKeys = map[string]string{keyAcme: "acme", keyInitech: "initech"}
	}
	srv := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	gconn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &env{t: t, js: js, orch: orch, srv: srv, reg: reg, base: "http://" + lis.Addr().String(),
		client: baagentv1.NewGatewayServiceClient(gconn), stop: stop}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run registers a run of tenant with the orchestrator and returns its
// event publisher.
func (e *env) run(tenant, id string) *natstest.Run {
	e.orch.put(&baagentv1.Run{RunId: id, Tenant: tenant, State: baagentv1.RunState_RUN_STATE_RUNNING})
	return natstest.NewRun(e.js, tenant, id)
}

func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// sseEvent is one parsed SSE event.
type sseEvent struct{ id, event, data string }

// sseClient reads an SSE response.
type sseClient struct {
	resp *http.Response
	br   *bufio.Reader
}

func (e *env) sse(ctx context.Context, path string, header http.Header) (*sseClient, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return &sseClient{resp: resp, br: bufio.NewReader(resp.Body)}, nil
}

// next returns the next event (comments and retry lines skipped).
func (c *sseClient) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.event != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// all reads events until the stream ends.
func (c *sseClient) all() ([]sseEvent, error) {
	defer c.close()
	var out []sseEvent
	for {
		ev, err := c.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func (c *sseClient) close() { _ = c.resp.Body.Close() }

func bearerHeader(key string) http.Header {
	return http.Header{"Authorization": {"Bearer " + key}}
}
