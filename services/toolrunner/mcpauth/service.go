package mcpauth

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/oauth2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Limits of the callback parameters.
const (
	maxCodeBytes  = 4096
	maxErrorBytes = 1024
)

// Service serves McpAuthService over a Flow.
type Service struct {
	baagentv1.UnimplementedMcpAuthServiceServer
	// Flow runs the authorizations.
	Flow *Flow
	// Servers looks up an `mcp_servers:` entry with `auth: oauth` by name.
	Servers func(name string) (Server, bool)
}

func (s *Service) server(e *validate.Errors, tenant, name string) {
	validate.Tenant(e, "tenant", tenant)
	validate.Required(e, "server", name)
	validate.MaxBytes(e, "server", name, 64)
}

func (s *Service) lookup(name string) (Server, error) {
	srv, ok := s.Servers(name)
	if !ok {
		return Server{}, status.Errorf(codes.NotFound, "no MCP server %q with auth: oauth", name)
	}
	return srv, nil
}

// StartAuthorization implements McpAuthService.
func (s *Service) StartAuthorization(ctx context.Context, req *baagentv1.StartAuthorizationRequest) (*baagentv1.StartAuthorizationResponse, error) {
	var e validate.Errors
	s.server(&e, req.GetTenant(), req.GetServer())
	if err := e.Err(); err != nil {
		return nil, err
	}
	srv, err := s.lookup(req.GetServer())
	if err != nil {
		return nil, err
	}
	st, err := s.Flow.Start(ctx, req.GetTenant(), srv)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "start authorization of %s: %v", srv.Name, err)
	}
	return &baagentv1.StartAuthorizationResponse{AuthorizationUrl: st.AuthorizationURL, ExpiresAt: timestamppb.New(st.Expires)}, nil
}

// CompleteAuthorization implements McpAuthService.
func (s *Service) CompleteAuthorization(ctx context.Context, req *baagentv1.CompleteAuthorizationRequest) (*baagentv1.CompleteAuthorizationResponse, error) {
	var e validate.Errors
	validate.Required(&e, "state", req.GetState())
	if req.GetError() == "" {
		validate.Required(&e, "code", req.GetCode())
	}
	validate.MaxBytes(&e, "code", req.GetCode(), maxCodeBytes)
	validate.Text(&e, "error", req.GetError(), maxErrorBytes)
	if err := e.Err(); err != nil {
		return nil, err
	}
	if req.GetError() != "" {
		c, err := s.Flow.Abort(ctx, req.GetState())
		if err != nil {
			return nil, completeErr(err)
		}
		return nil, status.Errorf(codes.FailedPrecondition, "authorization of %s was refused by the authorization server: %s", c.Server, req.GetError())
	}
	c, err := s.Flow.Complete(ctx, req.GetState(), req.GetCode())
	if err != nil {
		return nil, completeErr(err)
	}
	return &baagentv1.CompleteAuthorizationResponse{Tenant: c.Tenant, Server: c.Server}, nil
}

func completeErr(err error) error {
	var re *oauth2.RetrieveError
	switch {
	case errors.Is(err, ErrBadState):
		return status.Error(codes.FailedPrecondition, "authorization state is invalid, used or expired: start the authorization again")
	case errors.As(err, &re):
		return status.Errorf(codes.FailedPrecondition, "the authorization server refused the code: %v", err)
	default:
		return status.Errorf(codes.Unavailable, "complete authorization: %v", err)
	}
}

// GetAuthorization implements McpAuthService.
func (s *Service) GetAuthorization(ctx context.Context, req *baagentv1.GetAuthorizationRequest) (*baagentv1.GetAuthorizationResponse, error) {
	var e validate.Errors
	s.server(&e, req.GetTenant(), req.GetServer())
	if err := e.Err(); err != nil {
		return nil, err
	}
	if _, err := s.lookup(req.GetServer()); err != nil {
		return nil, err
	}
	st, err := s.Flow.Status(ctx, req.GetTenant(), req.GetServer())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "authorization status: %v", err)
	}
	a := &baagentv1.McpAuthorization{Server: req.GetServer(), Authorized: st.Authorized, Refreshable: st.Refreshable, Scopes: st.Scopes}
	if !st.Expiry.IsZero() {
		a.ExpiresAt = timestamppb.New(st.Expiry)
	}
	if !st.UpdatedAt.IsZero() {
		a.UpdatedAt = timestamppb.New(st.UpdatedAt)
	}
	return &baagentv1.GetAuthorizationResponse{Authorization: a}, nil
}

// RevokeAuthorization implements McpAuthService.
func (s *Service) RevokeAuthorization(ctx context.Context, req *baagentv1.RevokeAuthorizationRequest) (*baagentv1.RevokeAuthorizationResponse, error) {
	var e validate.Errors
	s.server(&e, req.GetTenant(), req.GetServer())
	if err := e.Err(); err != nil {
		return nil, err
	}
	if _, err := s.lookup(req.GetServer()); err != nil {
		return nil, err
	}
	ok, err := s.Flow.Revoke(ctx, req.GetTenant(), req.GetServer())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "revoke: %v", err)
	}
	return &baagentv1.RevokeAuthorizationResponse{Revoked: ok}, nil
}

// NeedsAuthError is the error a tool call gets when the tenant has not
// authorized the server: it says how to.
func NeedsAuthError(server string) error {
	return fmt.Errorf("MCP server %q needs OAuth authorization for this tenant: run `baagentctl mcp authorize %s` (or POST /v1/mcp/servers/%s/authorize) and open the URL it prints", server, server, server)
}

// Register registers the service on gs.
func (s *Service) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterMcpAuthServiceServer(gs, s)
}
