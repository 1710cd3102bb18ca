package gateway

import "sync"

// streamTracker counts the event streams in progress, so that Run returns
// only after every one has ended: a hijacked SSE connection is no longer
// tracked by http.Server.Shutdown.
type streamTracker struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// add counts a new stream; false once the server is shutting down.
func (t *streamTracker) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *streamTracker) done() { t.wg.Done() }

// closeAndWait refuses new streams and waits for the open ones, which end
// with the server's context.
func (t *streamTracker) closeAndWait() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}
