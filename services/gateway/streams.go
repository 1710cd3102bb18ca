package gateway

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// What the event-stream transports share: opening a subscription, the
// slow-consumer reason and the count of streams in progress. Each
// transport frames the hub's events itself: transport_sse.go (Server-Sent
// Events), transport_ws.go (WebSocket), transport_grpc.go (gRPC).

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

// SlowConsumerReason is the reason a client is cut for falling behind: the
// ErrorInfo reason of the gRPC status, the SSE `slow_consumer` event and
// the WebSocket close reason.
const SlowConsumerReason = "slow_consumer"

// The hub renders every event once per framing, for all the viewers that
// use it, and the run's fan-out writes those bytes to caught-up clients
// directly (see hub.Framing).
const (
	framingSSE = iota // the SSE frame (appendSSE)
	framingWS         // the WebSocket text frame (appendWSText)
)

var hubFramings = []hub.Framing{framingSSE: appendSSE, framingWS: appendWSText}

// openStream checks that tenant owns the run and subscribes to its events
// from cursor. A run of another tenant is NotFound, like a run that does
// not exist.
func (s *Server) openStream(ctx context.Context, tenant, runID, cursor, transport string) (*hub.Subscription, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if s.hub == nil {
		return nil, status.Error(codes.Unavailable, "event streaming needs NATS JetStream, which this gateway is not connected to")
	}
	ended := false
	// A feed that has received events on the tenant's own subject proves
	// the run is the tenant's; otherwise ask the orchestrator.
	if !s.hub.Watching(tenant, runID) {
		resp, err := s.getRun(ctx, tenant, &baagentv1.GetRunRequest{RunId: runID})
		if err != nil {
			return nil, err
		}
		switch resp.GetRun().GetState() {
		case baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_CANCELLED:
			ended = true
		}
	}
	sub, err := s.hub.Subscribe(ctx, hub.Request{Tenant: tenant, RunID: runID, Cursor: cursor, Transport: transport, RunEnded: ended})
	switch {
	case err == nil:
		return sub, nil
	case errors.Is(err, hub.ErrTooManyFeeds):
		return nil, status.Error(codes.ResourceExhausted, err.Error())
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, status.Errorf(codes.Unavailable, "subscribe to run %s: %v", runID, err)
}

// errUnavailable reports a stream that failed before it started.
func errUnavailable(err error) error {
	if errors.Is(err, hub.ErrClosed) {
		return status.Error(codes.Unavailable, "the gateway is shutting down; retry")
	}
	return status.Errorf(codes.Unavailable, "event stream failed: %v", err)
}
