// Package toolrunner is the ToolRunnerService: it executes tool calls with
// output levels, retries, timeouts, idempotency, artifacts and truncation.
//
// At this stage every RPC validates its request at the edge and then answers
// codes.Unimplemented; execution arrives in later changes.
package toolrunner

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.ToolRunnerService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.ToolRunnerService"

// Options configures a [Server].
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
}

// Server implements baagentv1.ToolRunnerServiceServer.
type Server struct {
	baagentv1.UnimplementedToolRunnerServiceServer

	log *slog.Logger
}

var _ baagentv1.ToolRunnerServiceServer = (*Server)(nil)

// New returns a Server configured by opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{log: opts.Logger.With("service", ServiceName)}
}

// Register registers the ToolRunnerService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterToolRunnerServiceServer(gs, s)
}

// Invoke executes one tool call. Tool failures will be results, not RPC
// errors; an RPC error means a bad request.
func (s *Server) Invoke(ctx context.Context, req *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) {
	if err := validateInvoke(req); err != nil {
		return nil, s.rejected(ctx, "Invoke", err)
	}
	return nil, notImplemented("Invoke")
}

// ListTools lists the tools a caller may use.
func (s *Server) ListTools(ctx context.Context, req *baagentv1.ListToolsRequest) (*baagentv1.ListToolsResponse, error) {
	if err := validateListTools(req); err != nil {
		return nil, s.rejected(ctx, "ListTools", err)
	}
	return nil, notImplemented("ListTools")
}

// ReadArtifact reads a page of an artifact's lines.
func (s *Server) ReadArtifact(ctx context.Context, req *baagentv1.ReadArtifactRequest) (*baagentv1.ReadArtifactResponse, error) {
	if err := validateReadArtifact(req); err != nil {
		return nil, s.rejected(ctx, "ReadArtifact", err)
	}
	return nil, notImplemented("ReadArtifact")
}

// ReleaseConversation releases a conversation's artifacts and workspace.
func (s *Server) ReleaseConversation(ctx context.Context, req *baagentv1.ReleaseConversationRequest) (*baagentv1.ReleaseConversationResponse, error) {
	if err := validateReleaseConversation(req); err != nil {
		return nil, s.rejected(ctx, "ReleaseConversation", err)
	}
	return nil, notImplemented("ReleaseConversation")
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

func notImplemented(rpc string) error {
	return status.Errorf(codes.Unimplemented, "ToolRunnerService.%s is not implemented yet", rpc)
}
