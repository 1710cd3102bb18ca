package gateway

import (
	"cmp"
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Run operations, forwarded to the orchestrator with the caller's tenant.
// The orchestrator keys runs by tenant, so another tenant's run id is
// NotFound, never PermissionDenied: run ids do not leak.

const orchestratorPeer = "orchestrator"

// StartRun starts a run.
func (s *Server) StartRun(ctx context.Context, req *baagentv1.StartRunRequest) (*baagentv1.StartRunResponse, error) {
	c, done, err := s.grpcUnaryCaller(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateStartRun(req); err != nil {
		return nil, s.rejected(ctx, "StartRun", err)
	}
	return s.startRun(withKeyID(ctx, c), c.tenant, req)
}

func (s *Server) startRun(ctx context.Context, tenant string, req *baagentv1.StartRunRequest) (*baagentv1.StartRunResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: tenant, Spec: req.GetSpec(), ApiKeyId: keyIDFrom(ctx)})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "StartRun", err)
	}
	return &baagentv1.StartRunResponse{Run: resp.GetRun()}, nil
}

// GetRun reads a run.
func (s *Server) GetRun(ctx context.Context, req *baagentv1.GetRunRequest) (*baagentv1.GetRunResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateGetRun(req); err != nil {
		return nil, s.rejected(ctx, "GetRun", err)
	}
	return s.getRun(ctx, tenant, req)
}

func (s *Server) getRun(ctx context.Context, tenant string, req *baagentv1.GetRunRequest) (*baagentv1.GetRunResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: tenant, RunId: req.GetRunId()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "GetRun", err)
	}
	return &baagentv1.GetRunResponse{Run: resp.GetRun()}, nil
}

// ListRuns lists the caller's runs.
func (s *Server) ListRuns(ctx context.Context, req *baagentv1.ListRunsRequest) (*baagentv1.ListRunsResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateListRuns(req); err != nil {
		return nil, s.rejected(ctx, "ListRuns", err)
	}
	return s.listRuns(ctx, tenant, req)
}

// maxListAttempts bounds the orchestrator calls of one ListRuns; each
// asks for fewer runs than the one before.
const maxListAttempts = 8

// listRuns forwards a page request. Runs can be large (their input is up
// to megabytes), so a page may not fit in one gRPC message: when the
// orchestrator's answer is refused as too large, the request is repeated
// for half as many runs; when the answer would not fit in the gateway's
// own message limit, for as many runs as fit. Either way the
// orchestrator's next_page_token then follows the last run returned, so
// paging stays exact with its tokens opaque to the gateway.
func (s *Server) listRuns(ctx context.Context, tenant string, req *baagentv1.ListRunsRequest) (*baagentv1.ListRunsResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	size := req.GetPageSize()
	for attempt := 1; ; attempt++ {
		resp, err := s.opts.Orchestrator.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{
			Tenant:         tenant,
			ConversationId: req.GetConversationId(),
			States:         req.GetStates(),
			PageSize:       size,
			PageToken:      req.GetPageToken(),
		})
		if err != nil {
			if st, ok := status.FromError(err); ok && isMessageTooLarge(st) && size != 1 && attempt < maxListAttempts && ctx.Err() == nil {
				size = max(1, cmp.Or(size, DefaultPageSize)/2)
				continue
			}
			return nil, peerError(ctx, orchestratorPeer, "ListRuns", err)
		}
		out := &baagentv1.ListRunsResponse{Runs: resp.GetRuns(), NextPageToken: resp.GetNextPageToken()}
		if proto.Size(out) <= s.opts.MaxMsgBytes {
			return out, nil
		}
		fit := min(s.runsThatFit(out.GetRuns()), len(out.GetRuns())-1)
		switch {
		case fit < 1:
			return nil, status.Errorf(codes.Internal,
				"ListRuns: run %s alone is too large for the gRPC message limit (%d bytes, max-msg-bytes); read it with GET /v1/runs/{run_id}",
				out.GetRuns()[0].GetRunId(), s.opts.MaxMsgBytes)
		case attempt >= maxListAttempts:
			return nil, status.Errorf(codes.Internal,
				"ListRuns: no page fitting the gRPC message limit (%d bytes, max-msg-bytes) after %d attempts; ask for a smaller page_size",
				s.opts.MaxMsgBytes, attempt)
		}
		size = int32(fit)
	}
}

// runsThatFit is how many of the first runs fit in one ListRunsResponse
// within the message limit, with room for the longest page token.
func (s *Server) runsThatFit(runs []*baagentv1.Run) int {
	budget := s.opts.MaxMsgBytes - (protowire.SizeTag(2) + protowire.SizeBytes(validate.MaxPageTokenLen))
	used := 0
	for i, r := range runs {
		used += protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(r))
		if used > budget {
			return i
		}
	}
	return len(runs)
}

// CancelRun cancels a run.
func (s *Server) CancelRun(ctx context.Context, req *baagentv1.CancelRunRequest) (*baagentv1.CancelRunResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateCancelRun(req); err != nil {
		return nil, s.rejected(ctx, "CancelRun", err)
	}
	return s.cancelRun(ctx, tenant, req)
}

func (s *Server) cancelRun(ctx context.Context, tenant string, req *baagentv1.CancelRunRequest) (*baagentv1.CancelRunResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: tenant, RunId: req.GetRunId(), Reason: req.GetReason()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "CancelRun", err)
	}
	return &baagentv1.CancelRunResponse{Run: resp.GetRun()}, nil
}

// SubmitInput answers a waiting run.
func (s *Server) SubmitInput(ctx context.Context, req *baagentv1.SubmitInputRequest) (*baagentv1.SubmitInputResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateSubmitInput(req); err != nil {
		return nil, s.rejected(ctx, "SubmitInput", err)
	}
	return s.submitInput(ctx, tenant, req)
}

func (s *Server) submitInput(ctx context.Context, tenant string, req *baagentv1.SubmitInputRequest) (*baagentv1.SubmitInputResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.SubmitInput(ctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: tenant, RunId: req.GetRunId(), Input: req.GetInput()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "SubmitInput", err)
	}
	return &baagentv1.SubmitInputResponse{Run: resp.GetRun()}, nil
}

func (s *Server) orchestratorReady() error {
	if err := s.ready(); err != nil {
		return err
	}
	if s.opts.Orchestrator == nil {
		return missingPeer(orchestratorPeer)
	}
	return nil
}
