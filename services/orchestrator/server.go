// Package orchestrator is the OrchestratorService: it queues runs and drives
// the ReAct loop (model → tools → observations) for a tenant.
//
// At this stage every RPC validates its request at the edge and then answers
// codes.Unimplemented; the loop arrives in later changes.
package orchestrator

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.OrchestratorService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.OrchestratorService"

// MaxPageSize is the largest ListRuns page (the contract's maximum).
const MaxPageSize = 500

// Options configures a [Server].
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
}

// Server implements baagentv1.OrchestratorServiceServer.
type Server struct {
	baagentv1.UnimplementedOrchestratorServiceServer

	log *slog.Logger
}

var _ baagentv1.OrchestratorServiceServer = (*Server)(nil)

// New returns a Server configured by opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{log: opts.Logger.With("service", ServiceName)}
}

// Register registers the OrchestratorService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterOrchestratorServiceServer(gs, s)
}

// StartRun accepts a run and queues it.
func (s *Server) StartRun(ctx context.Context, req *baagentv1.OrchestratorServiceStartRunRequest) (*baagentv1.OrchestratorServiceStartRunResponse, error) {
	if err := validateStartRun(req); err != nil {
		return nil, s.rejected(ctx, "StartRun", err)
	}
	return nil, notImplemented("StartRun")
}

// GetRun returns a run.
func (s *Server) GetRun(ctx context.Context, req *baagentv1.OrchestratorServiceGetRunRequest) (*baagentv1.OrchestratorServiceGetRunResponse, error) {
	if err := validateGetRun(req); err != nil {
		return nil, s.rejected(ctx, "GetRun", err)
	}
	return nil, notImplemented("GetRun")
}

// ListRuns lists a tenant's runs, newest first.
func (s *Server) ListRuns(ctx context.Context, req *baagentv1.OrchestratorServiceListRunsRequest) (*baagentv1.OrchestratorServiceListRunsResponse, error) {
	if err := validateListRuns(req); err != nil {
		return nil, s.rejected(ctx, "ListRuns", err)
	}
	return nil, notImplemented("ListRuns")
}

// CancelRun cancels a run.
func (s *Server) CancelRun(ctx context.Context, req *baagentv1.OrchestratorServiceCancelRunRequest) (*baagentv1.OrchestratorServiceCancelRunResponse, error) {
	if err := validateCancelRun(req); err != nil {
		return nil, s.rejected(ctx, "CancelRun", err)
	}
	return nil, notImplemented("CancelRun")
}

// SubmitInput answers the question a WAITING_INPUT run waits on.
func (s *Server) SubmitInput(ctx context.Context, req *baagentv1.OrchestratorServiceSubmitInputRequest) (*baagentv1.OrchestratorServiceSubmitInputResponse, error) {
	if err := validateSubmitInput(req); err != nil {
		return nil, s.rejected(ctx, "SubmitInput", err)
	}
	return nil, notImplemented("SubmitInput")
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

func notImplemented(rpc string) error {
	return status.Errorf(codes.Unimplemented, "OrchestratorService.%s is not implemented yet", rpc)
}
