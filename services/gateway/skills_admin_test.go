package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

const skillMD = "---\nname: board-brief\ndescription: Board brief.\n---\n# Board brief\n"

// newSkillsEnv is a gateway whose skills peer is the in-memory fake, with
// the system skills sales-analysis and sql-helper.
func newSkillsEnv(t *testing.T, opts Options) (*env, *fakeSkills) {
	t.Helper()
	f := newFakeSkills("sales-analysis", "sql-helper")
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterSkillsServiceServer(gs, f) })
	opts.Skills = baagentv1.NewSkillsServiceClient(conn)
	return newEnv(t, opts), f
}

// httpReply is an HTTP answer: status, headers and the JSON body.
type httpReply struct {
	code int
	h    http.Header
	body map[string]any
	raw  string
}

func (r httpReply) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (r httpReply) errFields() string {
	e, _ := r.body["error"].(map[string]any)
	return fmt.Sprint(e["fields"])
}

// do sends one request with key (none if empty) and headers (name, value
// pairs).
func (e *env) do(t *testing.T, key, method, path, contentType string, body []byte, headers ...string) httpReply {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, e.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return httpReply{code: resp.StatusCode, h: resp.Header, body: m, raw: string(raw)}
}

func names(r httpReply) []string {
	var out []string
	list, _ := r.body["skills"].([]any)
	for _, s := range list {
		m, _ := s.(map[string]any)
		n, _ := m["name"].(string)
		out = append(out, n)
	}
	return out
}

func skillField(r httpReply, field string) any {
	m, _ := r.body["skill"].(map[string]any)
	return m[field]
}

// TestSkillsHTTPLifecycle creates, replaces, reads, lists, disables and
// deletes skills over HTTP as one tenant, with the preconditions and
// ETags, and checks another tenant sees none of it.
func TestSkillsHTTPLifecycle(t *testing.T) {
	t.Parallel()
	e, f := newSkillsEnv(t, Options{})

	r := e.do(t, keyAcme, "PUT", "/v1/skills/board-brief", "text/markdown; charset=utf-8", []byte(skillMD))
	if r.code != http.StatusCreated || r.h.Get("ETag") != `"1"` || r.h.Get("Location") != "/v1/skills/board-brief" ||
		skillField(r, "revision") != "1" || r.body["replaced"] != nil {
		t.Fatalf("create: %d %v %s", r.code, r.h, r.raw)
	}
	p := f.lastPut()
	if p.GetTenant() != "acme" || p.GetName() != "board-brief" || p.GetProject() != "" || string(p.GetContent()) != skillMD ||
		p.GetFormat() != baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD || p.GetIfMatch() != "" || p.GetIfNoneMatch() {
		t.Fatalf("forwarded %v", p)
	}

	// Create-only on an existing skill, and a stale If-Match: 412.
	r = e.do(t, keyAcme, "PUT", "/v1/skills/board-brief", "text/markdown", []byte(skillMD), "If-None-Match", "*")
	if r.code != http.StatusPreconditionFailed || r.errCode() != "ABORTED" {
		t.Fatalf("If-None-Match: * on an existing skill: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "PUT", "/v1/skills/board-brief", "text/markdown", []byte(skillMD), "If-Match", `"7"`)
	if r.code != http.StatusPreconditionFailed || !strings.Contains(r.raw, "not at revision 7") {
		t.Fatalf("stale If-Match: %d %s", r.code, r.raw)
	}
	// The current revision replaces: 200, replaced, a new ETag.
	r = e.do(t, keyAcme, "PUT", "/v1/skills/board-brief", "text/markdown", []byte(skillMD), "If-Match", `"1"`)
	if r.code != http.StatusOK || r.body["replaced"] != true || r.h.Get("ETag") != `"2"` || f.lastPut().GetIfMatch() != "1" {
		t.Fatalf("replace: %d %v %s", r.code, r.h, r.raw)
	}

	// A project skill.
	r = e.do(t, keyAcme, "PUT", "/v1/skills/sql-helper?project=north", "text/markdown", []byte(skillMD))
	if r.code != http.StatusCreated || r.h.Get("Location") != "/v1/skills/sql-helper?project=north" || f.lastPut().GetProject() != "north" {
		t.Fatalf("project skill: %d %v %s", r.code, r.h, r.raw)
	}

	// Read one: the ETag is its revision.
	r = e.do(t, keyAcme, "GET", "/v1/skills/board-brief?level=1", "", nil)
	if r.code != http.StatusOK || r.h.Get("ETag") != `"2"` {
		t.Fatalf("get: %d %v %s", r.code, r.h, r.raw)
	}

	// Lists by scope.
	for scope, want := range map[string]string{
		"tenant":                    "[board-brief]",
		"SKILL_SCOPE_FILTER_TENANT": "[board-brief]",
		"system":                    "[sales-analysis sql-helper]",
		"":                          "[sales-analysis sql-helper board-brief]",
	} {
		r = e.do(t, keyAcme, "GET", "/v1/skills?scope="+scope, "", nil)
		if got := fmt.Sprint(names(r)); r.code != http.StatusOK || got != want {
			t.Errorf("scope %q: %d %s, want %s", scope, r.code, got, want)
		}
	}
	r = e.do(t, keyAcme, "GET", "/v1/skills?scope=project&project=north", "", nil)
	if got := fmt.Sprint(names(r)); r.code != http.StatusOK || got != "[sql-helper]" {
		t.Errorf("project scope: %d %s", r.code, got)
	}

	// Disable a system skill for the tenant; the system listing says so
	// and the effective one leaves it out.
	r = e.do(t, keyAcme, "PUT", "/v1/skills/sales-analysis/state", "application/json", []byte(`{"disabled":true}`))
	if r.code != http.StatusOK || skillField(r, "is_disabled") != true {
		t.Fatalf("disable: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "GET", "/v1/skills?scope=system", "", nil)
	if !strings.Contains(r.raw, `"is_disabled":true`) {
		t.Errorf("system listing after disable: %s", r.raw)
	}
	r = e.do(t, keyAcme, "GET", "/v1/skills", "", nil)
	if got := fmt.Sprint(names(r)); got != "[sql-helper board-brief]" {
		t.Errorf("effective listing after disable: %s", got)
	}
	r = e.do(t, keyAcme, "PUT", "/v1/skills/no-such/state", "application/json", []byte(`{"disabled":true}`))
	if r.code != http.StatusNotFound {
		t.Errorf("disable an unknown system skill: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "PUT", "/v1/skills/sales-analysis/state", "application/json", []byte(`{"disabled":false}`))
	if r.code != http.StatusOK || skillField(r, "is_disabled") != nil {
		t.Fatalf("enable: %d %s", r.code, r.raw)
	}

	// The other tenant sees none of acme's skills or states.
	r = e.do(t, keyInitech, "GET", "/v1/skills?scope=all", "", nil)
	if got := fmt.Sprint(names(r)); got != "[sales-analysis sql-helper]" {
		t.Errorf("initech sees %s", got)
	}
	r = e.do(t, keyInitech, "DELETE", "/v1/skills/board-brief", "", nil)
	if r.code != http.StatusNotFound {
		t.Errorf("initech deletes acme's skill: %d %s", r.code, r.raw)
	}

	// Delete: a stale If-Match is 412, the current one deletes.
	r = e.do(t, keyAcme, "DELETE", "/v1/skills/board-brief", "", nil, "If-Match", "1")
	if r.code != http.StatusPreconditionFailed {
		t.Fatalf("delete with a stale revision: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "DELETE", "/v1/skills/board-brief", "", nil, "If-Match", `"2"`)
	if r.code != http.StatusOK || r.body["revision"] != "2" {
		t.Fatalf("delete: %d %s", r.code, r.raw)
	}
	if r = e.do(t, keyAcme, "GET", "/v1/skills/board-brief", "", nil); r.code != http.StatusNotFound {
		t.Fatalf("get after delete: %d %s", r.code, r.raw)
	}

	// Metrics count the writes by outcome.
	ok := testutil.ToFloat64(e.srv.skillMetrics.writes.WithLabelValues(skillOpPut, apiHTTP, "OK"))
	aborted := testutil.ToFloat64(e.srv.skillMetrics.writes.WithLabelValues(skillOpPut, apiHTTP, "ABORTED"))
	if ok != 3 || aborted != 2 {
		t.Errorf("skill_writes_total put/http: OK %v ABORTED %v, want 3 and 2", ok, aborted)
	}
}

// TestSkillsHTTPUploadFormats sends the skill in every accepted encoding
// and checks what is refused, and how.
func TestSkillsHTTPUploadFormats(t *testing.T) {
	t.Parallel()
	e, f := newSkillsEnv(t, Options{MaxSkillBytes: 4096})
	for ct, want := range map[string]baagentv1.SkillArchiveFormat{
		"application/zip":          baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP,
		"application/x-tar":        baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR,
		"application/gzip":         baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ,
		"application/octet-stream": baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_UNSPECIFIED,
	} {
		r := e.do(t, keyAcme, "PUT", "/v1/skills/board-brief", ct, []byte("PK\x03\x04 archive bytes"))
		if r.code >= 300 || f.lastPut().GetFormat() != want || string(f.lastPut().GetContent()) != "PK\x03\x04 archive bytes" {
			t.Errorf("%s: %d %s, forwarded format %v", ct, r.code, r.raw, f.lastPut().GetFormat())
		}
	}

	// JSON: the protobuf mapping, content in base64, preconditions in
	// the body.
	body := fmt.Sprintf(`{"content":%q,"format":"SKILL_ARCHIVE_FORMAT_SKILL_MD","if_none_match":true}`, base64.StdEncoding.EncodeToString([]byte(skillMD)))
	r := e.do(t, keyAcme, "PUT", "/v1/skills/json-skill?project=p1", "application/json", []byte(body))
	p := f.lastPut()
	if r.code != http.StatusCreated || p.GetName() != "json-skill" || p.GetProject() != "p1" || !p.GetIfNoneMatch() || string(p.GetContent()) != skillMD {
		t.Fatalf("JSON: %d %s; forwarded %v", r.code, r.raw, p)
	}

	cases := []struct {
		name, ct, body string
		headers        []string
		code           int
		errCode, field string
	}{
		{"no content type", "", skillMD, nil, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", ""},
		{"text/plain", "text/plain", skillMD, nil, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", ""},
		{"form", "multipart/form-data; boundary=x", skillMD, nil, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", ""},
		{"empty", "text/markdown", "", nil, http.StatusBadRequest, "INVALID_ARGUMENT", "content"},
		{"over the limit", "application/zip", strings.Repeat("x", 4097), nil, http.StatusRequestEntityTooLarge, "RESOURCE_EXHAUSTED", "body"},
		{"bad archive (the service says)", "application/zip", "bad zip", nil, http.StatusBadRequest, "INVALID_ARGUMENT", ""},
		{"JSON content over the limit", "application/json", fmt.Sprintf(`{"content":%q}`, base64.StdEncoding.EncodeToString(make([]byte, 4097))), nil, http.StatusBadRequest, "INVALID_ARGUMENT", "content"},
		{"JSON names another skill", "application/json", `{"name":"other","content":"eA=="}`, nil, http.StatusBadRequest, "INVALID_ARGUMENT", "name"},
		{"JSON names another project", "application/json", `{"project":"p2","content":"eA=="}`, nil, http.StatusBadRequest, "INVALID_ARGUMENT", "project"},
		{"broken JSON", "application/json", `{"content":`, nil, http.StatusBadRequest, "INVALID_ARGUMENT", "body"},
		{"unknown format", "application/json", `{"content":"eA==","format":9}`, nil, http.StatusBadRequest, "INVALID_ARGUMENT", "format"},
		{"If-Match *", "text/markdown", skillMD, []string{"If-Match", "*"}, http.StatusBadRequest, "INVALID_ARGUMENT", "If-Match"},
		{"weak If-Match", "text/markdown", skillMD, []string{"If-Match", `W/"1"`}, http.StatusBadRequest, "INVALID_ARGUMENT", "If-Match"},
		{"If-Match list", "text/markdown", skillMD, []string{"If-Match", `"1", "2"`}, http.StatusBadRequest, "INVALID_ARGUMENT", "If-Match"},
		{"If-None-Match tag", "text/markdown", skillMD, []string{"If-None-Match", `"1"`}, http.StatusBadRequest, "INVALID_ARGUMENT", "If-None-Match"},
		{"both preconditions", "text/markdown", skillMD, []string{"If-Match", `"1"`, "If-None-Match", "*"}, http.StatusBadRequest, "INVALID_ARGUMENT", "if_none_match"},
		{"uppercase name", "text/markdown", skillMD, nil, http.StatusBadRequest, "INVALID_ARGUMENT", "name"},
	}
	for _, c := range cases {
		path := "/v1/skills/board-brief"
		if c.name == "uppercase name" {
			path = "/v1/skills/Board"
		}
		r := e.do(t, keyAcme, "PUT", path+"?project=p1", c.ct, []byte(c.body), c.headers...)
		if r.code != c.code || r.errCode() != c.errCode || !strings.Contains(r.errFields(), c.field) {
			t.Errorf("%s: %d %s; want %d %s naming %q", c.name, r.code, r.raw, c.code, c.errCode, c.field)
		}
	}
	r = e.do(t, keyAcme, "PUT", "/v1/skills/board-brief?project=a.b", "text/markdown", []byte(skillMD))
	if r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), "project") {
		t.Errorf("a project that is not a token: %d %s", r.code, r.raw)
	}
}

// TestSkillsHTTPListAndAuth: listing filters are validated, and nothing
// is read or validated before the caller is authenticated.
func TestSkillsHTTPListAndAuth(t *testing.T) {
	t.Parallel()
	e, f := newSkillsEnv(t, Options{})
	for path, field := range map[string]string{
		"/v1/skills?scope=everything":    "scope",
		"/v1/skills?scope=System":        "scope",
		"/v1/skills?scope=project":       "project",
		"/v1/skills/board-brief?level=7": "level",
	} {
		if r := e.do(t, keyAcme, "GET", path, "", nil); r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), field) {
			t.Errorf("%s: %d %s; want 400 naming %s", path, r.code, r.raw, field)
		}
	}
	r := e.do(t, keyAcme, "GET", "/v1/skills?scope=all&include_invalid=true", "", nil)
	f.mu.Lock()
	last := f.lists[len(f.lists)-1]
	f.mu.Unlock()
	if r.code != http.StatusOK || last.GetScope() != baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL || !last.GetIncludeInvalid() || last.GetTenant() != "acme" {
		t.Errorf("scope=all: %d, forwarded %v", r.code, last)
	}

	for _, c := range []struct{ method, path, ct, body string }{
		{"PUT", "/v1/skills/Bad", "text/plain", "x"},
		{"DELETE", "/v1/skills/board-brief", "", ""},
		{"PUT", "/v1/skills/board-brief/state", "application/json", "{"},
		{"GET", "/v1/skills?scope=bogus", "", ""},
	} {
		if r := e.do(t, "", c.method, c.path, c.ct, []byte(c.body)); r.code != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d %s", c.method, c.path, r.code, r.raw)
		}
	}
	if got := f.lastPut(); got != nil {
		t.Errorf("an unauthenticated PUT reached the skills service: %v", got)
	}
}

// TestSkillsStoreOff: a skills service without its store answers
// Unimplemented, which the caller gets with the service's reason.
func TestSkillsStoreOff(t *testing.T) {
	t.Parallel()
	e, f := newSkillsEnv(t, Options{})
	f.setOff(true)
	r := e.do(t, keyAcme, "PUT", "/v1/skills/board-brief", "text/markdown", []byte(skillMD))
	if r.code != http.StatusNotImplemented || !strings.Contains(r.raw, "skill store is off") {
		t.Errorf("HTTP: %d %s", r.code, r.raw)
	}
	_, err := e.client.DeleteSkill(withKey(testCtx(t), keyAcme), &baagentv1.GatewayServiceDeleteSkillRequest{Name: "board-brief"})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "skill store is off") {
		t.Errorf("gRPC: %v", err)
	}
}

// TestSkillsGRPC manages skills over gRPC: tenant from the key, codes
// passed through.
func TestSkillsGRPC(t *testing.T) {
	t.Parallel()
	e, f := newSkillsEnv(t, Options{})
	ctx := withKey(testCtx(t), keyInitech)
	put, err := e.client.PutSkill(ctx, &baagentv1.GatewayServicePutSkillRequest{Name: "board-brief", Content: []byte(skillMD), IfNoneMatch: true})
	if err != nil || put.GetSkill().GetRevision() != "1" || put.GetReplaced() || f.lastPut().GetTenant() != "initech" {
		t.Fatalf("put: %v %v", put, err)
	}
	_, err = e.client.PutSkill(ctx, &baagentv1.GatewayServicePutSkillRequest{Name: "board-brief", Content: []byte(skillMD), IfNoneMatch: true})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("create twice: %v", err)
	}
	_, err = e.client.PutSkill(ctx, &baagentv1.GatewayServicePutSkillRequest{Name: "board-brief", Content: []byte("bad")})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad archive: %v", err)
	}
	st, err := e.client.SetSystemSkillState(ctx, &baagentv1.GatewayServiceSetSystemSkillStateRequest{Name: "sql-helper", Disabled: true, Project: "p1"})
	if err != nil || !st.GetSkill().GetIsDisabled() {
		t.Fatalf("disable: %v %v", st, err)
	}
	list, err := e.client.ListSkills(ctx, &baagentv1.GatewayServiceListSkillsRequest{Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM, Project: "p1"})
	if err != nil || len(list.GetSkills()) != 2 || !list.GetSkills()[1].GetIsDisabled() {
		t.Fatalf("list: %v %v", list, err)
	}
	del, err := e.client.DeleteSkill(ctx, &baagentv1.GatewayServiceDeleteSkillRequest{Name: "board-brief", IfMatch: "1"})
	if err != nil || del.GetRevision() != "1" {
		t.Fatalf("delete: %v %v", del, err)
	}
	if _, err = e.client.DeleteSkill(ctx, &baagentv1.GatewayServiceDeleteSkillRequest{Name: "board-brief"}); status.Code(err) != codes.NotFound {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err = e.client.PutSkill(testCtx(t), &baagentv1.GatewayServicePutSkillRequest{Name: "x", Content: []byte("x")}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no key: %v", err)
	}
	if n := testutil.ToFloat64(e.srv.skillMetrics.writes.WithLabelValues(skillOpPut, apiGRPC, "ABORTED")); n != 1 {
		t.Errorf("skill_writes_total put/grpc ABORTED = %v", n)
	}
}

// TestSkillsUploadWithoutKeys: with no API keys (loopback, tenant
// default) the browser guard lets a skill upload through with its own
// media type, but not as text/plain, which a page of another site could
// send.
func TestSkillsUploadWithoutKeys(t *testing.T) {
	t.Parallel()
	e, f := newSkillsEnv(t, Options{APIKeys: map[string]string{}})
	r := e.do(t, "", "PUT", "/v1/skills/board-brief", "text/markdown", []byte(skillMD))
	if r.code != http.StatusCreated || f.lastPut().GetTenant() != DefaultTenant {
		t.Fatalf("upload: %d %s", r.code, r.raw)
	}
	r = e.do(t, "", "PUT", "/v1/skills/board-brief", "text/plain", []byte(skillMD))
	if r.code != http.StatusUnsupportedMediaType || !strings.Contains(r.raw, "Content-Type: application/json") {
		t.Fatalf("text/plain: %d %s", r.code, r.raw)
	}
	r = e.do(t, "", "PUT", "/v1/skills/sales-analysis/state", "text/markdown", []byte(`{"disabled":true}`))
	if r.code != http.StatusUnsupportedMediaType {
		t.Fatalf("state as text/markdown: %d %s", r.code, r.raw)
	}
	r = e.do(t, "", "POST", "/v1/runs", "application/zip", []byte("x"))
	if r.code != http.StatusUnsupportedMediaType {
		t.Fatalf("an archive type on another route: %d %s", r.code, r.raw)
	}
	r = e.do(t, "", "DELETE", "/v1/skills/board-brief", "application/json", nil)
	if r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.raw)
	}
}

func TestParseIfMatch(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{{"", ""}, {`"12"`, "12"}, {"12", "12"}, {" \"a:b\"\t", "a:b"}} {
		if got, err := parseIfMatch(c[0]); err != nil || got != c[1] {
			t.Errorf("%q: %q %v, want %q", c[0], got, err, c[1])
		}
	}
	for _, h := range []string{"*", `W/"1"`, `"1", "2"`, `"`, `""`, `"a"b"`, "a b", `"1`, "1,2"} {
		if got, err := parseIfMatch(h); err == nil {
			t.Errorf("%q: accepted as %q", h, got)
		}
	}
}

// FuzzSkillHTTP sends arbitrary skill requests (media type, preconditions,
// query, body) to the HTTP handler: never a panic or a 5xx other than the
// peer's 501, never a header the parser accepted that the edge rules do
// not.
func FuzzSkillHTTP(f *testing.F) {
	s := New(unimplementedPeers(f, Options{APIKeys: map[string]string{}, MaxSkillBytes: 1 << 10}))
	h := s.Handler()
	f.Add("PUT", "board-brief", "project=p1", "text/markdown", `"1"`, "", []byte(skillMD))
	f.Add("PUT", "board-brief", "", "application/json", "", "*", []byte(`{"content":"eA==","if_match":"3"}`))
	f.Add("PUT", "board-brief/state", "project=x", "application/json", "", "", []byte(`{"disabled":true}`))
	f.Add("DELETE", "board-brief", "", "application/json", "W/\"1\"", "", []byte(nil))
	f.Add("GET", "board-brief", "level=3", "", "", "", []byte(nil))
	f.Add("GET", "", "scope=system&project=a", "", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, method, path, query, ct, ifMatch, ifNone string, body []byte) {
		switch method {
		case "GET", "PUT", "DELETE":
		default:
			method = "PUT"
		}
		u := "/v1/skills/" + path
		if path == "" {
			u = "/v1/skills"
		}
		req, err := http.NewRequestWithContext(context.Background(), method, "http://127.0.0.1"+u, bytes.NewReader(body))
		if err != nil {
			return // not a URL a client could send
		}
		req.URL.RawQuery = query
		req.RemoteAddr = "127.0.0.1:5000"
		for k, v := range map[string]string{"Content-Type": ct, "If-Match": ifMatch, "If-None-Match": ifNone} {
			if v != "" {
				req.Header[k] = []string{v}
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch c := rec.Code; {
		case c == http.StatusNotImplemented, c < 500:
		default:
			t.Fatalf("%s %s?%s: %d %s", method, u, query, c, rec.Body)
		}
		if rev, err := parseIfMatch(ifMatch); err == nil && rev != "" && strings.ContainsAny(rev, "\" ,") {
			t.Fatalf("If-Match %q parsed as %q", ifMatch, rev)
		}
	})
}
