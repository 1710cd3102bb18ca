package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/budgetrule"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Budgets and usage (docs/concepts/budgets.md). A tenant reads its own
// usage with its API key (GetUsage, GET /v1/usage); an operator reads and
// sets any tenant's budget with an admin API key (GetBudget, SetBudget,
// GET/PUT/DELETE /v1/admin/tenants/{tenant}/budget). Admin keys are a
// separate set: a tenant key is refused by the admin API (PermissionDenied)
// and an admin key is not a tenant key. The orchestrator stores budgets
// and keeps the ledger; the gateway passes the calling key's id (the first
// 8 hex digits of its SHA-256, never the key) with every run it starts,
// so that a key's own budget applies.

var (
	errAdminDisabled = errors.New("the admin API is disabled: no admin API keys are configured (admin-api-keys or admin-api-keys-file)")
	errNotAdmin      = errors.New("this API key belongs to a tenant; the admin API needs an admin API key")
)

// initAdmins indexes the admin keys by hash; a key that is also a tenant
// key is a configuration error (one key, one role).
func (s *Server) initAdmins() error {
	s.admins = make(map[[32]byte]bool, len(s.opts.AdminAPIKeys))
	for i, k := range s.opts.AdminAPIKeys {
		if len(k) < 16 || len(k) > maxKeyLen {
			return fmt.Errorf("admin API key %d: must be 16-%d bytes", i+1, maxKeyLen)
		}
		if _, tenant := s.opts.APIKeys[k]; tenant {
			return fmt.Errorf("admin API key %d is also a tenant API key; use separate keys", i+1)
		}
		s.admins[sha256.Sum256([]byte(k))] = true
	}
	return nil
}

// keyID is the non-secret id of an API key: the first 8 hex digits of its
// SHA-256 (the hash the gateway indexes keys by). Empty when the caller
// has no key (no keys configured) or is a stream token without one.
func (c caller) keyID() string {
	if !c.keyed || c.id == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(c.id[:4])
}

// KeyID returns the id under which an API key's own budget is set: the
// first 8 hex digits of the key's SHA-256.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

type keyIDContext struct{}

// withKeyID records the caller's key id for startRun.
func withKeyID(ctx context.Context, c caller) context.Context {
	if id := c.keyID(); id != "" {
		return context.WithValue(ctx, keyIDContext{}, id)
	}
	return ctx
}

func keyIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(keyIDContext{}).(string)
	return id
}

// adminAuth checks that key is an admin API key, presented from remote.
// A throttled address is refused first; an invalid key counts against it.
func (s *Server) adminAuth(api string, remote net.Addr, key string) error {
	if err := s.ready(); err != nil {
		return err
	}
	if len(s.admins) == 0 {
		return status.Error(codes.PermissionDenied, errAdminDisabled.Error())
	}
	if err := s.throttled(api, remote); err != nil {
		return err
	}
	if key == "" {
		return authStatus(errNoCredentials)
	}
	if len(key) <= maxKeyLen {
		id := sha256.Sum256([]byte(key))
		if s.admins[id] {
			return nil
		}
		if _, ok := s.auth.keys[id]; ok {
			return status.Error(codes.PermissionDenied, errNotAdmin.Error())
		}
	}
	s.authFailed(api, remote)
	return authStatus(errBadCredentials)
}

// grpcAdmin authenticates an admin gRPC call from its metadata.
func (s *Server) grpcAdmin(ctx context.Context) error {
	key, remote := grpcCredentials(ctx)
	return s.adminAuth(apiGRPC, remote, key)
}

// grpcUnaryCaller is grpcUnary returning the whole caller.
func (s *Server) grpcUnaryCaller(ctx context.Context) (caller, func(), error) {
	c, err := s.grpcCaller(ctx)
	if err != nil {
		return caller{}, nil, err
	}
	done, err := s.hold(c, s.inFlight, apiGRPC)
	if err != nil {
		return caller{}, nil, err
	}
	return c, done, nil
}

// GetUsage returns the calling tenant's usage, and the calling key's own
// when the key has a budget of its own, each with history_days days of
// history.
func (s *Server) GetUsage(ctx context.Context, req *baagentv1.GatewayServiceGetUsageRequest) (*baagentv1.GatewayServiceGetUsageResponse, error) {
	c, done, err := s.grpcUnaryCaller(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateHistoryDays(req.GetHistoryDays()); err != nil {
		return nil, s.rejected(ctx, "GetUsage", err)
	}
	return s.getUsage(ctx, c, req.GetHistoryDays())
}

// maxHistoryDays is the longest usage history: the usage ledger keeps its
// days 62 days.
const maxHistoryDays = 62

func validateHistoryDays(days int32) error {
	if days < 0 || days > maxHistoryDays {
		return fieldError("history_days", fmt.Sprintf("must be 0..%d (the usage ledger keeps days that long)", maxHistoryDays))
	}
	return nil
}

func (s *Server) getUsage(ctx context.Context, c caller, historyDays int32) (*baagentv1.GatewayServiceGetUsageResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: c.tenant, HistoryDays: historyDays})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "GetUsage", err)
	}
	out := &baagentv1.GatewayServiceGetUsageResponse{Usage: resp.GetUsage()}
	if id := c.keyID(); id != "" {
		kr, err := s.opts.Orchestrator.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: c.tenant, ApiKeyId: id, HistoryDays: historyDays})
		if err != nil {
			return nil, peerError(ctx, orchestratorPeer, "GetUsage", err)
		}
		if kr.GetUsage().GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_NONE {
			out.KeyUsage = kr.GetUsage()
		}
	}
	return out, nil
}

// GetBudget returns any tenant's budget (admin key).
func (s *Server) GetBudget(ctx context.Context, req *baagentv1.GatewayServiceGetBudgetRequest) (*baagentv1.GatewayServiceGetBudgetResponse, error) {
	if err := s.grpcAdmin(ctx); err != nil {
		return nil, err
	}
	if err := validateBudgetScope(req.GetTenant(), req.GetApiKeyId()); err != nil {
		return nil, s.rejected(ctx, "GetBudget", err)
	}
	return s.getBudget(ctx, req)
}

func (s *Server) getBudget(ctx context.Context, req *baagentv1.GatewayServiceGetBudgetRequest) (*baagentv1.GatewayServiceGetBudgetResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.GetBudget(ctx, &baagentv1.OrchestratorServiceGetBudgetRequest{Tenant: req.GetTenant(), ApiKeyId: req.GetApiKeyId()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "GetBudget", err)
	}
	return &baagentv1.GatewayServiceGetBudgetResponse{Entry: resp.GetEntry()}, nil
}

// SetBudget writes or clears any tenant's budget (admin key).
func (s *Server) SetBudget(ctx context.Context, req *baagentv1.GatewayServiceSetBudgetRequest) (*baagentv1.GatewayServiceSetBudgetResponse, error) {
	if err := s.grpcAdmin(ctx); err != nil {
		return nil, err
	}
	if err := validateSetBudget(req); err != nil {
		return nil, s.rejected(ctx, "SetBudget", err)
	}
	return s.setBudget(ctx, req)
}

func (s *Server) setBudget(ctx context.Context, req *baagentv1.GatewayServiceSetBudgetRequest) (*baagentv1.GatewayServiceSetBudgetResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.SetBudget(ctx, &baagentv1.OrchestratorServiceSetBudgetRequest{
		Tenant: req.GetTenant(), ApiKeyId: req.GetApiKeyId(), Budget: req.GetBudget(), Clear: req.GetClear(),
	})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "SetBudget", err)
	}
	s.log.InfoContext(ctx, "budget changed through the admin API", "tenant", req.GetTenant(), "api_key_id", req.GetApiKeyId(), "cleared", req.GetClear())
	return &baagentv1.GatewayServiceSetBudgetResponse{Entry: resp.GetEntry()}, nil
}

// validateBudgetScope checks a tenant and an optional key id (8 lowercase
// hex digits).
func validateBudgetScope(tenant, keyID string) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", tenant)
	checkKeyIDField(&e, "api_key_id", keyID)
	return e.Err()
}

func checkKeyIDField(e *validate.Errors, field, id string) {
	if id == "" {
		return
	}
	if err := budgetrule.CheckKeyID(id); err != nil {
		e.Add(field, err.Error()+"; baagentctl budget key-id computes it")
	}
}

// validateSetBudget checks the scope, the limits' values and that a
// budget is given unless clear is set.
func validateSetBudget(req *baagentv1.GatewayServiceSetBudgetRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	checkKeyIDField(&e, "api_key_id", req.GetApiKeyId())
	switch {
	case req.GetClear() && req.GetBudget() != nil:
		e.Add("budget", "must be empty when clear is set")
	case !req.GetClear() && req.GetBudget() == nil:
		e.Add("budget", "required (or set clear)")
	}
	for _, v := range budgetrule.Check(req.GetBudget()) {
		e.Add("budget."+v.Field, v.Description)
	}
	return e.Err()
}

// HTTP: GET /v1/usage (tenant key) and GET/PUT/DELETE
// /v1/admin/tenants/{tenant}/budget[?api_key_id=] (admin key; PUT's body is
// a Budget in the proto JSON mapping, unknown fields refused).

// httpGetUsage serves GET /v1/usage[?history_days=N].
func (s *Server) httpGetUsage(w http.ResponseWriter, r *http.Request) {
	var days int32
	validate := func() error {
		var err error
		if days, err = queryInt32(r, "history_days"); err != nil {
			return err
		}
		return validateHistoryDays(days)
	}
	s.serveJSON(w, r, nil, validate, func(c caller) (any, error) {
		return s.getUsage(r.Context(), c, days)
	})
}

// serveAdmin authenticates an admin request, then reads body (nil: none),
// validates and answers with what call returns.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request, body *baagentv1.Budget, validate func() error, call func() (proto.Message, error)) {
	var remote net.Addr
	if ap, err := netipAddr(r.RemoteAddr); err == nil {
		remote = ap
	}
	key := bearer(r.Header.Get("Authorization"))
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	if err := s.adminAuth(apiHTTP, remote, key); err != nil {
		writeError(w, err)
		return
	}
	if body != nil {
		if err := s.readBody(w, r, body); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := validate(); err != nil {
		writeError(w, err)
		return
	}
	out, err := call()
	if err != nil {
		writeError(w, err)
		return
	}
	writeProto(w, http.StatusOK, out)
}

func (s *Server) httpGetBudget(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetBudgetRequest{Tenant: r.PathValue("tenant"), ApiKeyId: r.URL.Query().Get("api_key_id")}
	s.serveAdmin(w, r, nil, func() error { return validateBudgetScope(req.GetTenant(), req.GetApiKeyId()) }, func() (proto.Message, error) {
		return s.getBudget(r.Context(), req)
	})
}

func (s *Server) httpPutBudget(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceSetBudgetRequest{Tenant: r.PathValue("tenant"), ApiKeyId: r.URL.Query().Get("api_key_id"), Budget: &baagentv1.Budget{}}
	s.serveAdmin(w, r, req.Budget, func() error { return validateSetBudget(req) }, func() (proto.Message, error) {
		return s.setBudget(r.Context(), req)
	})
}

func (s *Server) httpDeleteBudget(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceSetBudgetRequest{Tenant: r.PathValue("tenant"), ApiKeyId: r.URL.Query().Get("api_key_id"), Clear: true}
	s.serveAdmin(w, r, nil, func() error { return validateSetBudget(req) }, func() (proto.Message, error) {
		return s.setBudget(r.Context(), req)
	})
}
