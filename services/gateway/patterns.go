package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// The patterns API (docs/concepts/patterns.md): the caller's tenant's
// interaction patterns, forwarded to the memory service with the tenant of
// the API key, never one from the request. Another tenant's pattern is
// NotFound, as an unknown one is; a pattern another tenant granted is
// listed (include_shared) and readable, never writable.
//
//	GET    /v1/patterns?task_type=&state=&include_shared=&page_size=&page_token=
//	GET    /v1/patterns/{id}                       ETag: "<version>"
//	PATCH  /v1/patterns/{id}                       body: PatternEdit fields + expected_version, or If-Match: "<version>"
//	DELETE /v1/patterns/{id}
//	POST   /v1/patterns/{id}/useless               body: {"reason": "…"} (optional)
//	POST   /v1/patterns/{id}/grants                body: {"grantee_tenant": "…"}
//	DELETE /v1/patterns/{id}/grants/{grantee}
//	GET    /v1/patterns/grants?id=
//
// A PATCH whose version no longer holds is 412 Precondition Failed.

// Limits of the patterns API, the memory service's own (patterns.proto,
// core/patterns).
const (
	MaxPatternTaskTypeBytes    = 64
	MaxPatternNameBytes        = 120
	MaxPatternDescriptionBytes = 2 << 10
	MaxPatternStepTextBytes    = 500
	MaxPatternCorrectionBytes  = 1 << 10
	MaxPatternToolNameBytes    = 128
	MaxPatternSteps            = 20
	MaxPatternStepTools        = 20
	MaxPatternStepCorrections  = 5
	MaxPatternToolChain        = 20
	MaxPatternReasonBytes      = 1 << 10
)

// Pattern operations, more op labels of baagent_gateway_memory_requests_total.
const (
	patOpList       = "list_patterns"
	patOpGet        = "get_pattern"
	patOpUpdate     = "update_pattern"
	patOpDelete     = "delete_pattern"
	patOpUseless    = "mark_pattern_useless"
	patOpGrant      = "grant_pattern"
	patOpRevoke     = "revoke_pattern_grant"
	patOpListGrants = "list_pattern_grants"
)

var patternOps = []string{patOpList, patOpGet, patOpUpdate, patOpDelete, patOpUseless, patOpGrant, patOpRevoke, patOpListGrants}

// --- validation ---

// validateTaskType accepts a task type as core/patterns names them:
// lower-case letters, digits and underscores.
func validateTaskType(e *validate.Errors, field, v string) {
	if len(v) > MaxPatternTaskTypeBytes {
		e.Addf(field, "must be at most %d bytes, got %d", MaxPatternTaskTypeBytes, len(v))
		return
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			e.Add(field, "must be a task type such as report or data_quality (lower-case letters, digits, _)")
			return
		}
	}
}

func validateListPatterns(req *baagentv1.GatewayServiceListPatternsRequest) error {
	var e validate.Errors
	validateTaskType(&e, "task_type", req.GetTaskType())
	validate.Enum(&e, "state", req.GetState(), baagentv1.PatternState_name, true)
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func checkPatternID[T interface{ GetId() string }](req T) error {
	return validateMemoryID("id", req.GetId())
}

// validatePatternEdit checks an edit against the limits of a pattern.
func validatePatternEdit(e *validate.Errors, field string, ed *baagentv1.PatternEdit) {
	if ed == nil {
		e.Add(field, "required: set name, description, steps or tool_chain")
		return
	}
	if ed.Name == nil && ed.Description == nil && !ed.GetReplaceSteps() && ed.GetToolChain() == nil {
		e.Add(field, "nothing to change: set name, description, steps or tool_chain")
	}
	if ed.Name != nil {
		validate.RequiredText(e, field+".name", ed.GetName(), MaxPatternNameBytes)
	}
	if ed.Description != nil {
		validate.Text(e, field+".description", ed.GetDescription(), MaxPatternDescriptionBytes)
	}
	steps := ed.GetSteps()
	switch {
	case !ed.GetReplaceSteps() && len(steps) > 0:
		e.Add(field+".replace_steps", "required with steps")
	case ed.GetReplaceSteps() && len(steps) == 0:
		e.Add(field+".steps", "required with replace_steps: a pattern keeps at least one step")
	}
	validate.MaxItems(e, field+".steps", len(steps), MaxPatternSteps)
	for i, st := range steps {
		if i >= MaxPatternSteps {
			break
		}
		f := validate.Index(field+".steps", i)
		if st == nil {
			e.Add(f, "required")
			continue
		}
		validate.RequiredText(e, f+".description", st.GetDescription(), MaxPatternStepTextBytes)
		validate.Text(e, f+".expected_output", st.GetExpectedOutput(), MaxPatternStepTextBytes)
		validateToolNames(e, f+".tools", st.GetTools(), MaxPatternStepTools)
		validate.MaxItems(e, f+".corrections", len(st.GetCorrections()), MaxPatternStepCorrections)
		for j, c := range st.GetCorrections() {
			if j >= MaxPatternStepCorrections {
				break
			}
			validate.RequiredText(e, validate.Index(f+".corrections", j), c, MaxPatternCorrectionBytes)
		}
	}
	if tc := ed.GetToolChain(); tc != nil {
		if len(tc.GetTools()) == 0 {
			e.Add(field+".tool_chain.tools", "required: a tool chain names at least one tool")
		}
		validateToolNames(e, field+".tool_chain.tools", tc.GetTools(), MaxPatternToolChain)
	}
}

func validateToolNames(e *validate.Errors, field string, names []string, max int) {
	validate.MaxItems(e, field, len(names), max)
	for i, n := range names {
		if i >= max {
			break
		}
		validate.Name(e, validate.Index(field, i), n)
		validate.MaxBytes(e, validate.Index(field, i), n, MaxPatternToolNameBytes)
	}
}

func validateUpdatePattern(req *baagentv1.GatewayServiceUpdatePatternRequest) error {
	var e validate.Errors
	validate.ID(&e, "id", req.GetId())
	validatePatternEdit(&e, "edit", req.GetEdit())
	validate.NonNegative(&e, "expected_version", req.GetExpectedVersion())
	return e.Err()
}

func validateMarkPatternUseless(req *baagentv1.GatewayServiceMarkPatternUselessRequest) error {
	var e validate.Errors
	validate.ID(&e, "id", req.GetId())
	validate.Text(&e, "reason", req.GetReason(), MaxPatternReasonBytes)
	return e.Err()
}

// patternGrantRequest is a grant or revocation: a pattern and a tenant.
type patternGrantRequest interface {
	GetId() string
	GetGranteeTenant() string
}

func validatePatternGrant[T patternGrantRequest](req T) error {
	var e validate.Errors
	validate.ID(&e, "id", req.GetId())
	validate.Tenant(&e, "grantee_tenant", req.GetGranteeTenant())
	return e.Err()
}

func validateListPatternGrants(req *baagentv1.GatewayServiceListPatternGrantsRequest) error {
	var e validate.Errors
	validate.Optional(&e, "id", req.GetId(), validate.ID)
	return e.Err()
}

// notSelf refuses sharing a pattern with its own tenant.
func notSelf(tenant, grantee string) error {
	if grantee == tenant {
		return fieldError("grantee_tenant", "must be another tenant than the caller's")
	}
	return nil
}

// --- gRPC ---

// ListPatterns lists the caller's tenant's patterns.
func (s *Server) ListPatterns(ctx context.Context, req *baagentv1.GatewayServiceListPatternsRequest) (*baagentv1.GatewayServiceListPatternsResponse, error) {
	return memoryGRPC(ctx, s, patOpList, "ListPatterns", req, validateListPatterns, s.listPatterns)
}

func (s *Server) listPatterns(ctx context.Context, tenant string, req *baagentv1.GatewayServiceListPatternsRequest) (*baagentv1.GatewayServiceListPatternsResponse, error) {
	resp, err := s.opts.Memory.ListPatterns(ctx, &baagentv1.ListPatternsRequest{
		Tenant: tenant, TaskType: req.GetTaskType(), State: req.GetState(), IncludeShared: req.GetIncludeShared(),
		PageSize: req.GetPageSize(), PageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "ListPatterns", err)
	}
	return &baagentv1.GatewayServiceListPatternsResponse{Patterns: resp.GetPatterns(), NextPageToken: resp.GetNextPageToken()}, nil
}

// GetPattern reads one pattern of the caller's tenant (or granted to it).
func (s *Server) GetPattern(ctx context.Context, req *baagentv1.GatewayServiceGetPatternRequest) (*baagentv1.GatewayServiceGetPatternResponse, error) {
	return memoryGRPC(ctx, s, patOpGet, "GetPattern", req, checkPatternID, s.getPattern)
}

func (s *Server) getPattern(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetPatternRequest) (*baagentv1.GatewayServiceGetPatternResponse, error) {
	resp, err := s.opts.Memory.GetPattern(ctx, &baagentv1.GetPatternRequest{Tenant: tenant, Id: req.GetId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "GetPattern", err)
	}
	return &baagentv1.GatewayServiceGetPatternResponse{Pattern: resp.GetPattern()}, nil
}

// UpdatePattern edits one of the caller's tenant's patterns.
func (s *Server) UpdatePattern(ctx context.Context, req *baagentv1.GatewayServiceUpdatePatternRequest) (*baagentv1.GatewayServiceUpdatePatternResponse, error) {
	return memoryGRPC(ctx, s, patOpUpdate, "UpdatePattern", req, validateUpdatePattern, s.updatePattern)
}

func (s *Server) updatePattern(ctx context.Context, tenant string, req *baagentv1.GatewayServiceUpdatePatternRequest) (*baagentv1.GatewayServiceUpdatePatternResponse, error) {
	resp, err := s.opts.Memory.UpdatePattern(ctx, &baagentv1.UpdatePatternRequest{
		Tenant: tenant, Id: req.GetId(), Edit: req.GetEdit(), ExpectedVersion: req.GetExpectedVersion(),
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "UpdatePattern", err)
	}
	s.log.InfoContext(ctx, "pattern edited", "tenant", tenant, "pattern_id", req.GetId(), "version", resp.GetPattern().GetVersion())
	return &baagentv1.GatewayServiceUpdatePatternResponse{Pattern: resp.GetPattern()}, nil
}

// DeletePattern removes one of the caller's tenant's patterns.
func (s *Server) DeletePattern(ctx context.Context, req *baagentv1.GatewayServiceDeletePatternRequest) (*baagentv1.GatewayServiceDeletePatternResponse, error) {
	return memoryGRPC(ctx, s, patOpDelete, "DeletePattern", req, checkPatternID, s.deletePattern)
}

func (s *Server) deletePattern(ctx context.Context, tenant string, req *baagentv1.GatewayServiceDeletePatternRequest) (*baagentv1.GatewayServiceDeletePatternResponse, error) {
	if _, err := s.opts.Memory.DeletePattern(ctx, &baagentv1.DeletePatternRequest{Tenant: tenant, Id: req.GetId()}); err != nil {
		return nil, peerError(ctx, memoryPeer, "DeletePattern", err)
	}
	s.log.InfoContext(ctx, "pattern deleted", "tenant", tenant, "pattern_id", req.GetId())
	return &baagentv1.GatewayServiceDeletePatternResponse{}, nil
}

// MarkPatternUseless deletes one of the caller's tenant's patterns and
// keeps its signature from being learned again for 180 days.
func (s *Server) MarkPatternUseless(ctx context.Context, req *baagentv1.GatewayServiceMarkPatternUselessRequest) (*baagentv1.GatewayServiceMarkPatternUselessResponse, error) {
	return memoryGRPC(ctx, s, patOpUseless, "MarkPatternUseless", req, validateMarkPatternUseless, s.markPatternUseless)
}

func (s *Server) markPatternUseless(ctx context.Context, tenant string, req *baagentv1.GatewayServiceMarkPatternUselessRequest) (*baagentv1.GatewayServiceMarkPatternUselessResponse, error) {
	if _, err := s.opts.Memory.MarkPatternUseless(ctx, &baagentv1.MarkPatternUselessRequest{Tenant: tenant, Id: req.GetId(), Reason: req.GetReason()}); err != nil {
		return nil, peerError(ctx, memoryPeer, "MarkPatternUseless", err)
	}
	s.log.InfoContext(ctx, "pattern marked useless", "tenant", tenant, "pattern_id", req.GetId())
	return &baagentv1.GatewayServiceMarkPatternUselessResponse{}, nil
}

// GrantPattern shares one of the caller's tenant's patterns with another
// tenant, read-only.
func (s *Server) GrantPattern(ctx context.Context, req *baagentv1.GatewayServiceGrantPatternRequest) (*baagentv1.GatewayServiceGrantPatternResponse, error) {
	return memoryGRPC(ctx, s, patOpGrant, "GrantPattern", req, validatePatternGrant[*baagentv1.GatewayServiceGrantPatternRequest], s.grantPattern)
}

func (s *Server) grantPattern(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGrantPatternRequest) (*baagentv1.GatewayServiceGrantPatternResponse, error) {
	if err := notSelf(tenant, req.GetGranteeTenant()); err != nil {
		return nil, err
	}
	resp, err := s.opts.Memory.GrantPattern(ctx, &baagentv1.GrantPatternRequest{Tenant: tenant, Id: req.GetId(), GranteeTenant: req.GetGranteeTenant()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "GrantPattern", err)
	}
	s.log.InfoContext(ctx, "pattern granted", "tenant", tenant, "pattern_id", req.GetId(), "grantee_tenant", req.GetGranteeTenant())
	return &baagentv1.GatewayServiceGrantPatternResponse{Grant: resp.GetGrant()}, nil
}

// RevokePatternGrant stops sharing a pattern with a tenant.
func (s *Server) RevokePatternGrant(ctx context.Context, req *baagentv1.GatewayServiceRevokePatternGrantRequest) (*baagentv1.GatewayServiceRevokePatternGrantResponse, error) {
	return memoryGRPC(ctx, s, patOpRevoke, "RevokePatternGrant", req, validatePatternGrant[*baagentv1.GatewayServiceRevokePatternGrantRequest], s.revokePatternGrant)
}

func (s *Server) revokePatternGrant(ctx context.Context, tenant string, req *baagentv1.GatewayServiceRevokePatternGrantRequest) (*baagentv1.GatewayServiceRevokePatternGrantResponse, error) {
	if _, err := s.opts.Memory.RevokePatternGrant(ctx, &baagentv1.RevokePatternGrantRequest{Tenant: tenant, Id: req.GetId(), GranteeTenant: req.GetGranteeTenant()}); err != nil {
		return nil, peerError(ctx, memoryPeer, "RevokePatternGrant", err)
	}
	s.log.InfoContext(ctx, "pattern grant revoked", "tenant", tenant, "pattern_id", req.GetId(), "grantee_tenant", req.GetGranteeTenant())
	return &baagentv1.GatewayServiceRevokePatternGrantResponse{}, nil
}

// ListPatternGrants lists the grants the caller's tenant gave.
func (s *Server) ListPatternGrants(ctx context.Context, req *baagentv1.GatewayServiceListPatternGrantsRequest) (*baagentv1.GatewayServiceListPatternGrantsResponse, error) {
	return memoryGRPC(ctx, s, patOpListGrants, "ListPatternGrants", req, validateListPatternGrants, s.listPatternGrants)
}

func (s *Server) listPatternGrants(ctx context.Context, tenant string, req *baagentv1.GatewayServiceListPatternGrantsRequest) (*baagentv1.GatewayServiceListPatternGrantsResponse, error) {
	resp, err := s.opts.Memory.ListPatternGrants(ctx, &baagentv1.ListPatternGrantsRequest{Tenant: tenant, Id: req.GetId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "ListPatternGrants", err)
	}
	return &baagentv1.GatewayServiceListPatternGrantsResponse{Grants: resp.GetGrants()}, nil
}

// --- HTTP ---

// patternRoutes adds the HTTP routes of the patterns API.
func (s *Server) patternRoutes(api func(string, http.HandlerFunc)) {
	api("GET /v1/patterns", s.httpListPatterns)
	api("GET /v1/patterns/grants", s.httpListPatternGrants)
	api("GET /v1/patterns/{id}", s.httpGetPattern)
	api("PATCH /v1/patterns/{id}", s.httpUpdatePattern)
	api("DELETE /v1/patterns/{id}", s.httpDeletePattern)
	api("POST /v1/patterns/{id}/useless", s.httpMarkPatternUseless)
	api("POST /v1/patterns/{id}/grants", s.httpGrantPattern)
	api("DELETE /v1/patterns/{id}/grants/{grantee}", s.httpRevokePatternGrant)
}

// forwardHTTP serves a memory or pattern route through serveJSON: body
// (nil: none) is decoded by serveJSON; after the caller is admitted, parse
// reads what else the request carries (query, headers, a body of its own:
// nothing is read for an unauthenticated caller), check validates it, and
// call forwards it. Every outcome is counted under op.
func forwardHTTP[Req any, Resp proto.Message](s *Server, w http.ResponseWriter, r *http.Request, op string, body proto.Message, parse func() (Req, error),
	check func(Req) error, call func(ctx context.Context, tenant string, req Req) (Resp, error)) {
	var outcome error
	var req Req
	sw := &statusRecorder{ResponseWriter: w}
	defer func() {
		if outcome == nil && sw.code >= 400 {
			// Refused before validation: authentication, rate limit,
			// in-flight slots or the body.
			outcome = status.Error(refusedCode(sw.code), "")
		}
		s.memoryM.observe(op, apiHTTP, outcome)
	}()
	s.serveJSON(sw, r, body, func() error {
		if req, outcome = parse(); outcome != nil {
			return outcome
		}
		outcome = check(req)
		return outcome
	}, func(c caller) (any, error) {
		if err := s.memoryReady(); err != nil {
			outcome = err
			return nil, err
		}
		resp, err := call(r.Context(), c.tenant, req)
		outcome = err
		if err != nil {
			return nil, err
		}
		return resp, nil
	})
}

// fixed is the parse of a route whose request is all in its path.
func fixed[Req any](req Req) func() (Req, error) {
	return func() (Req, error) { return req, nil }
}

// parseQueryBool reads an optional boolean query parameter (true, false,
// 1, 0, …); absent is false.
func parseQueryBool(q map[string][]string, name string) (bool, error) {
	vs := q[name]
	if len(vs) == 0 || vs[0] == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(vs[0])
	if err != nil {
		return false, fieldError(name, "must be true or false")
	}
	return b, nil
}

// parsePatternState accepts a state by its short name (active, candidate,
// draft, untrusted, archived) or its enum name; empty is any.
func parsePatternState(v string) (baagentv1.PatternState, error) {
	return parseEnum[baagentv1.PatternState](v, "PATTERN_STATE_", baagentv1.PatternState_value, "state", "candidate, active, draft, untrusted, archived")
}

// parseListPatternsQuery reads GET /v1/patterns's query: task_type, state,
// include_shared, page_size and page_token.
func parseListPatternsQuery(r *http.Request) (*baagentv1.GatewayServiceListPatternsRequest, error) {
	q := r.URL.Query()
	req := &baagentv1.GatewayServiceListPatternsRequest{TaskType: q.Get("task_type"), PageToken: q.Get("page_token")}
	var err error
	if req.State, err = parsePatternState(q.Get("state")); err != nil {
		return req, err
	}
	if req.IncludeShared, err = parseQueryBool(q, "include_shared"); err != nil {
		return req, err
	}
	if req.PageSize, err = queryPageSize(r); err != nil {
		return req, err
	}
	return req, nil
}

// parseVersionTag reads an If-Match header carrying a pattern's version:
// one strong entity tag, quoted ("3") or bare (3); empty is none.
func parseVersionTag(h string) (int64, error) {
	h = strings.TrimSpace(h)
	switch {
	case h == "":
		return 0, nil
	case h == "*":
		return 0, fieldError("If-Match", "* is not supported: send the version to edit (the ETag of GET /v1/patterns/{id})")
	case strings.HasPrefix(h, "W/"):
		return 0, fieldError("If-Match", "a weak entity tag cannot match: send the version as the ETag gave it")
	}
	if strings.HasPrefix(h, `"`) {
		if len(h) < 2 || !strings.HasSuffix(h, `"`) || strings.Count(h, `"`) != 2 {
			return 0, fieldError("If-Match", `want one entity tag, "<version>"`)
		}
		h = h[1 : len(h)-1]
	}
	n, err := strconv.ParseInt(h, 10, 64)
	if err != nil || n <= 0 || h[0] == '+' {
		return 0, fieldError("If-Match", `want one entity tag, "<version>", a positive integer`)
	}
	return n, nil
}

// versionTag is a pattern's version as an entity tag.
func versionTag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// parsePatternEditBody reads PATCH /v1/patterns/{id}'s body: the fields of
// a PatternEdit (name, description, steps, tool_chain) and
// expected_version at the top level. steps without replace_steps replace
// the steps (what a body naming them means); tool_chain is a list of tool
// names or {"tools": [...]}. An id in the body must be the path's.
func parsePatternEditBody(data []byte, id string) (*baagentv1.GatewayServiceUpdatePatternRequest, error) {
	req := &baagentv1.GatewayServiceUpdatePatternRequest{Id: id}
	if len(bytes.TrimSpace(data)) == 0 {
		return req, fieldError("body", "required: a JSON object with name, description, steps or tool_chain")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return req, fieldError("body", "must be a JSON object with name, description, steps or tool_chain")
	}
	// The proto JSON mapping accepts lowerCamelCase names too.
	for camel, snake := range map[string]string{"expectedVersion": "expected_version", "toolChain": "tool_chain", "replaceSteps": "replace_steps"} {
		if raw, ok := fields[camel]; ok {
			if _, dup := fields[snake]; dup {
				return req, fieldError(snake, "given twice, as "+snake+" and "+camel)
			}
			fields[snake] = raw
			delete(fields, camel)
		}
	}
	if raw, ok := fields["expected_version"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		v, err := parseJSONInt64(raw)
		if err != nil {
			return req, fieldError("expected_version", "must be an integer")
		}
		req.ExpectedVersion = v
	}
	delete(fields, "expected_version")
	if raw, ok := fields["id"]; ok {
		var bodyID string
		if err := json.Unmarshal(raw, &bodyID); err != nil {
			return req, fieldError("id", "must be a string")
		}
		if err := reconcile("id", bodyID, id, "the path"); err != nil {
			return req, err
		}
		delete(fields, "id")
	}
	if raw, ok := fields["tool_chain"]; ok {
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			wrapped, err := json.Marshal(map[string]json.RawMessage{"tools": raw})
			if err != nil {
				return req, fieldError("tool_chain", "must be a list of tool names")
			}
			fields["tool_chain"] = wrapped
		}
	}
	_, hasSteps := fields["steps"]
	_, hasReplace := fields["replace_steps"]
	rest, err := json.Marshal(fields)
	if err != nil {
		return req, fieldError("body", "must be a JSON object")
	}
	edit := &baagentv1.PatternEdit{}
	if err := unmarshalJSON.Unmarshal(rest, edit); err != nil {
		return req, fieldError("body", "invalid JSON for PatternEdit: "+err.Error())
	}
	if hasSteps && !hasReplace {
		edit.ReplaceSteps = true
	}
	req.Edit = edit
	return req, nil
}

// parseJSONInt64 reads an integer written as a JSON number or string (the
// proto JSON mapping writes int64 as a string).
func parseJSONInt64(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strconv.ParseInt(s, 10, 64)
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return 0, err
	}
	return n.Int64()
}

// versionConflict answers a failed version check of an edit over HTTP as
// 412 Precondition Failed instead of FailedPrecondition's 400.
func versionConflict(err error) error {
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		return err
	}
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonPrecondition, Domain: "baagent.dev"}); derr == nil {
		return d.Err()
	}
	return err
}

func (s *Server) httpListPatterns(w http.ResponseWriter, r *http.Request) {
	forwardHTTP(s, w, r, patOpList, nil, func() (*baagentv1.GatewayServiceListPatternsRequest, error) { return parseListPatternsQuery(r) },
		validateListPatterns, s.listPatterns)
}

func (s *Server) httpGetPattern(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetPatternRequest{Id: r.PathValue("id")}
	forwardHTTP(s, w, r, patOpGet, nil, fixed(req), checkPatternID, func(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetPatternRequest) (*baagentv1.GatewayServiceGetPatternResponse, error) {
		resp, err := s.getPattern(ctx, tenant, req)
		if err == nil && resp.GetPattern().GetVersion() > 0 {
			w.Header().Set("ETag", versionTag(resp.GetPattern().GetVersion()))
		}
		return resp, err
	})
}

func (s *Server) httpUpdatePattern(w http.ResponseWriter, r *http.Request) {
	forwardHTTP(s, w, r, patOpUpdate, nil, func() (*baagentv1.GatewayServiceUpdatePatternRequest, error) {
		ifMatch, err := parseVersionTag(r.Header.Get("If-Match"))
		if err != nil {
			return nil, err
		}
		data, err := s.readLimited(w, r, s.opts.MaxBodyBytes)
		if err != nil {
			return nil, err
		}
		req, err := parsePatternEditBody(data, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if ifMatch != 0 {
			if req.ExpectedVersion != 0 && req.ExpectedVersion != ifMatch {
				return nil, fieldError("If-Match", "the header says "+strconv.FormatInt(ifMatch, 10)+" but expected_version says "+strconv.FormatInt(req.ExpectedVersion, 10))
			}
			req.ExpectedVersion = ifMatch
		}
		return req, nil
	}, validateUpdatePattern, func(ctx context.Context, tenant string, req *baagentv1.GatewayServiceUpdatePatternRequest) (*baagentv1.GatewayServiceUpdatePatternResponse, error) {
		resp, err := s.updatePattern(ctx, tenant, req)
		if err != nil {
			if req.GetExpectedVersion() != 0 {
				err = versionConflict(err)
			}
			return nil, err
		}
		if v := resp.GetPattern().GetVersion(); v > 0 {
			w.Header().Set("ETag", versionTag(v))
		}
		return resp, nil
	})
}

func (s *Server) httpDeletePattern(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceDeletePatternRequest{Id: r.PathValue("id")}
	forwardHTTP(s, w, r, patOpDelete, nil, fixed(req), checkPatternID, s.deletePattern)
}

// withPathID reads an optional JSON body into req, whose id (when the body
// names one) must be the path's.
func withPathID[Req interface {
	proto.Message
	GetId() string
}](s *Server, w http.ResponseWriter, r *http.Request, req Req, setID func(string)) func() (Req, error) {
	return func() (Req, error) {
		if err := s.readBody(w, r, req); err != nil {
			return req, err
		}
		if err := reconcile("id", req.GetId(), r.PathValue("id"), "the path"); err != nil {
			return req, err
		}
		setID(r.PathValue("id"))
		return req, nil
	}
}

func (s *Server) httpMarkPatternUseless(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceMarkPatternUselessRequest{}
	forwardHTTP(s, w, r, patOpUseless, nil, withPathID(s, w, r, req, func(id string) { req.Id = id }), validateMarkPatternUseless, s.markPatternUseless)
}

func (s *Server) httpGrantPattern(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGrantPatternRequest{}
	forwardHTTP(s, w, r, patOpGrant, nil, withPathID(s, w, r, req, func(id string) { req.Id = id }),
		validatePatternGrant[*baagentv1.GatewayServiceGrantPatternRequest], s.grantPattern)
}

func (s *Server) httpRevokePatternGrant(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceRevokePatternGrantRequest{Id: r.PathValue("id"), GranteeTenant: r.PathValue("grantee")}
	forwardHTTP(s, w, r, patOpRevoke, nil, fixed(req), validatePatternGrant[*baagentv1.GatewayServiceRevokePatternGrantRequest], s.revokePatternGrant)
}

func (s *Server) httpListPatternGrants(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceListPatternGrantsRequest{Id: r.URL.Query().Get("id")}
	forwardHTTP(s, w, r, patOpListGrants, nil, fixed(req), validateListPatternGrants, s.listPatternGrants)
}
