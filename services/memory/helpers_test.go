package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

// testDims is the lexical embedding's length in tests.
const testDims = 256

// tableExtractor answers from a table of results by content; content not
// in the table yields no entities. It counts calls.
type tableExtractor struct {
	mu      sync.Mutex
	results map[string]*extract.Result
	calls   int
}

func (x *tableExtractor) Extract(_ context.Context, content string) (*extract.Result, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.calls++
	if r, ok := x.results[content]; ok {
		cp := *r
		return &cp, nil
	}
	return &extract.Result{}, nil
}

func (x *tableExtractor) Model() string { return "table" }

// funcExtractor is an extractor written inline.
type funcExtractor func(ctx context.Context, content string) (*extract.Result, error)

func (f funcExtractor) Extract(ctx context.Context, content string) (*extract.Result, error) {
	return f(ctx, content)
}

func (f funcExtractor) Model() string { return "func" }

// retryableErr is an error that says whether to retry, as the model
// client's errors do.
type retryableErr bool

func (e retryableErr) Error() string   { return "model said no" }
func (e retryableErr) Retryable() bool { return bool(e) }

var errPermanent = retryableErr(false)

// testServer is a server over a fresh SQLite store with the lexical
// embedding, its gRPC client and the store.
type testServer struct {
	srv   *Server
	c     baagentv1.MemoryServiceClient
	store store.Store
	reg   *prometheus.Registry
}

// quickOpts are options for tests: fast polling and backoff.
func quickOpts(o Options) Options {
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	if o.Backoff.Initial == 0 {
		o.Backoff.Initial, o.Backoff.Max = 5*time.Millisecond, 20*time.Millisecond
	}
	if o.CommunityInterval == 0 {
		o.CommunityInterval = -1
	}
	return o
}

// newTestServer starts a server on loopback; when run is true its
// workers run until the test ends. opts.Store, when nil, is a fresh store.
func newTestServer(t testing.TB, opts Options, run bool) *testServer {
	t.Helper()
	if opts.Store == nil {
		opts.Store = openStore(t)
	}
	if opts.Embedder == nil {
		opts.Embedder = embed.NewLexical(testDims)
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	srv, err := New(quickOpts(opts))
	if err != nil {
		t.Fatal(err)
	}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })
	if run {
		testkit.Run(t, context.Background(), srv.Run)
	}
	return &testServer{srv: srv, c: baagentv1.NewMemoryServiceClient(conn), store: opts.Store, reg: reg}
}

// add adds a USER episode and waits for it to be processed.
func (ts *testServer) add(t *testing.T, tenant, content string) *baagentv1.Episode {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: tenant, Content: content, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.GetEpisode().GetStatus(); st != baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED {
		t.Fatalf("episode %s is %v (%s), want SYNCED", resp.GetEpisode().GetId(), st, resp.GetEpisode().GetError())
	}
	return resp.GetEpisode()
}

// waitStatus waits until the episode has the status.
func waitStatus(t *testing.T, s store.Store, tenant, id string, want store.EpisodeStatus) *store.Episode {
	t.Helper()
	var ep *store.Episode
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("episode %s status %d", id, want), func() bool {
		var err error
		ep, err = s.GetEpisode(context.Background(), tenant, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil && ep.Status == want
	})
	return ep
}

func ent(name, typ, summary string, attrs ...string) extract.Entity {
	e := extract.Entity{Name: name, Type: typ, Summary: summary}
	for i := 0; i+1 < len(attrs); i += 2 {
		if e.Attributes == nil {
			e.Attributes = map[string]string{}
		}
		e.Attributes[attrs[i]] = attrs[i+1]
	}
	return e
}

func rel(src, typ, dst, fact string) extract.Relation {
	return extract.Relation{Source: src, Target: dst, Type: typ, Fact: fact, Confidence: 0.9}
}

// counterValue reads a counter (or the count of a histogram) with one
// label from reg; 0 when it has no such series.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					if h := m.GetHistogram(); h != nil {
						return float64(h.GetSampleCount())
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
