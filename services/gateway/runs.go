package gateway

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Run operations, forwarded to the orchestrator with the caller's tenant.
// The orchestrator keys runs by tenant, so another tenant's run id is
// NotFound, never PermissionDenied: run ids do not leak.

const orchestratorPeer = "orchestrator"

// StartRun starts a run.
func (s *Server) StartRun(ctx context.Context, req *baagentv1.StartRunRequest) (*baagentv1.StartRunResponse, error) {
	if err := validateStartRun(req); err != nil {
		return nil, s.rejected(ctx, "StartRun", err)
	}
	tenant, err := s.grpcTenant(ctx)
	if err != nil {
		return nil, err
	}
	return s.startRun(ctx, tenant, req)
}

func (s *Server) startRun(ctx context.Context, tenant string, req *baagentv1.StartRunRequest) (*baagentv1.StartRunResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: tenant, Spec: req.GetSpec()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "StartRun", err)
	}
	return &baagentv1.StartRunResponse{Run: resp.GetRun()}, nil
}

// GetRun reads a run.
func (s *Server) GetRun(ctx context.Context, req *baagentv1.GetRunRequest) (*baagentv1.GetRunResponse, error) {
	if err := validateGetRun(req); err != nil {
		return nil, s.rejected(ctx, "GetRun", err)
	}
	tenant, err := s.grpcTenant(ctx)
	if err != nil {
		return nil, err
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
	if err := validateListRuns(req); err != nil {
		return nil, s.rejected(ctx, "ListRuns", err)
	}
	tenant, err := s.grpcTenant(ctx)
	if err != nil {
		return nil, err
	}
	return s.listRuns(ctx, tenant, req)
}

func (s *Server) listRuns(ctx context.Context, tenant string, req *baagentv1.ListRunsRequest) (*baagentv1.ListRunsResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{
		Tenant:         tenant,
		ConversationId: req.GetConversationId(),
		States:         req.GetStates(),
		PageSize:       req.GetPageSize(),
		PageToken:      req.GetPageToken(),
	})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "ListRuns", err)
	}
	return &baagentv1.ListRunsResponse{Runs: resp.GetRuns(), NextPageToken: resp.GetNextPageToken()}, nil
}

// CancelRun cancels a run.
func (s *Server) CancelRun(ctx context.Context, req *baagentv1.CancelRunRequest) (*baagentv1.CancelRunResponse, error) {
	if err := validateCancelRun(req); err != nil {
		return nil, s.rejected(ctx, "CancelRun", err)
	}
	tenant, err := s.grpcTenant(ctx)
	if err != nil {
		return nil, err
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
	if err := validateSubmitInput(req); err != nil {
		return nil, s.rejected(ctx, "SubmitInput", err)
	}
	tenant, err := s.grpcTenant(ctx)
	if err != nil {
		return nil, err
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
