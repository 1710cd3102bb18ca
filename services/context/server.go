// Package contextsvc is the ContextService: conversation history
// (append-only, durable) and the context window for a model call, compressed
// at query time within a token budget without rewriting history.
//
// At this stage every RPC validates its request at the edge and then answers
// codes.Unimplemented; history storage and window building arrive with the
// context-service issue.
package contextsvc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.ContextService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.ContextService"

// Defaults of [Options].
const (
	// DefaultMaxMessages bounds AppendRequest.messages and
	// BuildWindowRequest.system_messages.
	DefaultMaxMessages = 1000
	// DefaultMaxMessageBytes bounds each text field of a message (4 MiB).
	DefaultMaxMessageBytes = 4 << 20
)

// Options configures a [Server]. Zero values take the defaults.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// MaxMessages bounds AppendRequest.messages and
	// BuildWindowRequest.system_messages (default 1000).
	MaxMessages int
	// MaxMessageBytes bounds each text field (content, reasoning_content,
	// tool call arguments) of each message of AppendRequest.messages and
	// BuildWindowRequest.system_messages (default 4 MiB).
	MaxMessageBytes int
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return o
}

// Server implements baagentv1.ContextServiceServer.
type Server struct {
	baagentv1.UnimplementedContextServiceServer

	opts Options
	log  *slog.Logger
}

var _ baagentv1.ContextServiceServer = (*Server)(nil)

// New returns a Server configured by opts.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	return &Server{opts: opts, log: opts.Logger.With("service", ServiceName)}
}

// Register registers the ContextService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterContextServiceServer(gs, s)
}

// Append appends messages to a conversation, idempotently by message id.
func (s *Server) Append(ctx context.Context, req *baagentv1.AppendRequest) (*baagentv1.AppendResponse, error) {
	if err := s.validateAppend(req); err != nil {
		return nil, s.rejected(ctx, "Append", err)
	}
	return nil, notImplemented("Append")
}

// GetHistory reads a page of a conversation's history, oldest first.
func (s *Server) GetHistory(ctx context.Context, req *baagentv1.GetHistoryRequest) (*baagentv1.GetHistoryResponse, error) {
	if err := validateGetHistory(req); err != nil {
		return nil, s.rejected(ctx, "GetHistory", err)
	}
	return nil, notImplemented("GetHistory")
}

// DeleteConversation deletes a conversation's history.
func (s *Server) DeleteConversation(ctx context.Context, req *baagentv1.DeleteConversationRequest) (*baagentv1.DeleteConversationResponse, error) {
	if err := validateDeleteConversation(req); err != nil {
		return nil, s.rejected(ctx, "DeleteConversation", err)
	}
	return nil, notImplemented("DeleteConversation")
}

// BuildWindow builds the messages of the next model call within the token
// budget.
func (s *Server) BuildWindow(ctx context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	if err := s.validateBuildWindow(req); err != nil {
		return nil, s.rejected(ctx, "BuildWindow", err)
	}
	return nil, notImplemented("BuildWindow")
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

func notImplemented(rpc string) error {
	return status.Errorf(codes.Unimplemented, "ContextService.%s is not implemented yet", rpc)
}
