package gateway

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// peerError turns a peer's error into the caller's: the peer's own status
// (NotFound, InvalidArgument, FailedPrecondition…) passes through, while
// Unimplemented and transport failures get a message naming the peer so a
// client can tell a gateway problem from its own.
func peerError(ctx context.Context, peer, rpc string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.Canceled) {
		return status.FromContextError(ctx.Err()).Err()
	}
	st, ok := status.FromError(err)
	if !ok {
		return status.Errorf(codes.Unavailable, "%s %s failed: %v", peer, rpc, err)
	}
	switch st.Code() {
	case codes.Unimplemented:
		// The peer's own words say why (an older version, or a feature
		// that is switched off there, such as the skill store).
		return status.Errorf(codes.Unimplemented, "the %s service does not implement %s (peer answered Unimplemented: %s)", peer, rpc, st.Message())
	case codes.Unavailable:
		return status.Errorf(codes.Unavailable, "the %s service is unavailable: %s", peer, st.Message())
	case codes.Unknown, codes.Internal, codes.DataLoss:
		return status.Errorf(st.Code(), "%s %s: %s", peer, rpc, st.Message())
	case codes.ResourceExhausted:
		if isMessageTooLarge(st) {
			// Not the caller's fault and nothing a retry fixes: not a 429.
			return peerMessageTooLarge(peer, rpc, st.Message())
		}
	}
	return st.Err()
}

// reasonPeerMessageLarge marks an Internal status that HTTP answers 502:
// a peer's answer (or the gateway's request to it) exceeded the gRPC
// message limit.
const reasonPeerMessageLarge = "PEER_MESSAGE_TOO_LARGE"

// isMessageTooLarge reports grpc-go's (and grpcinproc's) refusal of a
// message over the limit, which is ResourceExhausted like a rate limit:
// "grpc: received message larger than max (N vs. M)", "grpc: trying to
// send message larger than max …", "… after decompression larger than
// max …".
func isMessageTooLarge(st *status.Status) bool {
	return st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

func peerMessageTooLarge(peer, rpc, msg string) error {
	st := status.Newf(codes.Internal, "%s %s: a message between the gateway and the %s service exceeded the gRPC message limit (max-msg-bytes): %s", peer, rpc, peer, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonPeerMessageLarge, Domain: "baagent.dev"}); err == nil {
		st = d
	}
	return st.Err()
}

// missingPeer is the error of an RPC whose peer is not configured.
func missingPeer(peer string) error {
	return status.Errorf(codes.Unavailable, "the gateway has no %s connection configured", peer)
}
