package gateway

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// BenchmarkFanoutSSE: one run publishing at a fixed rate to many SSE
// clients on loopback, measuring publish-to-client latency (the publish
// time travels in the event) and the CPU of the gateway. The clients run
// in one helper process and the NATS server with the publisher in
// another, so gateway_cores is the CPU time of the process holding only
// the gateway (its NATS client included) over the wall time of the run;
// nats_publisher_cores is the other server-side process's.
// b.N is the event count: run with e.g. -bench FanoutSSE -benchtime 2000x.
//
// delivery=direct is the gateway as it runs (the run's fan-out writes to
// caught-up clients itself); delivery=goroutine wakes each client's
// goroutine for every event, for a side-by-side comparison.
func BenchmarkFanoutSSE(b *testing.B) {
	for _, c := range []struct{ clients, rate int }{{1, 1000}, {100, 1000}, {1000, 100}} {
		for _, direct := range []bool{true, false} {
			delivery := "direct"
			if !direct {
				delivery = "goroutine"
			}
			b.Run(fmt.Sprintf("clients=%d/rate=%d/delivery=%s", c.clients, c.rate, delivery), func(b *testing.B) {
				benchFanout(b, hub.TransportSSE, c.clients, c.rate, direct)
			})
		}
	}
}

// BenchmarkFanoutWS is BenchmarkFanoutSSE over WebSocket, the gateway as
// it runs: the clients read the same events as text messages (and answer
// the gateway's pings).
func BenchmarkFanoutWS(b *testing.B) {
	for _, c := range []struct{ clients, rate int }{{1, 1000}, {100, 1000}, {1000, 100}} {
		b.Run(fmt.Sprintf("clients=%d/rate=%d", c.clients, c.rate), func(b *testing.B) {
			benchFanout(b, hub.TransportWS, c.clients, c.rate, true)
		})
	}
}

// benchFanout runs the fan-out benchmark over transport (hub.TransportSSE
// or hub.TransportWS). direct false turns the run's fan-out writes off.
func benchFanout(b *testing.B, transport string, clients, rate int, direct bool) {
	needFDs(b, clients)
	pub, url := startPublisher(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	js, nc, err := natstest.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	e := newEnvJS(b, Options{noDirect: !direct, MaxStreamsPerKey: -1}, js)
	e.orch.put(&baagentv1.Run{RunId: "run-bench", Tenant: "acme", State: baagentv1.RunState_RUN_STATE_RUNNING})
	pubCPU0 := pub.command(b, "text acme run-bench 1 1000") // the run has started
	mode, path := "fanout", "/events"
	if transport == hub.TransportWS {
		mode, path = "fanout-ws", "/ws"
	}
	lg := startLoadgen(b, mode, e.base+"/v1/runs/run-bench"+path, clients)

	b.ResetTimer()
	lag0 := deliveryLag(b, e, transport)
	cpu0, wall0 := processCPU(), time.Now()
	pub.command(b, "text acme run-bench %d %d", b.N, rate)
	pubCPU := pub.command(b, "complete acme run-bench") - pubCPU0
	res := lg.result(b)
	wall := time.Since(wall0)
	cores := float64(processCPU()-cpu0) / float64(wall)
	b.StopTimer()
	if res.count != b.N*clients {
		b.Fatalf("clients received %d of %d events", res.count, b.N*clients)
	}
	b.ReportMetric(ms(res.p50), "p50_ms")
	b.ReportMetric(ms(res.p99), "p99_ms")
	// The gateway's share: JetStream storing the event to its write to the
	// client's socket, from the gateway's delivery-lag histogram
	// (interpolated within its buckets).
	lag := deliveryLag(b, e, transport).sub(lag0)
	b.ReportMetric(lag.quantile(0.50)*1000, "gw_lag_p50_ms")
	b.ReportMetric(lag.quantile(0.99)*1000, "gw_lag_p99_ms")
	b.ReportMetric(ms(res.max), "max_ms")
	b.ReportMetric(cores, "gateway_cores")
	// The NATS server and publisher, for comparison with figures taken
	// when they shared the gateway's process (server = gateway + this).
	b.ReportMetric(float64(pubCPU)/float64(wall), "nats_publisher_cores")
	b.ReportMetric(res.cores, "client_cores")
	b.ReportMetric(loadAverage(), "loadavg")
	if transport == hub.TransportSSE && direct && testutil.ToFloat64(e.srv.hub.DirectDeliveries()) == 0 {
		b.Fatal("no event was written directly by the run's fan-out")
	}
}

// BenchmarkReconnectCatchUp: a client reconnects with a Last-Event-ID
// 1,000 events behind a live run and reads until it has caught up; the
// time from the request to the last of those events, p50/p99 over b.N
// reconnects.
func BenchmarkReconnectCatchUp(b *testing.B) {
	const behind, total = 1000, 1100
	e := newEnvTB(b, Options{MaxStreamsPerKey: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := e.run("acme", "run-catchup")
	for i := range total {
		if _, err := r.Text(ctx, fmt.Sprintf("event %d of a live run, with a little text as deltas have ", i)); err != nil {
			b.Fatal(err)
		}
	}
	from := strconv.Itoa(total - behind)
	last := strconv.Itoa(total)
	catchUp := func() time.Duration {
		start := time.Now()
		c, err := e.sse(ctx, "/v1/runs/run-catchup/events", http.Header{"Authorization": {"Bearer " + keyAcme}, "Last-Event-Id": {from}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.close()
		for n := 0; ; n++ {
			ev, err := c.next()
			if err != nil {
				b.Fatalf("after %d events: %v", n, err)
			}
			if ev.id == last {
				if n+1 != behind {
					b.Fatalf("caught up after %d events, want %d", n+1, behind)
				}
				return time.Since(start)
			}
		}
	}
	catchUp() // the run's feed is started and filled once, as for any watched run
	lats := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lats = append(lats, catchUp())
	}
	b.StopTimer()
	slices.Sort(lats)
	b.ReportMetric(ms(lats[len(lats)/2]), "p50_ms")
	b.ReportMetric(ms(lats[len(lats)*99/100]), "p99_ms")
	b.ReportMetric(loadAverage(), "loadavg")
}

// BenchmarkIdleSSEConnections: 10,000 SSE streams open on one run with no
// events (the load generator's process holds the client side); the
// gateway process's memory per connection, as resident set and as Go heap
// plus goroutine stacks. Run with -benchtime 1x.
func BenchmarkIdleSSEConnections(b *testing.B) {
	const conns = 10000
	needFDs(b, conns)
	for range b.N {
		benchIdle(b, conns)
	}
}

func benchIdle(b *testing.B, conns int) {
	b.StopTimer()
	e := newEnvTB(b, Options{MaxStreamsPerKey: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := e.run("acme", "run-idle")
	if _, err := r.Text(ctx, "the run has started"); err != nil {
		b.Fatal(err)
	}
	// One stream first, so the run's feed and the HTTP server exist before
	// the baseline.
	c, err := e.sse(ctx, "/v1/runs/run-idle/events", bearerHeader(keyAcme))
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	waitClients(ctx, b, e, 1)
	// Return what earlier iterations freed to the OS, so the resident set
	// grows with the new connections instead of reusing retained pages.
	debug.FreeOSMemory()
	rss0, heap0 := rssBytes(b), goMemory()

	b.StartTimer()
	lg := startLoadgen(b, "idle", e.base+"/v1/runs/run-idle/events", conns)
	waitClients(ctx, b, e, conns+1)
	b.StopTimer()

	rss, heap := rssBytes(b)-rss0, goMemory()-heap0
	b.ReportMetric(float64(rss)/float64(conns), "rss_B/conn")
	b.ReportMetric(float64(heap)/float64(conns), "heap+stack_B/conn")
	b.ReportMetric(loadAverage(), "loadavg")
	_ = lg.stdin.Close()
}

// lagHistogram is a snapshot of a delivery-lag histogram: cumulative
// counts by upper bound.
type lagHistogram struct {
	bounds []float64
	counts []uint64
}

// deliveryLag reads the gateway's delivery-lag histogram of transport.
func deliveryLag(tb testing.TB, e *env, transport string) lagHistogram {
	tb.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baagent_gateway_delivery_lag_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "transport" || l.GetValue() != transport {
					continue
				}
				var h lagHistogram
				for _, b := range m.GetHistogram().GetBucket() {
					h.bounds = append(h.bounds, b.GetUpperBound())
					h.counts = append(h.counts, b.GetCumulativeCount())
				}
				return h
			}
		}
	}
	tb.Fatalf("no %s delivery-lag histogram", transport)
	return lagHistogram{}
}

// sub is what was observed since before.
func (h lagHistogram) sub(before lagHistogram) lagHistogram {
	d := lagHistogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range d.counts {
		if i < len(before.counts) {
			d.counts[i] -= before.counts[i]
		}
	}
	return d
}

// quantile estimates the q-quantile in seconds, interpolating linearly
// within the bucket it falls in (as PromQL's histogram_quantile does).
func (h lagHistogram) quantile(q float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return 0
	}
	rank := q * float64(h.counts[len(h.counts)-1])
	lower, below := 0.0, uint64(0)
	for i, c := range h.counts {
		if float64(c) >= rank {
			in := c - below
			if in == 0 {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = h.bounds[i], c
	}
	return h.bounds[len(h.bounds)-1]
}

// goMemory is the Go heap in use plus goroutine stacks, after a GC.
func goMemory() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// waitClients waits until the gateway counts n SSE clients.
func waitClients(ctx context.Context, tb testing.TB, e *env, n int) {
	tb.Helper()
	for {
		if got := streamClients(tb, e, "sse"); got == n {
			return
		} else if ctx.Err() != nil {
			tb.Fatalf("%d SSE clients connected, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// streamClients reads the gateway's connected-clients gauge.
func streamClients(tb testing.TB, e *env, transport string) int {
	tb.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baagent_gateway_stream_clients" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "transport" && l.GetValue() == transport {
					return int(m.GetGauge().GetValue())
				}
			}
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func TestLagHistogramQuantile(t *testing.T) {
	h := lagHistogram{bounds: []float64{.001, .005, .01}, counts: []uint64{50, 90, 100}}
	for _, c := range []struct{ q, want float64 }{{0.5, .001}, {0.25, .0005}, {0.7, .003}, {0.99, .0095}, {1, .01}} {
		if got := h.quantile(c.q); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	before := lagHistogram{bounds: h.bounds, counts: []uint64{50, 50, 50}}
	if got := h.sub(before).quantile(0.5); got < .0035-1e-9 || got > .0035+1e-9 {
		t.Errorf("quantile of the difference = %v, want .0035", got)
	}
	if got := (lagHistogram{}).quantile(0.99); got != 0 {
		t.Errorf("empty histogram: %v", got)
	}
}
