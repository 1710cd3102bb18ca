package gateway

import (
	"context"
	"errors"

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
		return status.Errorf(codes.Unimplemented, "the %s service does not implement %s yet (peer answered Unimplemented)", peer, rpc)
	case codes.Unavailable:
		return status.Errorf(codes.Unavailable, "the %s service is unavailable: %s", peer, st.Message())
	case codes.Unknown, codes.Internal, codes.DataLoss:
		return status.Errorf(st.Code(), "%s %s: %s", peer, rpc, st.Message())
	}
	return st.Err()
}

// missingPeer is the error of an RPC whose peer is not configured.
func missingPeer(peer string) error {
	return status.Errorf(codes.Unavailable, "the gateway has no %s connection configured", peer)
}
