package gateway

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkFanoutSSE is the load generator for the fan-out target: one run
// publishing at a fixed rate to many SSE clients on loopback, measuring
// publish-to-client latency (the publish time travels in the event). Run
// with e.g. -bench FanoutSSE -benchtime 2000x; b.N is the event count.
func BenchmarkFanoutSSE(b *testing.B) {
	for _, c := range []struct{ clients, rate int }{{100, 1000}, {1000, 100}} {
		b.Run(fmt.Sprintf("clients=%d/rate=%d", c.clients, c.rate), func(b *testing.B) {
			benchFanout(b, c.clients, c.rate)
		})
	}
}

func benchFanout(b *testing.B, clients, rate int) {
	e := newEnvTB(b, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := e.run("acme", "run-bench")
	if _, err := r.Text(ctx, "0"); err != nil {
		b.Fatal(err)
	}
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	ready := make(chan struct{}, clients)
	for range clients {
		c, err := e.sse(ctx, "/v1/runs/run-bench/events", bearerHeader(keyAcme))
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.close()
			ready <- struct{}{}
			local := make([]time.Duration, 0, b.N)
			for {
				ev, err := c.next()
				if err != nil || ev.event == "complete" {
					break
				}
				i := strings.Index(ev.data, `"delta":"`)
				if i < 0 {
					continue
				}
				rest := ev.data[i+9:]
				ns, err := strconv.ParseInt(rest[:strings.IndexByte(rest, '"')], 10, 64)
				if err == nil {
					local = append(local, time.Since(time.Unix(0, ns)))
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	for range clients {
		<-ready
	}
	interval := time.Second / time.Duration(rate)
	b.ResetTimer()
	next := time.Now()
	for range b.N {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		if _, err := r.Text(ctx, strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := r.Complete(ctx, "done"); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lats)
	if len(lats) != b.N*clients {
		b.Fatalf("received %d of %d events", len(lats), b.N*clients)
	}
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99_ms")
}
