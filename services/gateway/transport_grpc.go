package gateway

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// StreamRunEvents streams a run's events: replay after a cursor, then live,
// ending after the terminal event.
func (s *Server) StreamRunEvents(req *baagentv1.StreamRunEventsRequest, stream grpc.ServerStreamingServer[baagentv1.StreamRunEventsResponse]) error {
	ctx := context.Background()
	if stream != nil {
		ctx = stream.Context()
	}
	c, err := s.grpcCaller(ctx)
	if err != nil {
		return err
	}
	if err := validateStreamRunEvents(req); err != nil {
		return s.rejected(ctx, "StreamRunEvents", err)
	}
	done, err := s.hold(c, s.streamSlots, apiGRPC)
	if err != nil {
		return err
	}
	defer done()
	sub, err := s.openStream(ctx, c.tenant, req.GetRunId(), req.GetAfter(), hub.TransportGRPC)
	if err != nil {
		return err
	}
	defer sub.Close()
	return s.pumpGRPC(ctx, sub, func(e *baagentv1.Event) error {
		return stream.Send(&baagentv1.StreamRunEventsResponse{Event: e})
	}, req.GetAfter())
}

// StartRunStream starts a run and streams it from its first event: the run,
// then every event from `earliest` on. The stream slot is taken before the
// run starts, so a caller at its limit starts nothing; once the run has
// started it is sent first, so a stream that fails after that still tells
// the caller which run to resume (StreamRunEvents with after=`earliest`).
func (s *Server) StartRunStream(req *baagentv1.StartRunStreamRequest, stream grpc.ServerStreamingServer[baagentv1.StartRunStreamResponse]) error {
	ctx := stream.Context()
	c, err := s.grpcCaller(ctx)
	if err != nil {
		return err
	}
	if err := validateStartRunStream(req); err != nil {
		return s.rejected(ctx, "StartRunStream", err)
	}
	done, err := s.hold(c, s.streamSlots, apiGRPC)
	if err != nil {
		return err
	}
	defer done()
	if err := s.ready(); err != nil {
		return err
	}
	if s.hub == nil {
		return status.Error(codes.Unavailable, "event streaming needs NATS JetStream, which this gateway is not connected to")
	}
	resp, err := s.startRun(withKeyID(ctx, c), c.tenant, &baagentv1.StartRunRequest{Spec: req.GetSpec()})
	if err != nil {
		return err
	}
	run := resp.GetRun()
	if err := stream.Send(&baagentv1.StartRunStreamResponse{Payload: &baagentv1.StartRunStreamResponse_Run{Run: run}}); err != nil {
		return err
	}
	sub, err := s.openStream(ctx, c.tenant, run.GetRunId(), hub.Earliest, hub.TransportGRPC)
	if err != nil {
		return status.Errorf(status.Code(err), "run %s started, but its event stream failed: %s; resume with StreamRunEvents after=earliest",
			run.GetRunId(), status.Convert(err).Message())
	}
	defer sub.Close()
	return s.pumpGRPC(ctx, sub, func(e *baagentv1.Event) error {
		return stream.Send(&baagentv1.StartRunStreamResponse{Payload: &baagentv1.StartRunStreamResponse_Event{Event: e}})
	}, hub.Earliest)
}

// pumpGRPC writes the subscription to the stream with send. Sends happen on a helper
// goroutine so a client that does not take an event within WriteTimeout
// can be cut: returning ends the RPC, which unblocks the pending send.
func (s *Server) pumpGRPC(ctx context.Context, sub *hub.Subscription, send func(*baagentv1.Event) error, cursor string) error {
	sends := make(chan *baagentv1.Event)
	sent := make(chan error, 1)
	go func() {
		for m := range sends {
			err := send(m)
			sent <- err
			if err != nil {
				return
			}
		}
	}()
	defer close(sends)
	timer := time.NewTimer(s.opts.WriteTimeout)
	defer timer.Stop()
	for {
		it, err := sub.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case hub.IsSlowConsumer(err):
			return slowConsumerStatus(cursor)
		case errors.Is(err, hub.ErrClosed):
			return status.Error(codes.Unavailable, "the gateway is shutting down; resume from the last cursor received")
		case err != nil:
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return status.Errorf(codes.Unavailable, "event stream failed: %v; resume from the last cursor received", err)
		}
		sends <- it.Event
		timer.Reset(s.opts.WriteTimeout)
		select {
		case err := <-sent:
			if err != nil {
				return err
			}
		case <-timer.C:
			sub.WriteTimedOut()
			return slowConsumerStatus(cursor)
		}
		sub.Delivered(it)
		if it.Cursor != "" {
			cursor = it.Cursor
		}
	}
}

// slowConsumerStatus tells a gRPC client it was cut for falling behind,
// when to retry and from which cursor.
func slowConsumerStatus(cursor string) error {
	st := status.New(codes.ResourceExhausted, "slow_consumer: the client fell too far behind; resume with after="+quoteCursor(cursor))
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: "SLOW_CONSUMER", Domain: "baagent.dev", Metadata: map[string]string{"cursor": cursor}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(hub.RetryAfter)},
	); err == nil {
		st = d
	}
	return st.Err()
}

func quoteCursor(c string) string {
	if c == "" {
		return `"" (live)`
	}
	return c
}
