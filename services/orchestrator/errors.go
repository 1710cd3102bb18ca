package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Machine-readable codes of a failed run (RunError.code, ErrorPayload.code).
const (
	CodePeerUnimplemented     = "PEER_UNIMPLEMENTED"
	CodePeerUnavailable       = "PEER_UNAVAILABLE"
	CodePeerError             = "PEER_ERROR"
	CodeModelUnavailable      = "MODEL_UNAVAILABLE"
	CodeModelProtocol         = "MODEL_PROTOCOL_ERROR"
	CodeMaxSteps              = "MAX_STEPS"
	CodeEventsUnavailable     = "EVENTS_UNAVAILABLE"
	CodeShutdown              = "ORCHESTRATOR_SHUTDOWN"
	CodeCheckpointUnavailable = "CHECKPOINT_UNAVAILABLE"
	CodeQueueUnavailable      = "QUEUE_UNAVAILABLE"
	CodeInternal              = "INTERNAL"
)

// runError ends a run with a code and a message a user can act on.
type runError struct {
	code    string
	message string
	cause   error
}

func (e *runError) Error() string { return e.code + ": " + e.message }
func (e *runError) Unwrap() error { return e.cause }

func newRunError(code string, cause error, format string, args ...any) *runError {
	return &runError{code: code, message: fmt.Sprintf(format, args...), cause: cause}
}

// peerError turns a failed call to a peer service into a runError that names
// the service and RPC, so that a peer that is not implemented yet or is down
// gives a clear run `error` event rather than a crash or a vague failure.
// Cancellation of the run itself is passed through unchanged.
func peerError(ctx context.Context, service, rpc string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Unimplemented:
		return newRunError(CodePeerUnimplemented, err,
			"the %s service does not implement %s yet: %s", service, rpc, st.Message())
	case codes.Unavailable:
		return newRunError(CodePeerUnavailable, err,
			"the %s service is unavailable (%s): %s; check that it is running and reachable", service, rpc, st.Message())
	case codes.DeadlineExceeded:
		return newRunError(CodePeerUnavailable, err, "the %s service did not answer %s in time: %s", service, rpc, st.Message())
	}
	return newRunError(CodePeerError, err, "%s.%s failed with %s: %s", service, rpc, st.Code(), st.Message())
}

// asRunError returns err as a runError, wrapping anything else as INTERNAL.
func asRunError(err error) *runError {
	var re *runError
	if errors.As(err, &re) {
		return re
	}
	return newRunError(CodeInternal, err, "%v", err)
}
