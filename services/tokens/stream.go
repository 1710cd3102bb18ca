package tokens

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/tokens/encoding"
)

// streamSegmentBytes is how much streamed text is gathered before it is
// counted on the pool: enough for several parts per core, little enough
// that memory stays a few megabytes per call.
const streamSegmentBytes = 1 << 20

// CountTokensStream counts a text sent as a stream of byte chunks. The
// first message names the model and whether special tokens are allowed;
// every message may carry text. The text is counted as it arrives, up to
// the last safe cut point, by the call's counting goroutines (see
// encoding.Stream), so memory stays bounded by a few segments plus the text
// since the last cut point, at most MaxTextBytes; a longer stretch without
// a cut point fails with ResourceExhausted. The count is always local: a provider counting API
// (use_exact_counting) needs the whole text at once, so the response's
// source is COUNT_SOURCE_LOCAL.
func (s *Server) CountTokensStream(stream grpc.ClientStreamingServer[baagentv1.CountTokensStreamRequest, baagentv1.CountTokensResponse]) error {
	ctx := stream.Context()
	start := time.Now()
	resp, result, err := s.countStream(ctx, stream)
	s.metrics.streams.WithLabelValues(result).Inc()
	if err != nil {
		if result == "invalid" {
			return s.rejected(ctx, "CountTokensStream", err)
		}
		s.log.DebugContext(ctx, "token count stream failed", "result", result, "error", err)
		return err
	}
	s.log.DebugContext(ctx, "token count stream", "encoding", resp.GetEncodingName(), "tokens", resp.GetRawCount(), "duration", time.Since(start))
	return stream.SendAndClose(resp)
}

// countStream reads and counts the stream; it returns the response, or the
// error and its result label for the metrics.
func (s *Server) countStream(ctx context.Context, stream grpc.ClientStreamingServer[baagentv1.CountTokensStreamRequest, baagentv1.CountTokensResponse]) (*baagentv1.CountTokensResponse, string, error) {
	msg, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		msg = &baagentv1.CountTokensStreamRequest{} // no message: no model
	} else if err != nil {
		return nil, recvResult(err), err
	}
	model, allow := msg.GetModel(), msg.GetAllowSpecialTokens()
	var e validate.Errors
	validate.Model(&e, "model", model)
	if err := e.Err(); err != nil {
		return nil, "invalid", err
	}
	res, enc, err := s.resolve(model)
	if err != nil {
		return nil, "error", err
	}
	counter, err := s.pool.NewStream(enc, allow, streamSegmentBytes, s.opts.MaxTextBytes)
	if err != nil {
		return nil, "error", status.Errorf(codes.Internal, "count: %v", err)
	}
	defer counter.Abort() // on the error paths: stop counting
	for {
		if m := msg.GetModel(); m != "" && m != model {
			e.Addf("model", "must be empty or %q, the first message's model, in every later message", model)
			return nil, "invalid", e.Err()
		}
		chunk := msg.GetText()
		if counter.Bytes()+int64(len(chunk)) > s.opts.MaxStreamBytes {
			e.Addf("text", "the stream's text must be at most %d bytes", s.opts.MaxStreamBytes)
			return nil, "invalid", e.Err()
		}
		s.metrics.streamBytes.Add(float64(len(chunk)))
		if err := counter.Write(ctx, chunk); err != nil {
			result, err := countResult(ctx, err)
			return nil, result, err
		}
		msg, err = stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, recvResult(err), err
		}
	}
	n, err := counter.Close(ctx)
	if err != nil {
		result, err := countResult(ctx, err)
		return nil, result, err
	}
	cfg := res.Config
	return &baagentv1.CountTokensResponse{
		Count:        applyMargin(int64(n), cfg.SafetyMargin),
		RawCount:     int64(n),
		EncodingName: cfg.Encoding,
		SafetyMargin: cfg.SafetyMargin,
		IsEstimate:   cfg.IsEstimate(),
		ModelFamily:  cfg.Family,
		Source:       baagentv1.CountSource_COUNT_SOURCE_LOCAL,
	}, "ok", nil
}

// countResult maps a counting error to its status and result label.
func countResult(ctx context.Context, err error) (string, error) {
	switch {
	case errors.Is(err, encoding.ErrNoCut):
		return "no_cut", status.Errorf(codes.ResourceExhausted,
			"text: %v: the text is counted in parts cut where no token can span (after a letter or number, before a space), and this stretch has none", err)
	case ctx.Err() != nil:
		return "cancelled", status.FromContextError(ctx.Err()).Err()
	}
	return "error", status.Errorf(codes.Internal, "count: %v", err)
}

// recvResult labels a receive error: the client went away or the deadline
// passed (cancelled), or something else broke (error).
func recvResult(err error) string {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return "cancelled"
	}
	return "error"
}
