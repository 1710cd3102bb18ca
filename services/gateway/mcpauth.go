package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Limits of the MCP OAuth routes.
const (
	maxMCPServerName    = 64
	maxCallbackParam    = 4096
	mcpCallbackDeadline = 30 * time.Second
)

// mcpAuthRoutes serves the tenant-facing MCP OAuth routes (the toolrunner's
// McpAuthService does the work). The callback takes no API key: the user's
// browser arrives there from the authorization server, and the single-use
// state identifies the tenant and server.
func (s *Server) mcpAuthRoutes(api func(string, http.HandlerFunc)) {
	api("POST /v1/mcp/servers/{server}/authorize", s.httpMCPAuthorize)
	api("GET /v1/mcp/servers/{server}/authorization", s.httpMCPAuthorization)
	api("DELETE /v1/mcp/servers/{server}/authorization", s.httpMCPRevoke)
	api("GET /v1/mcp/oauth/callback", s.httpMCPCallback)
}

func validateMCPServer(name string) error {
	var e validate.Errors
	validate.Required(&e, "server", name)
	validate.MaxBytes(&e, "server", name, maxMCPServerName)
	return e.Err()
}

func (s *Server) mcpAuth() (baagentv1.McpAuthServiceClient, error) {
	if s.opts.MCPAuth == nil {
		return nil, status.Error(codes.Unimplemented, "MCP OAuth is not configured (toolrunner setting mcp-oauth-key-file)")
	}
	return s.opts.MCPAuth, nil
}

func (s *Server) startMCPAuth(ctx context.Context, c caller, server string) (*baagentv1.GatewayServiceStartMcpAuthorizationResponse, error) {
	cl, err := s.mcpAuth()
	if err != nil {
		return nil, err
	}
	resp, err := cl.StartAuthorization(ctx, &baagentv1.StartAuthorizationRequest{Tenant: c.tenant, Server: server})
	if err != nil {
		return nil, peerError(ctx, "toolrunner", "StartAuthorization", err)
	}
	return &baagentv1.GatewayServiceStartMcpAuthorizationResponse{AuthorizationUrl: resp.GetAuthorizationUrl(), ExpiresAt: resp.GetExpiresAt()}, nil
}

func (s *Server) getMCPAuth(ctx context.Context, c caller, server string) (*baagentv1.GatewayServiceGetMcpAuthorizationResponse, error) {
	cl, err := s.mcpAuth()
	if err != nil {
		return nil, err
	}
	resp, err := cl.GetAuthorization(ctx, &baagentv1.GetAuthorizationRequest{Tenant: c.tenant, Server: server})
	if err != nil {
		return nil, peerError(ctx, "toolrunner", "GetAuthorization", err)
	}
	return &baagentv1.GatewayServiceGetMcpAuthorizationResponse{Authorization: resp.GetAuthorization()}, nil
}

func (s *Server) revokeMCPAuth(ctx context.Context, c caller, server string) (*baagentv1.GatewayServiceRevokeMcpAuthorizationResponse, error) {
	cl, err := s.mcpAuth()
	if err != nil {
		return nil, err
	}
	resp, err := cl.RevokeAuthorization(ctx, &baagentv1.RevokeAuthorizationRequest{Tenant: c.tenant, Server: server})
	if err != nil {
		return nil, peerError(ctx, "toolrunner", "RevokeAuthorization", err)
	}
	return &baagentv1.GatewayServiceRevokeMcpAuthorizationResponse{Revoked: resp.GetRevoked()}, nil
}

// grpcMCPAuth is a gRPC MCP authorization call: the server name checked,
// the caller authenticated and holding a slot while op runs.
func grpcMCPAuth[T any](ctx context.Context, s *Server, server string, op func(context.Context, caller, string) (T, error)) (T, error) {
	var zero T
	if err := validateMCPServer(server); err != nil {
		return zero, err
	}
	c, done, err := s.grpcUnaryCaller(ctx)
	if err != nil {
		return zero, err
	}
	defer done()
	return op(ctx, c, server)
}

// StartMcpAuthorization implements GatewayService.
func (s *Server) StartMcpAuthorization(ctx context.Context, req *baagentv1.GatewayServiceStartMcpAuthorizationRequest) (*baagentv1.GatewayServiceStartMcpAuthorizationResponse, error) {
	return grpcMCPAuth(ctx, s, req.GetServer(), s.startMCPAuth)
}

// GetMcpAuthorization implements GatewayService.
func (s *Server) GetMcpAuthorization(ctx context.Context, req *baagentv1.GatewayServiceGetMcpAuthorizationRequest) (*baagentv1.GatewayServiceGetMcpAuthorizationResponse, error) {
	return grpcMCPAuth(ctx, s, req.GetServer(), s.getMCPAuth)
}

// RevokeMcpAuthorization implements GatewayService.
func (s *Server) RevokeMcpAuthorization(ctx context.Context, req *baagentv1.GatewayServiceRevokeMcpAuthorizationRequest) (*baagentv1.GatewayServiceRevokeMcpAuthorizationResponse, error) {
	return grpcMCPAuth(ctx, s, req.GetServer(), s.revokeMCPAuth)
}

func (s *Server) httpMCPAuthorize(w http.ResponseWriter, r *http.Request) {
	server := r.PathValue("server")
	s.serveJSON(w, r, nil, func() error { return validateMCPServer(server) }, func(c caller) (any, error) {
		return s.startMCPAuth(r.Context(), c, server)
	})
}

func (s *Server) httpMCPAuthorization(w http.ResponseWriter, r *http.Request) {
	server := r.PathValue("server")
	s.serveJSON(w, r, nil, func() error { return validateMCPServer(server) }, func(c caller) (any, error) {
		return s.getMCPAuth(r.Context(), c, server)
	})
}

func (s *Server) httpMCPRevoke(w http.ResponseWriter, r *http.Request) {
	server := r.PathValue("server")
	s.serveJSON(w, r, nil, func() error { return validateMCPServer(server) }, func(c caller) (any, error) {
		return s.revokeMCPAuth(r.Context(), c, server)
	})
}

// httpMCPCallback is the OAuth redirect target. It answers plain text (no
// markup from the query is ever reflected) and never echoes the code.
func (s *Server) httpMCPCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	q := r.URL.Query()
	state, code, oerr := q.Get("state"), q.Get("code"), q.Get("error")
	if state == "" || (code == "" && oerr == "") || len(state) > maxCallbackParam || len(code) > maxCallbackParam || len(oerr) > maxCallbackParam {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "This is not a valid authorization callback: state and code are required.\n")
		return
	}
	cl, err := s.mcpAuth()
	if err != nil {
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = io.WriteString(w, status.Convert(err).Message()+"\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), mcpCallbackDeadline)
	defer cancel()
	resp, err := cl.CompleteAuthorization(ctx, &baagentv1.CompleteAuthorizationRequest{State: state, Code: code, Error: oerr})
	if err != nil {
		st := status.Convert(err)
		httpStatus := http.StatusBadGateway
		switch st.Code() {
		case codes.InvalidArgument, codes.FailedPrecondition:
			httpStatus = http.StatusBadRequest
		case codes.Unimplemented:
			httpStatus = http.StatusNotImplemented
		}
		s.opts.Logger.InfoContext(ctx, "mcp oauth callback failed", "code", st.Code().String(), "err", st.Message())
		w.WriteHeader(httpStatus)
		_, _ = io.WriteString(w, "Authorization failed: "+oneLine(st.Message())+"\n")
		return
	}
	_, _ = fmt.Fprintf(w, "Authorized MCP server %q for tenant %q. You can close this window.\n", resp.GetServer(), resp.GetTenant())
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}
