package gateway

import (
	"context"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// HTTP routes of tenant skill management:
//
//	GET    /v1/skills?scope=system|tenant|project|all&project=P
//	GET    /v1/skills/{name}?project=P&level=1|2|3       ETag: "<revision>"
//	PUT    /v1/skills/{name}?project=P                   body: SKILL.md, zip, tar, tar.gz or JSON
//	DELETE /v1/skills/{name}?project=P
//	PUT    /v1/skills/{name}/state?project=P             body: {"disabled": true}
//
// PUT and DELETE take `If-Match: "<revision>"`, and PUT `If-None-Match: *`
// (create only); a precondition that does not hold is 412 Precondition
// Failed (the skills service's Aborted). Responses carrying one skill have
// its revision as the ETag.

// reasonPrecondition marks an Aborted status that HTTP answers 412.
const reasonPrecondition = "PRECONDITION_FAILED"

// jsonSkillOverhead is what a JSON PUT body may carry besides the base64
// content: the other fields and whitespace.
const jsonSkillOverhead = 64 << 10

// skillUploadFormats maps the media types PUT /v1/skills/{name} accepts as
// the raw skill to its encoding. None is one a web page may send to another
// origin without a CORS preflight (and a PUT always needs one), so they
// are as safe as JSON from cross-site requests (see origin.go).
var skillUploadFormats = map[string]baagentv1.SkillArchiveFormat{
	"text/markdown":                baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD,
	"text/x-markdown":              baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD,
	"application/zip":              baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP,
	"application/x-zip-compressed": baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP,
	"application/x-tar":            baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR,
	"application/gzip":             baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ,
	"application/x-gzip":           baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ,
	"application/x-compressed-tar": baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ,
	// Detected by the skills service from the content.
	"application/octet-stream": baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_UNSPECIFIED,
}

// isSkillUpload reports a PUT of a raw skill (a media type of
// skillUploadFormats), which the no-key browser guard accepts besides JSON.
func isSkillUpload(r *http.Request, mediaType string) bool {
	name, ok := strings.CutPrefix(r.URL.Path, "/v1/skills/")
	if r.Method != http.MethodPut || !ok || name == "" || strings.Contains(name, "/") {
		return false // not PUT /v1/skills/{name} (…/state takes JSON)
	}
	_, ok = skillUploadFormats[mediaType]
	return ok
}

// skillScopeFilter parses ?scope=: the short lowercase name (system), the
// enum name (SKILL_SCOPE_FILTER_SYSTEM), or empty for the effective skills.
func skillScopeFilter(v string) (baagentv1.SkillScopeFilter, bool) {
	if v == "" {
		return baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED, true
	}
	if n, ok := baagentv1.SkillScopeFilter_value[v]; ok {
		return baagentv1.SkillScopeFilter(n), true
	}
	if v == "effective" {
		return baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED, true
	}
	if n, ok := baagentv1.SkillScopeFilter_value["SKILL_SCOPE_FILTER_"+strings.ToUpper(v)]; ok && v == strings.ToLower(v) && n != 0 {
		return baagentv1.SkillScopeFilter(n), true
	}
	return 0, false
}

// skillLevel parses ?level=: 1, 2, 3, or the enum name; empty is the
// default (instructions).
func skillLevel(v string) (baagentv1.SkillLoadLevel, bool) {
	switch v {
	case "":
		return baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_UNSPECIFIED, true
	case "1":
		return baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_METADATA, true
	case "2":
		return baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS, true
	case "3":
		return baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES, true
	}
	n, ok := baagentv1.SkillLoadLevel_value[v]
	return baagentv1.SkillLoadLevel(n), ok
}

// parseIfMatch reads an If-Match header: one entity tag, quoted ("12") or
// bare (12). A weak tag (W/"12") is refused, as RFC 9110 compares If-Match
// strongly; so are `*` (the contract has no "exists at any revision") and
// lists (a skill has one revision).
func parseIfMatch(h string) (string, error) {
	h = strings.TrimSpace(h)
	switch {
	case h == "":
		return "", nil
	case h == "*":
		return "", fieldError("If-Match", "* is not supported: send the revision to replace (the ETag of GET /v1/skills/{name}), or nothing")
	case strings.HasPrefix(h, "W/"):
		return "", fieldError("If-Match", "a weak entity tag cannot match: send the revision as the ETag gave it")
	}
	if strings.HasPrefix(h, `"`) {
		if len(h) < 2 || !strings.HasSuffix(h, `"`) || strings.Count(h, `"`) != 2 {
			return "", fieldError("If-Match", "want one entity tag, \"<revision>\"")
		}
		h = h[1 : len(h)-1]
	}
	if h == "" || strings.ContainsAny(h, `,"`) {
		return "", fieldError("If-Match", "want one entity tag, \"<revision>\"")
	}
	var e validate.Errors
	revisionRule(&e, "If-Match", h)
	if err := e.Err(); err != nil {
		return "", err
	}
	return h, nil
}

// parseIfNoneMatch reads an If-None-Match header of a PUT: only `*`
// (create, fail if the skill exists) means anything for a write.
func parseIfNoneMatch(h string) (bool, error) {
	switch strings.TrimSpace(h) {
	case "":
		return false, nil
	case "*":
		return true, nil
	}
	return false, fieldError("If-None-Match", "only * (create only) is supported on PUT")
}

// etag quotes a revision as an entity tag.
func etag(rev string) string { return `"` + rev + `"` }

// skillHTTPError answers a skill write's failure: a failed precondition
// (Aborted) is 412, not the 409 other Aborted answers get.
func skillHTTPError(err error) error {
	st := status.Convert(err)
	if st.Code() != codes.Aborted {
		return err
	}
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonPrecondition, Domain: "baagent.dev"}); derr == nil {
		return d.Err()
	}
	return err
}

// serveSkill authenticates the caller and takes an in-flight slot, runs
// parse (which reads what the request carries, after authentication:
// nobody learns anything without a valid credential), checks readiness and
// calls call, then writes its answer with code, or the error.
func (s *Server) serveSkill(w http.ResponseWriter, r *http.Request, op string, parse func() error, call func(c caller) (m proto.Message, code int, rev string, err error)) {
	c, done, ok := s.admitHTTP(w, r)
	if !ok {
		return
	}
	defer done()
	fail := func(err error) {
		if op != "" {
			s.skillMetrics.observe(op, apiHTTP, err)
		}
		writeError(w, skillHTTPError(err))
	}
	if err := parse(); err != nil {
		fail(err)
		return
	}
	if err := s.ready(); err != nil {
		fail(err)
		return
	}
	m, code, rev, err := call(c)
	if err != nil {
		fail(err)
		return
	}
	if op != "" {
		s.skillMetrics.observe(op, apiHTTP, nil)
	}
	if rev != "" {
		w.Header().Set("ETag", etag(rev))
	}
	writeProto(w, code, m)
}

func (s *Server) httpGetSkill(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetSkillRequest{Name: r.PathValue("name")}
	s.serveSkill(w, r, "", func() error {
		q := r.URL.Query()
		req.Project = q.Get("project")
		lvl, ok := skillLevel(q.Get("level"))
		if !ok {
			return fieldError("level", "unknown level "+strconv.Quote(q.Get("level"))+": want 1, 2 or 3")
		}
		req.Level = lvl
		return validateGetSkill(req)
	}, func(c caller) (proto.Message, int, string, error) {
		resp, err := s.getSkill(r.Context(), c.tenant, req)
		if err != nil {
			return nil, 0, "", err
		}
		return resp, http.StatusOK, resp.GetMetadata().GetRevision(), nil
	})
}

func (s *Server) httpPutSkill(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServicePutSkillRequest{}
	s.serveSkill(w, r, skillOpPut, func() error { return s.parsePutSkill(w, r, req) }, func(c caller) (proto.Message, int, string, error) {
		resp, err := s.putSkill(r.Context(), c.tenant, req)
		if err != nil {
			return nil, 0, "", err
		}
		code := http.StatusOK
		if !resp.GetReplaced() {
			code = http.StatusCreated
			w.Header().Set("Location", skillLocation(req.GetName(), req.GetProject()))
		}
		return resp, code, resp.GetSkill().GetRevision(), nil
	})
}

func (s *Server) httpDeleteSkill(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceDeleteSkillRequest{Name: r.PathValue("name")}
	s.serveSkill(w, r, skillOpDelete, func() error {
		req.Project = r.URL.Query().Get("project")
		rev, err := parseIfMatch(r.Header.Get("If-Match"))
		if err != nil {
			return err
		}
		req.IfMatch = rev
		return validateDeleteSkill(req)
	}, func(c caller) (proto.Message, int, string, error) {
		resp, err := s.deleteSkill(r.Context(), c.tenant, req)
		return resp, http.StatusOK, "", err
	})
}

func (s *Server) httpSetSystemSkillState(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceSetSystemSkillStateRequest{}
	s.serveSkill(w, r, skillOpState, func() error {
		if err := s.readBody(w, r, req); err != nil {
			return err
		}
		if err := reconcile("name", req.GetName(), r.PathValue("name"), "the path"); err != nil {
			return err
		}
		req.Name = r.PathValue("name")
		if err := reconcile("project", req.GetProject(), r.URL.Query().Get("project"), "?project="); err != nil {
			return err
		}
		req.Project = cmpOr(req.GetProject(), r.URL.Query().Get("project"))
		return validateSetSystemSkillState(req)
	}, func(c caller) (proto.Message, int, string, error) {
		resp, err := s.setSystemSkillState(r.Context(), c.tenant, req)
		return resp, http.StatusOK, "", err
	})
}

// parsePutSkill reads PUT /v1/skills/{name}: the raw skill in one of the
// skillUploadFormats, or a JSON GatewayServicePutSkillRequest (content in
// base64), plus ?project= and the precondition headers.
func (s *Server) parsePutSkill(w http.ResponseWriter, r *http.Request, req *baagentv1.GatewayServicePutSkillRequest) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return unsupportedSkillType(r.Header.Get("Content-Type"))
	}
	if mt == "application/json" {
		// Base64 makes the content a third larger.
		limit := max(s.opts.MaxBodyBytes, s.opts.MaxSkillBytes/3*4+jsonSkillOverhead)
		data, err := s.readLimited(w, r, limit)
		if err != nil {
			return err
		}
		if err := unmarshalJSON.Unmarshal(data, req); err != nil {
			return fieldError("body", "invalid JSON for GatewayServicePutSkillRequest: "+err.Error())
		}
	} else {
		format, ok := skillUploadFormats[mt]
		if !ok {
			return unsupportedSkillType(mt)
		}
		data, err := s.readLimited(w, r, s.opts.MaxSkillBytes)
		if err != nil {
			return err
		}
		req.Content, req.Format = data, format
	}
	if err := reconcile("name", req.GetName(), r.PathValue("name"), "the path"); err != nil {
		return err
	}
	req.Name = r.PathValue("name")
	q := r.URL.Query().Get("project")
	if err := reconcile("project", req.GetProject(), q, "?project="); err != nil {
		return err
	}
	req.Project = cmpOr(req.GetProject(), q)
	rev, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	if err := reconcile("if_match", req.GetIfMatch(), rev, "If-Match"); err != nil {
		return err
	}
	req.IfMatch = cmpOr(req.GetIfMatch(), rev)
	none, err := parseIfNoneMatch(r.Header.Get("If-None-Match"))
	if err != nil {
		return err
	}
	req.IfNoneMatch = req.GetIfNoneMatch() || none
	return s.validatePutSkill(req)
}

// reconcile refuses a body field that says otherwise than the URL or a
// header (where).
func reconcile(field, body, other, where string) error {
	if body != "" && other != "" && body != other {
		return fieldError(field, "the body says "+strconv.Quote(body)+" but "+where+" says "+strconv.Quote(other))
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// unsupportedSkillType is 415 naming the media types accepted.
func unsupportedSkillType(got string) error {
	st := status.New(codes.InvalidArgument, "Content-Type "+strconv.Quote(got)+" is not a skill: send the SKILL.md as text/markdown, "+
		"the skill folder as application/zip, application/x-tar or application/gzip (tar.gz), "+
		"or a JSON GatewayServicePutSkillRequest as application/json")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonMediaType, Domain: "baagent.dev"}); err == nil {
		st = d
	}
	return st.Err()
}

// skillLocation is the URL of a stored skill.
func skillLocation(name, project string) string {
	u := "/v1/skills/" + url.PathEscape(name)
	if project != "" {
		u += "?project=" + url.QueryEscape(project)
	}
	return u
}

// getSkill reads one skill for tenant (GetSkill's call, shared with HTTP).
func (s *Server) getSkill(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetSkillRequest) (*baagentv1.GatewayServiceGetSkillResponse, error) {
	if err := s.peerReady(s.opts.Skills == nil, "skills"); err != nil {
		return nil, err
	}
	resp, err := s.opts.Skills.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: tenant, Project: req.GetProject(), Name: req.GetName(), Level: req.GetLevel()})
	if err != nil {
		return nil, peerError(ctx, "skills", "GetSkill", err)
	}
	return &baagentv1.GatewayServiceGetSkillResponse{Metadata: resp.GetMetadata(), Body: resp.GetBody(), Resources: resp.GetResources()}, nil
}
