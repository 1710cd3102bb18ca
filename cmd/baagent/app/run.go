package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Run serves until ctx is done, then shuts down gracefully: gRPC servers
// drain in-flight RPCs (bounded by -shutdown-timeout), background loops stop,
// the NATS connection drains, and the embedded NATS stops last. It returns
// nil after a requested shutdown and the first error if something failed
// while serving (after shutting the rest down).
func (a *App) Run(ctx context.Context) error {
	defer a.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		errOnce.Do(func() {
			firstErr = err
			cancel() // one failure stops the whole process
		})
	}
	start := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(f(ctx))
		}()
	}
	start(a.metrics.Serve)
	for _, svc := range a.order {
		start(a.servers[svc].Serve)
	}
	for _, f := range a.background {
		start(f)
	}
	a.log.Info("baagent running", "target", a.cfg.Target)
	<-ctx.Done()
	a.log.Info("baagent shutting down")
	wg.Wait()

	if a.nc != nil {
		if err := drain(a.nc, a.cfg.ShutdownTimeout); err != nil {
			a.log.Warn("NATS drain incomplete", "err", err)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	a.log.Info("baagent stopped")
	return nil
}

// drain flushes what the connection still has to publish and waits for it
// to close, up to timeout.
func drain(nc *nats.Conn, timeout time.Duration) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		return err
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("still draining after %s", timeout)
	}
}
