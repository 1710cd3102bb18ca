package contextsvc

import (
	"context"
	"crypto/sha256"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ReasonToolsFingerprintUnknown is the ErrorInfo reason of a BuildWindow
// that names a tools fingerprint this replica does not know and sends no
// tools: the caller sends the request again with them.
const ReasonToolsFingerprintUnknown = "TOOLS_FINGERPRINT_UNKNOWN"

// maxFingerprints bounds the remembered tools fingerprints: a caller has
// one per tool set it uses, so a few per tenant.
const maxFingerprints = 1024

// toolsCount is the request's tool schemas counted: from the schemas when
// they are sent (and then remembered under the request's fingerprint, if
// any), else from what was remembered for the fingerprint. Fingerprints are
// kept per tenant, so one tenant's fingerprint never stands for another's
// schemas.
func (s *Server) toolsCount(ctx context.Context, req *baagentv1.BuildWindowRequest, mi *baagentv1.ModelInfo) (toolsCount, error) {
	fp := req.GetToolsFingerprint()
	if fp == "" || len(req.GetTools()) > 0 {
		tc, err := s.counter.fixedCount(ctx, req.GetModel(), mi, req.GetTools())
		if err != nil {
			return tc, status.Errorf(codes.Unavailable, "count tokens: %v", err)
		}
		if fp != "" {
			s.counter.fingerprints.Put(fingerprintKey(req, mi), tc, 0, modelInfoTTL)
		}
		return tc, nil
	}
	if tc, ok := s.counter.fingerprints.Get(fingerprintKey(req, mi)); ok {
		return tc, nil
	}
	st := status.Newf(codes.FailedPrecondition,
		"tools_fingerprint %q is not known to this context replica (first use, a restart or another replica): send the request again with tools", fp)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonToolsFingerprintUnknown, Domain: "baagent.context"}); err == nil {
		st = d
	}
	return toolsCount{}, st.Err()
}

func fingerprintKey(req *baagentv1.BuildWindowRequest, mi *baagentv1.ModelInfo) countKey {
	h := sha256.New()
	for _, part := range []string{req.GetTenant(), req.GetModel(), req.GetToolsFingerprint()} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	key := countKey{encoding: mi.GetEncodingName()}
	h.Sum(key.hash[:0])
	return key
}
