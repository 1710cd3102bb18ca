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
	return s.pumpGRPC(ctx, sub, stream, req.GetAfter())
}

// pumpGRPC writes the subscription to the stream. Sends happen on a helper
// goroutine so a client that does not take an event within WriteTimeout
// can be cut: returning ends the RPC, which unblocks the pending send.
func (s *Server) pumpGRPC(ctx context.Context, sub *hub.Subscription, stream grpc.ServerStreamingServer[baagentv1.StreamRunEventsResponse], cursor string) error {
	sends := make(chan *baagentv1.StreamRunEventsResponse)
	sent := make(chan error, 1)
	go func() {
		for m := range sends {
			err := stream.Send(m)
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
		sends <- &baagentv1.StreamRunEventsResponse{Event: it.Event}
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
