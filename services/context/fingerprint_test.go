package contextsvc

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// reasonOf is the ErrorInfo reason of a status error, if any.
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(interface{ GetReason() string }); ok {
			return r.GetReason()
		}
	}
	return ""
}

// Tools sent once under a fingerprint are counted the same later without
// being sent; an unknown fingerprint (or another tenant's) asks for them.
func TestToolsFingerprintSendsSchemasOnce(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	withTools := buildReqFor("gpt-4o", strategyAuto)
	withTools.ToolsFingerprint = "tools-v1"
	first, err := e.client.BuildWindow(t.Context(), withTools)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetBreakdown().GetToolSchemaTokens() <= 0 {
		t.Fatalf("tool schema tokens %d, want the schemas counted", first.GetBreakdown().GetToolSchemaTokens())
	}

	without := proto.Clone(withTools).(*baagentv1.BuildWindowRequest)
	without.Tools = nil
	again, err := e.client.BuildWindow(t.Context(), without)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(again.GetBreakdown(), first.GetBreakdown()) || again.GetContextUsage() != first.GetContextUsage() {
		t.Fatalf("window by fingerprint %v, want %v as with the tools", again.GetBreakdown(), first.GetBreakdown())
	}

	for name, req := range map[string]*baagentv1.BuildWindowRequest{
		"unknown fingerprint": func() *baagentv1.BuildWindowRequest {
			r := proto.Clone(without).(*baagentv1.BuildWindowRequest)
			r.ToolsFingerprint = "tools-v2"
			return r
		}(),
		"another tenant's fingerprint": func() *baagentv1.BuildWindowRequest {
			r := proto.Clone(without).(*baagentv1.BuildWindowRequest)
			r.Tenant = "other"
			return r
		}(),
		"another model": func() *baagentv1.BuildWindowRequest {
			r := proto.Clone(without).(*baagentv1.BuildWindowRequest)
			r.Model = "gpt-4o-mini"
			return r
		}(),
	} {
		_, err := e.client.BuildWindow(t.Context(), req)
		if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != ReasonToolsFingerprintUnknown {
			t.Errorf("%s: %v (reason %q), want FailedPrecondition %s", name, err, reasonOf(err), ReasonToolsFingerprintUnknown)
		}
	}
}

func TestToolsFingerprintValidated(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	for _, fp := range []string{strings.Repeat("x", maxFingerprintLen+1), "tab\there", "é"} {
		req := buildReqFor("gpt-4o", strategyAuto)
		req.ToolsFingerprint = fp
		_, err := e.client.BuildWindow(t.Context(), req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "tools_fingerprint") {
			t.Errorf("fingerprint %q: %v, want InvalidArgument naming tools_fingerprint", fp, err)
		}
	}
}
