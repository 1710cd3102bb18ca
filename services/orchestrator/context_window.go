package orchestrator

import (
	"context"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// buildWindow asks the context service for the window of req with the
// toolset's schemas: in full the first time a fingerprint is used, then by
// fingerprint alone (validating, hashing and counting the same schemas at
// every step cost more than the rest of the call), and in full again when
// the service does not know the fingerprint (a restart, another replica).
func (r *run) buildWindow(ctx context.Context, req *baagentv1.BuildWindowRequest, ts *toolset) (*baagentv1.BuildWindowResponse, error) {
	req.ToolsFingerprint = ts.fingerprint
	if ts.fingerprint == "" || r.toolsSent != ts.fingerprint {
		req.Tools = ts.schemas
		resp, err := r.s.opts.Context.BuildWindow(ctx, req)
		if err == nil && ts.fingerprint != "" {
			r.toolsSent = ts.fingerprint
		}
		return resp, err
	}
	resp, err := r.s.opts.Context.BuildWindow(ctx, req)
	if !toolsFingerprintUnknown(err) {
		return resp, err
	}
	r.toolsSent = ""
	return r.buildWindow(ctx, req, ts)
}

// reasonToolsFingerprintUnknown is the ErrorInfo reason the context
// service gives for a tools fingerprint it does not know (context.proto).
const reasonToolsFingerprintUnknown = "TOOLS_FINGERPRINT_UNKNOWN"

// toolsFingerprintUnknown reports the context service's answer to a
// fingerprint it does not know.
func toolsFingerprintUnknown(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonToolsFingerprintUnknown {
			return true
		}
	}
	return false
}
