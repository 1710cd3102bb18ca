package orchestrator

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Cross-replica control. CancelRun may reach any replica; the run may be
// executing on another. Every replica subscribes to controlCancelSubject
// (plain NATS, not a stream: a cancellation is only meaningful to the
// replica executing the run now); the one executing the run cancels it and
// replies, the others stay silent. No reply means no replica executes it.
const controlCancelSubject = "baagent.control.orchestrator.cancel"

// controlReplyWait bounds waiting for the executing replica's reply.
const controlReplyWait = 500 * time.Millisecond

// listenControl subscribes to cancellations; the returned function stops.
func (s *Server) listenControl() (func(), error) {
	nc := s.opts.JetStream.Conn()
	if nc == nil {
		return nil, errors.New("no NATS connection")
	}
	sub, err := nc.Subscribe(controlCancelSubject, func(m *nats.Msg) {
		req := &baagentv1.OrchestratorServiceCancelRunRequest{}
		if proto.Unmarshal(m.Data, req) != nil || validateCancelRun(req) != nil {
			return
		}
		r := s.local(req.GetRunId())
		if r == nil || r.rec.GetTenant() != req.GetTenant() {
			return
		}
		r.cancel(&cancelCause{reason: cancelReason(req)})
		_ = m.Respond([]byte("cancelling"))
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// cancelRemote asks the replica executing the run to cancel it and
// reports whether one did.
func (s *Server) cancelRemote(ctx context.Context, req *baagentv1.OrchestratorServiceCancelRunRequest) bool {
	nc := s.opts.JetStream.Conn()
	if nc == nil {
		return false
	}
	data, err := proto.Marshal(req)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, controlReplyWait)
	defer cancel()
	_, err = nc.RequestWithContext(ctx, controlCancelSubject, data)
	return err == nil
}

func cancelReason(req *baagentv1.OrchestratorServiceCancelRunRequest) string {
	if r := req.GetReason(); r != "" {
		return r
	}
	return "cancelled by the client"
}
