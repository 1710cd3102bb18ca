package load

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcclient"
	"github.com/baagent/baagent/internal/natsx"
)

// Driver submits runs of the load scenario through the gateway's gRPC API
// and follows every run's events on a NATS wildcard subscription (one
// subscription for all runs, as a dashboard would): it times each step
// from its step_start event to the next step_start or the terminal event,
// checks each run's events are contiguous with one terminal event, and
// checks the final answer. Its memory does not grow with the number of
// runs: a run's state is dropped at its terminal event, and step times go
// to a fixed-size histogram.
type Driver struct {
	conn     *grpc.ClientConn
	gw       baagentv1.GatewayServiceClient
	keys     []string
	expected string
	nc       *nats.Conn
	sub      *nats.Subscription
	notify   chan struct{}

	mu       sync.Mutex
	live     map[string]*trace // runs with events seen and no terminal yet
	steps    Histogram         // step_start → next step_start/terminal
	runTimes Histogram         // start event → terminal event
	c        Counters
	problems []string // first few failures, for the report
	// ended records each finished run's last seq when Options.Keep is set
	// (bounded by the runs one test starts).
	ended map[string]uint64
}

// Counters are the driver's totals so far.
type Counters struct {
	Submitted, Accepted, Refused int
	// Terminals counts runs whose terminal event arrived; Completed those
	// with the expected answer; Failed the rest (wrong answer, error or
	// cancelled event, wrong number of steps).
	Terminals, Completed, Failed int
	// SeqErrors counts events whose seq did not follow the run's previous
	// one; NATSErrors asynchronous subscription errors (a slow consumer).
	SeqErrors, NATSErrors int
	// MaxInFlight is the most runs accepted and not yet finished at once.
	MaxInFlight int
}

// trace is one run's progress as its events arrive.
type trace struct {
	lastSeq   uint64
	start     time.Time // start event
	stepStart time.Time // latest step_start
	steps     int
}

// DriverOptions configures a Driver.
type DriverOptions struct {
	// GatewayAddr is the gateway's gRPC address; NATSURL the suite's NATS.
	GatewayAddr, NATSURL string
	// Keys are API keys; run i uses Keys[i % len(Keys)].
	Keys []string
	// Expected is the final answer every run must give.
	Expected string
	// Keep records every finished run's last seq for Verify.
	Keep bool
}

const maxProblems = 20

// NewDriver connects to the gateway and subscribes to every run's events.
func NewDriver(o DriverOptions) (*Driver, error) {
	if len(o.Keys) == 0 {
		return nil, errors.New("DriverOptions.Keys is empty")
	}
	d := &Driver{keys: o.Keys, expected: o.Expected, live: map[string]*trace{}, notify: make(chan struct{}, 1)}
	if o.Keep {
		d.ended = map[string]uint64{}
	}
	nc, err := nats.Connect(o.NATSURL, nats.Name("load-driver"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		d.mu.Lock()
		d.c.NATSErrors++
		d.problem("NATS: %v", err)
		d.mu.Unlock()
		d.wake()
	}))
	if err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	d.nc = nc
	sub, err := nc.Subscribe(natsx.EventsSubjects, d.onEvent)
	if err == nil {
		// Generous, but bounded: a handler that falls this far behind is
		// reported as a slow consumer (a NATSErrors count), never silent.
		err = sub.SetPendingLimits(1<<20, 1<<30)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribe to run events: %w", err)
	}
	d.sub = sub
	conn, err := grpcclient.Dial(o.GatewayAddr, grpcclient.Options{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	d.conn, d.gw = conn, baagentv1.NewGatewayServiceClient(conn)
	return d, nil
}

// Close drops the subscription and the connections.
func (d *Driver) Close() {
	_ = d.conn.Close()
	d.nc.Close()
}

func (d *Driver) wake() {
	select {
	case d.notify <- struct{}{}:
	default:
	}
}

// problem records a failure description (first maxProblems); mu is held.
func (d *Driver) problem(format string, args ...any) {
	if len(d.problems) < maxProblems {
		d.problems = append(d.problems, fmt.Sprintf(format, args...))
	}
}

// authed adds the API key of run i to ctx.
func (d *Driver) authed(ctx context.Context, i int) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+d.keys[i%len(d.keys)])
}

// Start submits run i and returns its id.
func (d *Driver) Start(ctx context.Context, i int) (string, error) {
	d.mu.Lock()
	d.c.Submitted++
	d.mu.Unlock()
	resp, err := d.gw.StartRun(d.authed(ctx, i), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: Question}})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.c.Refused++
		d.problem("StartRun %d: %v", i, err)
		return "", err
	}
	d.c.Accepted++
	d.c.MaxInFlight = max(d.c.MaxInFlight, d.c.Accepted-d.c.Terminals)
	return resp.GetRun().GetRunId(), nil
}

// onEvent follows one event of any run.
func (d *Driver) onEvent(msg *nats.Msg) {
	tenant, runID, err := natsx.ParseEventSubject(msg.Subject)
	if err != nil || !strings.HasPrefix(tenant, "load-") {
		return
	}
	ev := &baagentv1.Event{}
	if err := proto.Unmarshal(msg.Data, ev); err != nil {
		d.mu.Lock()
		d.problem("run %s: undecodable event: %v", runID, err)
		d.c.SeqErrors++
		d.mu.Unlock()
		return
	}
	ts := ev.GetTs().AsTime()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.live[runID]
	if t == nil {
		t = &trace{}
		d.live[runID] = t
	}
	if ev.GetSeq() != t.lastSeq+1 {
		d.c.SeqErrors++
		d.problem("run %s: event %s has seq %d after %d", runID, ev.GetType(), ev.GetSeq(), t.lastSeq)
	}
	t.lastSeq = ev.GetSeq()
	switch ev.GetType() {
	case "start":
		t.start = ts
	case "step_start":
		if !t.stepStart.IsZero() {
			d.steps.Add(ts.Sub(t.stepStart))
		}
		t.stepStart = ts
		t.steps++
	case "complete", "error", "cancelled":
		if !t.stepStart.IsZero() {
			d.steps.Add(ts.Sub(t.stepStart))
		}
		if !t.start.IsZero() {
			d.runTimes.Add(ts.Sub(t.start))
		}
		d.finish(runID, t, ev)
		delete(d.live, runID)
		if d.ended != nil {
			d.ended[runID] = t.lastSeq
		}
		d.wake()
	}
}

// finish judges a run at its terminal event; mu is held.
func (d *Driver) finish(runID string, t *trace, ev *baagentv1.Event) {
	d.c.Terminals++
	switch {
	case ev.GetType() != "complete":
		d.c.Failed++
		d.problem("run %s ended with %s: %v", runID, ev.GetType(), ev.GetPayload())
	case ev.GetComplete().GetContent() != d.expected:
		d.c.Failed++
		d.problem("run %s answered %q, want %q", runID, ev.GetComplete().GetContent(), d.expected)
	case t.steps != StepsPerRun:
		d.c.Failed++
		d.problem("run %s took %d steps, want %d", runID, t.steps, StepsPerRun)
	default:
		d.c.Completed++
	}
}

// Counters returns the totals so far.
func (d *Driver) Counters() Counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c
}

// Problems returns the first failures seen.
func (d *Driver) Problems() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.problems...)
}

// Steps returns a copy of the step-time histogram; RunTimes that of the
// run times (start event to terminal event).
func (d *Driver) Steps() Histogram {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.steps
}

// RunTimes returns a copy of the run-time histogram.
func (d *Driver) RunTimes() Histogram {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runTimes
}

// ResetStats clears the histograms (after a warm-up).
func (d *Driver) ResetStats() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.steps, d.runTimes = Histogram{}, Histogram{}
}

// Live is the number of runs with events seen and no terminal event yet.
func (d *Driver) Live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.live)
}

// WaitTerminals blocks until n terminal events have arrived in total (or
// a NATS error makes that impossible to know), or ctx ends.
func (d *Driver) WaitTerminals(ctx context.Context, n int) error {
	for {
		c := d.Counters()
		if c.Terminals >= n {
			return nil
		}
		if c.NATSErrors > 0 {
			return fmt.Errorf("event subscription failed: %v", d.Problems())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d runs finished, %d still running: %w", c.Terminals, n, d.Live(), ctx.Err())
		case <-d.notify:
		}
	}
}

// Submit starts runs first..first+n-1 on `clients` concurrent callers and
// returns the run ids accepted (index i-first), "" for a refused one.
func (d *Driver) Submit(ctx context.Context, first, n, clients int) []string {
	ids := make([]string, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(clients, 1) {
		wg.Go(func() {
			for i := range next {
				ids[i-first], _ = d.Start(ctx, i)
			}
		})
	}
	for i := first; i < first+n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return ids
}

// Verify reads every run back through the gateway (GetRun with the run's
// own tenant key) on `clients` concurrent callers: each must be COMPLETED
// with the expected answer, and its stored last_seq must equal the last
// event seen on the wire. Run i of ids was submitted as run first+i.
func (d *Driver) Verify(ctx context.Context, ids []string, first, clients int) []string {
	var (
		mu       sync.Mutex
		problems []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(clients, 1) {
		wg.Go(func() {
			for i := range next {
				id := ids[i]
				if id == "" {
					continue
				}
				resp, err := d.gw.GetRun(d.authed(ctx, first+i), &baagentv1.GetRunRequest{RunId: id})
				if err != nil {
					report("GetRun %s: %v", id, err)
					continue
				}
				run := resp.GetRun()
				d.mu.Lock()
				lastSeq, seen := d.ended[id]
				d.mu.Unlock()
				switch {
				case run.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED:
					report("run %s is %s: %v", id, run.GetState(), run.GetError())
				case run.GetFinalAnswer() != d.expected:
					report("run %s final_answer %q", id, run.GetFinalAnswer())
				case !seen:
					report("run %s: no terminal event seen on the wire", id)
				case run.GetLastSeq() != lastSeq:
					report("run %s: last_seq %d stored, %d seen", id, run.GetLastSeq(), lastSeq)
				}
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return problems
}
