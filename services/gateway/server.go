// Package gateway is the GatewayService, the public edge: runs, their event
// streams, skills, tools and token counts for the caller's tenant. The tenant
// comes from the caller's API key, never from the request.
//
// At this stage every RPC validates its request at the edge and then answers
// codes.Unimplemented; the behaviour arrives in later changes.
package gateway

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.GatewayService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.GatewayService"

// MaxPageSize is the largest ListRuns page (the contract's maximum).
const MaxPageSize = 500

// DefaultMaxTextBytes bounds the text of CountTokens (16 MiB, as the tokens
// service).
const DefaultMaxTextBytes = 16 << 20

// Options configures a [Server]. Zero values take the defaults.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// MaxTextBytes bounds GatewayServiceCountTokensRequest.text (default 16 MiB).
	MaxTextBytes int
}

// Server implements baagentv1.GatewayServiceServer.
type Server struct {
	baagentv1.UnimplementedGatewayServiceServer

	opts Options
	log  *slog.Logger
}

var _ baagentv1.GatewayServiceServer = (*Server)(nil)

// New returns a Server configured by opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxTextBytes <= 0 {
		opts.MaxTextBytes = DefaultMaxTextBytes
	}
	return &Server{opts: opts, log: opts.Logger.With("service", ServiceName)}
}

// Register registers the GatewayService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterGatewayServiceServer(gs, s)
}

// StartRun starts a run.
func (s *Server) StartRun(ctx context.Context, req *baagentv1.StartRunRequest) (*baagentv1.StartRunResponse, error) {
	if err := validateStartRun(req); err != nil {
		return nil, s.rejected(ctx, "StartRun", err)
	}
	return nil, notImplemented("StartRun")
}

// GetRun reads a run.
func (s *Server) GetRun(ctx context.Context, req *baagentv1.GetRunRequest) (*baagentv1.GetRunResponse, error) {
	if err := validateGetRun(req); err != nil {
		return nil, s.rejected(ctx, "GetRun", err)
	}
	return nil, notImplemented("GetRun")
}

// ListRuns lists the caller's runs.
func (s *Server) ListRuns(ctx context.Context, req *baagentv1.ListRunsRequest) (*baagentv1.ListRunsResponse, error) {
	if err := validateListRuns(req); err != nil {
		return nil, s.rejected(ctx, "ListRuns", err)
	}
	return nil, notImplemented("ListRuns")
}

// CancelRun cancels a run.
func (s *Server) CancelRun(ctx context.Context, req *baagentv1.CancelRunRequest) (*baagentv1.CancelRunResponse, error) {
	if err := validateCancelRun(req); err != nil {
		return nil, s.rejected(ctx, "CancelRun", err)
	}
	return nil, notImplemented("CancelRun")
}

// SubmitInput answers a waiting run.
func (s *Server) SubmitInput(ctx context.Context, req *baagentv1.SubmitInputRequest) (*baagentv1.SubmitInputResponse, error) {
	if err := validateSubmitInput(req); err != nil {
		return nil, s.rejected(ctx, "SubmitInput", err)
	}
	return nil, notImplemented("SubmitInput")
}

// StreamRunEvents streams a run's events: replay after a cursor, then live.
func (s *Server) StreamRunEvents(req *baagentv1.StreamRunEventsRequest, stream grpc.ServerStreamingServer[baagentv1.StreamRunEventsResponse]) error {
	if err := validateStreamRunEvents(req); err != nil {
		ctx := context.Background()
		if stream != nil {
			ctx = stream.Context()
		}
		return s.rejected(ctx, "StreamRunEvents", err)
	}
	return notImplemented("StreamRunEvents")
}

// ListSkills lists the caller's skills.
func (s *Server) ListSkills(ctx context.Context, req *baagentv1.GatewayServiceListSkillsRequest) (*baagentv1.GatewayServiceListSkillsResponse, error) {
	if err := validateListSkills(req); err != nil {
		return nil, s.rejected(ctx, "ListSkills", err)
	}
	return nil, notImplemented("ListSkills")
}

// GetSkill reads one skill at a disclosure level.
func (s *Server) GetSkill(ctx context.Context, req *baagentv1.GatewayServiceGetSkillRequest) (*baagentv1.GatewayServiceGetSkillResponse, error) {
	if err := validateGetSkill(req); err != nil {
		return nil, s.rejected(ctx, "GetSkill", err)
	}
	return nil, notImplemented("GetSkill")
}

// ListTools lists the tools the caller may use.
func (s *Server) ListTools(context.Context, *baagentv1.GatewayServiceListToolsRequest) (*baagentv1.GatewayServiceListToolsResponse, error) {
	// GatewayServiceListToolsRequest has no fields to validate.
	return nil, notImplemented("ListTools")
}

// InvokeTool invokes a tool directly, outside a run.
func (s *Server) InvokeTool(ctx context.Context, req *baagentv1.InvokeToolRequest) (*baagentv1.InvokeToolResponse, error) {
	if err := validateInvokeTool(req); err != nil {
		return nil, s.rejected(ctx, "InvokeTool", err)
	}
	return nil, notImplemented("InvokeTool")
}

// CountTokens counts the tokens of a text for a model.
func (s *Server) CountTokens(ctx context.Context, req *baagentv1.GatewayServiceCountTokensRequest) (*baagentv1.GatewayServiceCountTokensResponse, error) {
	if err := s.validateCountTokens(req); err != nil {
		return nil, s.rejected(ctx, "CountTokens", err)
	}
	return nil, notImplemented("CountTokens")
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

func notImplemented(rpc string) error {
	return status.Errorf(codes.Unimplemented, "GatewayService.%s is not implemented yet", rpc)
}
