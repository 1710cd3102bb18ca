package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// The pattern RPCs of recordingMemory (memory_test.go).

var testPattern = &baagentv1.InteractionPattern{
	Id: "pt_01", Tenant: "acme", Name: "Regional revenue report", TaskType: "report", Version: 3,
	State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, Steps: []*baagentv1.PatternStep{{Description: "Query revenue", Tools: []string{"sql_query"}}},
}

func (m *recordingMemory) ListPatterns(_ context.Context, req *baagentv1.ListPatternsRequest) (*baagentv1.ListPatternsResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.ListPatternsResponse{Patterns: []*baagentv1.InteractionPattern{testPattern}, NextPageToken: "next"}, nil
}

func (m *recordingMemory) GetPattern(_ context.Context, req *baagentv1.GetPatternRequest) (*baagentv1.GetPatternResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.GetPatternResponse{Pattern: testPattern}, nil
}

func (m *recordingMemory) UpdatePattern(_ context.Context, req *baagentv1.UpdatePatternRequest) (*baagentv1.UpdatePatternResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	p := proto.Clone(testPattern).(*baagentv1.InteractionPattern)
	p.Version++
	if req.GetEdit().Name != nil {
		p.Name = req.GetEdit().GetName()
	}
	return &baagentv1.UpdatePatternResponse{Pattern: p}, nil
}

func (m *recordingMemory) DeletePattern(_ context.Context, req *baagentv1.DeletePatternRequest) (*baagentv1.DeletePatternResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.DeletePatternResponse{}, nil
}

func (m *recordingMemory) MarkPatternUseless(_ context.Context, req *baagentv1.MarkPatternUselessRequest) (*baagentv1.MarkPatternUselessResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.MarkPatternUselessResponse{}, nil
}

func (m *recordingMemory) GrantPattern(_ context.Context, req *baagentv1.GrantPatternRequest) (*baagentv1.GrantPatternResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.GrantPatternResponse{Grant: &baagentv1.PatternGrant{OwnerTenant: req.GetTenant(), PatternId: req.GetId(), GranteeTenant: req.GetGranteeTenant()}}, nil
}

func (m *recordingMemory) RevokePatternGrant(_ context.Context, req *baagentv1.RevokePatternGrantRequest) (*baagentv1.RevokePatternGrantResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.RevokePatternGrantResponse{}, nil
}

func (m *recordingMemory) ListPatternGrants(_ context.Context, req *baagentv1.ListPatternGrantsRequest) (*baagentv1.ListPatternGrantsResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.ListPatternGrantsResponse{Grants: []*baagentv1.PatternGrant{{OwnerTenant: req.GetTenant(), PatternId: "pt_01", GranteeTenant: "globex"}}}, nil
}

// TestPatternGRPCForwardsWithTheKeysTenant calls every pattern RPC and
// checks the memory service was asked with the API key's tenant and the
// request's fields.
func TestPatternGRPCForwardsWithTheKeysTenant(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	ctx := withKey(testCtx(t), keyAcme)
	c := e.client
	edit := &baagentv1.PatternEdit{Name: ptr("Revenue by region"), ReplaceSteps: true,
		Steps:     []*baagentv1.PatternStep{{Description: "Query revenue", Tools: []string{"sql_query"}, Corrections: []string{"filter by fiscal year"}}},
		ToolChain: &baagentv1.ToolChain{Tools: []string{"sql_query", "chart"}}}

	cases := []struct {
		name string
		call func() (proto.Message, error)
		want proto.Message
	}{
		{"ListPatterns", func() (proto.Message, error) {
			return c.ListPatterns(ctx, &baagentv1.GatewayServiceListPatternsRequest{TaskType: "report", State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, IncludeShared: true, PageSize: 20, PageToken: "p"})
		}, &baagentv1.ListPatternsRequest{Tenant: "acme", TaskType: "report", State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, IncludeShared: true, PageSize: 20, PageToken: "p"}},
		{"GetPattern", func() (proto.Message, error) {
			return c.GetPattern(ctx, &baagentv1.GatewayServiceGetPatternRequest{Id: "pt_01"})
		}, &baagentv1.GetPatternRequest{Tenant: "acme", Id: "pt_01"}},
		{"UpdatePattern", func() (proto.Message, error) {
			return c.UpdatePattern(ctx, &baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_01", Edit: edit, ExpectedVersion: 3})
		}, &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: "pt_01", Edit: edit, ExpectedVersion: 3}},
		{"DeletePattern", func() (proto.Message, error) {
			return c.DeletePattern(ctx, &baagentv1.GatewayServiceDeletePatternRequest{Id: "pt_01"})
		}, &baagentv1.DeletePatternRequest{Tenant: "acme", Id: "pt_01"}},
		{"MarkPatternUseless", func() (proto.Message, error) {
			return c.MarkPatternUseless(ctx, &baagentv1.GatewayServiceMarkPatternUselessRequest{Id: "pt_01", Reason: "wrong tools"})
		}, &baagentv1.MarkPatternUselessRequest{Tenant: "acme", Id: "pt_01", Reason: "wrong tools"}},
		{"GrantPattern", func() (proto.Message, error) {
			return c.GrantPattern(ctx, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_01", GranteeTenant: "globex"})
		}, &baagentv1.GrantPatternRequest{Tenant: "acme", Id: "pt_01", GranteeTenant: "globex"}},
		{"RevokePatternGrant", func() (proto.Message, error) {
			return c.RevokePatternGrant(ctx, &baagentv1.GatewayServiceRevokePatternGrantRequest{Id: "pt_01", GranteeTenant: "globex"})
		}, &baagentv1.RevokePatternGrantRequest{Tenant: "acme", Id: "pt_01", GranteeTenant: "globex"}},
		{"ListPatternGrants", func() (proto.Message, error) {
			return c.ListPatternGrants(ctx, &baagentv1.GatewayServiceListPatternGrantsRequest{Id: "pt_01"})
		}, &baagentv1.ListPatternGrantsRequest{Tenant: "acme", Id: "pt_01"}},
		{"GetMemorySettings", func() (proto.Message, error) {
			return c.GetMemorySettings(ctx, &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: "c1"})
		}, &baagentv1.GetMemorySettingsRequest{Tenant: "acme", ConversationId: "c1"}},
		{"UpdateMemorySettings", func() (proto.Message, error) {
			return c.UpdateMemorySettings(ctx, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{PatternsEnabled: ptr(false), ConversationId: "c1", ConversationPatterns: ptr(true)})
		}, &baagentv1.UpdateMemorySettingsRequest{Tenant: "acme", PatternsEnabled: ptr(false), ConversationId: "c1", ConversationPatterns: ptr(true)}},
	}
	for _, tc := range cases {
		resp, err := tc.call()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := mem.last(t); !proto.Equal(got, tc.want) {
			t.Errorf("%s: memory received %v, want %v", tc.name, got, tc.want)
		}
		if resp == nil {
			t.Errorf("%s: no response", tc.name)
		}
	}
	lr, _ := c.ListPatterns(ctx, &baagentv1.GatewayServiceListPatternsRequest{})
	if len(lr.GetPatterns()) != 1 || lr.GetPatterns()[0].GetName() != "Regional revenue report" || lr.GetNextPageToken() != "next" {
		t.Errorf("ListPatterns answer: %v", lr)
	}
	gr, _ := c.GrantPattern(ctx, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_01", GranteeTenant: "globex"})
	if gr.GetGrant().GetOwnerTenant() != "acme" || gr.GetGrant().GetGranteeTenant() != "globex" {
		t.Errorf("GrantPattern answer: %v", gr)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(patOpList, apiGRPC, "OK")); got != 2 {
		t.Errorf("memory_requests_total{op=list_patterns,api=grpc,code=OK} = %v, want 2", got)
	}
}

// TestPatternHTTPRoutes serves every pattern route as another tenant and
// checks what reached the memory service and what came back.
func TestPatternHTTPRoutes(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)

	cases := []struct {
		method, path, body string
		headers            []string
		want               proto.Message // nil: refused with 400 before any call
		field              string        // a top-level field of the answer
	}{
		{"GET", "/v1/patterns?task_type=report&state=active&include_shared=true&page_size=5&page_token=t", "", nil,
			&baagentv1.ListPatternsRequest{Tenant: "initech", TaskType: "report", State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, IncludeShared: true, PageSize: 5, PageToken: "t"}, "patterns"},
		{"GET", "/v1/patterns?state=PATTERN_STATE_DRAFT", "", nil,
			&baagentv1.ListPatternsRequest{Tenant: "initech", State: baagentv1.PatternState_PATTERN_STATE_DRAFT}, "next_page_token"},
		{"GET", "/v1/patterns/pt_01", "", nil, &baagentv1.GetPatternRequest{Tenant: "initech", Id: "pt_01"}, "pattern"},
		{"PATCH", "/v1/patterns/pt_01", `{"name":"Revenue by region","expected_version":3}`, nil,
			&baagentv1.UpdatePatternRequest{Tenant: "initech", Id: "pt_01", Edit: &baagentv1.PatternEdit{Name: ptr("Revenue by region")}, ExpectedVersion: 3}, "pattern"},
		{"PATCH", "/v1/patterns/pt_01", `{"description":"d","steps":[{"description":"Query","tools":["sql_query"]}],"tool_chain":["sql_query","chart"]}`,
			[]string{"If-Match", `"4"`},
			&baagentv1.UpdatePatternRequest{Tenant: "initech", Id: "pt_01", ExpectedVersion: 4, Edit: &baagentv1.PatternEdit{Description: ptr("d"), ReplaceSteps: true,
				Steps: []*baagentv1.PatternStep{{Description: "Query", Tools: []string{"sql_query"}}}, ToolChain: &baagentv1.ToolChain{Tools: []string{"sql_query", "chart"}}}}, "pattern"},
		{"PATCH", "/v1/patterns/pt_01", `{"tool_chain":{"tools":["chart"]},"expected_version":"7"}`, nil,
			&baagentv1.UpdatePatternRequest{Tenant: "initech", Id: "pt_01", ExpectedVersion: 7, Edit: &baagentv1.PatternEdit{ToolChain: &baagentv1.ToolChain{Tools: []string{"chart"}}}}, "pattern"},
		{"PATCH", "/v1/patterns/pt_01", `{"description":"d2","expected_version":null}`, nil,
			&baagentv1.UpdatePatternRequest{Tenant: "initech", Id: "pt_01", Edit: &baagentv1.PatternEdit{Description: ptr("d2")}}, "pattern"},
		{"PATCH", "/v1/patterns/pt_01", `{"toolChain":["chart"],"expectedVersion":"5"}`, nil,
			&baagentv1.UpdatePatternRequest{Tenant: "initech", Id: "pt_01", ExpectedVersion: 5, Edit: &baagentv1.PatternEdit{ToolChain: &baagentv1.ToolChain{Tools: []string{"chart"}}}}, "pattern"},
		{"PATCH", "/v1/patterns/pt_01", `{"tool_chain":["chart"],"toolChain":["sql_query"]}`, nil, nil, ""},
		{"PATCH", "/v1/patterns/pt_01", `{"name":"x","tenant":"acme"}`, nil, nil, ""},
		{"PATCH", "/v1/patterns/pt_01", `{"name":"x","id":"pt_02"}`, nil, nil, ""},
		{"PATCH", "/v1/patterns/pt_01", `{"name":"x","expected_version":2}`, []string{"If-Match", `"3"`}, nil, ""},
		{"DELETE", "/v1/patterns/pt_01", "", nil, &baagentv1.DeletePatternRequest{Tenant: "initech", Id: "pt_01"}, ""},
		{"POST", "/v1/patterns/pt_01/useless", `{"reason":"wrong tools"}`, nil, &baagentv1.MarkPatternUselessRequest{Tenant: "initech", Id: "pt_01", Reason: "wrong tools"}, ""},
		{"POST", "/v1/patterns/pt_01/useless", "", nil, &baagentv1.MarkPatternUselessRequest{Tenant: "initech", Id: "pt_01"}, ""},
		{"POST", "/v1/patterns/pt_01/grants", `{"grantee_tenant":"globex"}`, nil,
			&baagentv1.GrantPatternRequest{Tenant: "initech", Id: "pt_01", GranteeTenant: "globex"}, "grant"},
		{"POST", "/v1/patterns/pt_01/grants", `{"grantee_tenant":"initech"}`, nil, nil, ""},
		{"POST", "/v1/patterns/pt_01/grants", `{"grantee_tenant":"globex","tenant":"acme"}`, nil, nil, ""},
		{"DELETE", "/v1/patterns/pt_01/grants/globex", "", nil, &baagentv1.RevokePatternGrantRequest{Tenant: "initech", Id: "pt_01", GranteeTenant: "globex"}, ""},
		{"GET", "/v1/patterns/grants?id=pt_01", "", nil, &baagentv1.ListPatternGrantsRequest{Tenant: "initech", Id: "pt_01"}, "grants"},
		{"GET", "/v1/patterns/grants", "", nil, &baagentv1.ListPatternGrantsRequest{Tenant: "initech"}, "grants"},
		{"GET", "/v1/memory/settings?conversation_id=c1", "", nil, &baagentv1.GetMemorySettingsRequest{Tenant: "initech", ConversationId: "c1"}, "settings"},
		{"PATCH", "/v1/memory/settings", `{"patterns_enabled":false}`, nil, &baagentv1.UpdateMemorySettingsRequest{Tenant: "initech", PatternsEnabled: ptr(false)}, "settings"},
		{"PATCH", "/v1/memory/settings", `{"conversation_id":"c1","conversation_patterns":false}`, nil,
			&baagentv1.UpdateMemorySettingsRequest{Tenant: "initech", ConversationId: "c1", ConversationPatterns: ptr(false)}, "settings"},
		{"PATCH", "/v1/memory/settings", `{"conversation_patterns":false}`, nil, nil, ""},
	}
	for _, tc := range cases {
		before := mem.count()
		r := e.do(t, keyInitech, tc.method, tc.path, "application/json", []byte(tc.body), tc.headers...)
		if tc.want == nil {
			if r.code != http.StatusBadRequest || mem.count() != before {
				t.Errorf("%s %s %s: %d %s, want 400 and no call", tc.method, tc.path, tc.body, r.code, r.raw)
			}
			continue
		}
		if r.code != http.StatusOK {
			t.Errorf("%s %s %s: %d %s", tc.method, tc.path, tc.body, r.code, r.raw)
			continue
		}
		if got := mem.last(t); !proto.Equal(got, tc.want) {
			t.Errorf("%s %s %s: memory received %v, want %v", tc.method, tc.path, tc.body, got, tc.want)
		}
		if _, ok := r.body[tc.field]; tc.field != "" && !ok {
			t.Errorf("%s %s: answer has no %q: %s", tc.method, tc.path, tc.field, r.raw)
		}
	}
	r := e.do(t, keyInitech, "GET", "/v1/patterns/pt_01", "", nil)
	if r.h.Get("ETag") != `"3"` {
		t.Errorf("GET pattern: ETag %q, want \"3\"", r.h.Get("ETag"))
	}
	r = e.do(t, keyInitech, "PATCH", "/v1/patterns/pt_01", "application/json", []byte(`{"name":"n"}`))
	if r.code != http.StatusOK || r.h.Get("ETag") != `"4"` {
		t.Errorf("PATCH pattern: %d ETag %q, want 200 and \"4\"", r.code, r.h.Get("ETag"))
	}
	if r := e.do(t, "", "GET", "/v1/patterns", "", nil); r.code != http.StatusUnauthorized {
		t.Errorf("no key: %d %s", r.code, r.raw)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(patOpList, apiHTTP, "UNAUTHENTICATED")); got != 1 {
		t.Errorf("memory_requests_total{op=list_patterns,api=http,code=UNAUTHENTICATED} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(patOpUpdate, apiHTTP, "INVALID_ARGUMENT")); got != 4 {
		t.Errorf("memory_requests_total{op=update_pattern,api=http,code=INVALID_ARGUMENT} = %v, want 4", got)
	}
}

// TestPatternUpdateConflict: an edit whose version no longer holds is 412
// over HTTP (FailedPrecondition over gRPC); without a version the memory
// service's FailedPrecondition stays 400.
func TestPatternUpdateConflict(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	mem.setFail(status.Error(codes.FailedPrecondition, "pattern pt_01 is at version 5, not 3"))
	r := e.do(t, keyAcme, "PATCH", "/v1/patterns/pt_01", "application/json", []byte(`{"name":"n"}`), "If-Match", `"3"`)
	if r.code != http.StatusPreconditionFailed || !strings.Contains(r.raw, "version 5") {
		t.Errorf("If-Match conflict: %d %s, want 412", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "PATCH", "/v1/patterns/pt_01", "application/json", []byte(`{"name":"n","expected_version":3}`))
	if r.code != http.StatusPreconditionFailed {
		t.Errorf("expected_version conflict: %d %s, want 412", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "PATCH", "/v1/patterns/pt_01", "application/json", []byte(`{"name":"n"}`))
	if r.code != http.StatusBadRequest {
		t.Errorf("FailedPrecondition without a version: %d %s, want 400", r.code, r.raw)
	}
	_, err := e.client.UpdatePattern(withKey(testCtx(t), keyAcme), &baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_01", Edit: &baagentv1.PatternEdit{Name: ptr("n")}, ExpectedVersion: 3})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("gRPC conflict: %v", err)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(patOpUpdate, apiHTTP, "FAILED_PRECONDITION")); got != 3 {
		t.Errorf("memory_requests_total{op=update_pattern,api=http,code=FAILED_PRECONDITION} = %v, want 3", got)
	}
}

// TestPatternValidation: each malformed request is InvalidArgument naming
// its field, and never reaches the memory service (which answers
// Unimplemented to the valid ones here).
func TestPatternValidation(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t, nil)
	c := e.client
	upd := &baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", Edit: &baagentv1.PatternEdit{Name: ptr("n")}}
	withEdit := func(f func(*baagentv1.PatternEdit)) *baagentv1.GatewayServiceUpdatePatternRequest {
		return vt.With(upd, func(r *baagentv1.GatewayServiceUpdatePatternRequest) { f(r.Edit) })
	}
	step := func(desc string) *baagentv1.PatternStep { return &baagentv1.PatternStep{Description: desc} }
	manySteps := make([]*baagentv1.PatternStep, MaxPatternSteps+1)
	for i := range manySteps {
		manySteps[i] = step("s")
	}
	cases := []vt.Case{
		{Name: "ListPatterns/valid", Call: vt.Call(c.ListPatterns, &baagentv1.GatewayServiceListPatternsRequest{TaskType: "data_quality"})},
		{Name: "ListPatterns/task_type", Call: vt.Call(c.ListPatterns, &baagentv1.GatewayServiceListPatternsRequest{TaskType: "Report!"}), Field: "task_type"},
		{Name: "ListPatterns/long task_type", Call: vt.Call(c.ListPatterns, &baagentv1.GatewayServiceListPatternsRequest{TaskType: strings.Repeat("a", MaxPatternTaskTypeBytes+1)}), Field: "task_type"},
		{Name: "ListPatterns/state", Call: vt.Call(c.ListPatterns, &baagentv1.GatewayServiceListPatternsRequest{State: 42}), Field: "state"},
		{Name: "ListPatterns/page_size", Call: vt.Call(c.ListPatterns, &baagentv1.GatewayServiceListPatternsRequest{PageSize: MaxPageSize + 1}), Field: "page_size"},
		{Name: "ListPatterns/page_token", Call: vt.Call(c.ListPatterns, &baagentv1.GatewayServiceListPatternsRequest{PageToken: "a b"}), Field: "page_token"},
		{Name: "GetPattern/no id", Call: vt.Call(c.GetPattern, &baagentv1.GatewayServiceGetPatternRequest{}), Field: "id"},
		{Name: "GetPattern/bad id", Call: vt.Call(c.GetPattern, &baagentv1.GatewayServiceGetPatternRequest{Id: "../x"}), Field: "id"},
		{Name: "UpdatePattern/valid", Call: vt.Call(c.UpdatePattern, upd)},
		{Name: "UpdatePattern/no edit", Call: vt.Call(c.UpdatePattern, &baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1"}), Field: "edit"},
		{Name: "UpdatePattern/empty edit", Call: vt.Call(c.UpdatePattern, &baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", Edit: &baagentv1.PatternEdit{}}), Field: "edit"},
		{Name: "UpdatePattern/no id", Call: vt.Call(c.UpdatePattern, vt.With(upd, func(r *baagentv1.GatewayServiceUpdatePatternRequest) { r.Id = "" })), Field: "id"},
		{Name: "UpdatePattern/version", Call: vt.Call(c.UpdatePattern, vt.With(upd, func(r *baagentv1.GatewayServiceUpdatePatternRequest) { r.ExpectedVersion = -1 })), Field: "expected_version"},
		{Name: "UpdatePattern/empty name", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) { ed.Name = ptr(" ") })), Field: "edit.name"},
		{Name: "UpdatePattern/long name", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) { ed.Name = ptr(strings.Repeat("n", MaxPatternNameBytes+1)) })), Field: "edit.name"},
		{Name: "UpdatePattern/long description", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) {
			ed.Description = ptr(strings.Repeat("d", MaxPatternDescriptionBytes+1))
		})), Field: "edit.description"},
		{Name: "UpdatePattern/steps without replace", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) { ed.Steps = []*baagentv1.PatternStep{step("s")} })), Field: "edit.replace_steps"},
		{Name: "UpdatePattern/replace with none", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) { ed.ReplaceSteps = true })), Field: "edit.steps"},
		{Name: "UpdatePattern/too many steps", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) { ed.ReplaceSteps, ed.Steps = true, manySteps })), Field: "edit.steps"},
		{Name: "UpdatePattern/step description", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) {
			ed.ReplaceSteps, ed.Steps = true, []*baagentv1.PatternStep{step("ok"), step("")}
		})), Field: "edit.steps[1].description"},
		{Name: "UpdatePattern/step tool", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) {
			ed.ReplaceSteps, ed.Steps = true, []*baagentv1.PatternStep{{Description: "s", Tools: []string{"a\x01b"}}}
		})), Field: "edit.steps[0].tools[0]"},
		{Name: "UpdatePattern/step corrections", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) {
			ed.ReplaceSteps, ed.Steps = true, []*baagentv1.PatternStep{{Description: "s", Corrections: make([]string, MaxPatternStepCorrections+1)}}
		})), Field: "edit.steps[0].corrections"},
		{Name: "UpdatePattern/empty tool chain", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) { ed.ToolChain = &baagentv1.ToolChain{} })), Field: "edit.tool_chain.tools"},
		{Name: "UpdatePattern/long tool chain", Call: vt.Call(c.UpdatePattern, withEdit(func(ed *baagentv1.PatternEdit) {
			ed.ToolChain = &baagentv1.ToolChain{Tools: strings.Split(strings.Repeat("t,", MaxPatternToolChain)+"t", ",")}
		})), Field: "edit.tool_chain.tools"},
		{Name: "DeletePattern/no id", Call: vt.Call(c.DeletePattern, &baagentv1.GatewayServiceDeletePatternRequest{}), Field: "id"},
		{Name: "MarkPatternUseless/valid", Call: vt.Call(c.MarkPatternUseless, &baagentv1.GatewayServiceMarkPatternUselessRequest{Id: "pt_1", Reason: "why"})},
		{Name: "MarkPatternUseless/reason", Call: vt.Call(c.MarkPatternUseless, &baagentv1.GatewayServiceMarkPatternUselessRequest{Id: "pt_1", Reason: strings.Repeat("r", MaxPatternReasonBytes+1)}), Field: "reason"},
		{Name: "GrantPattern/valid", Call: vt.Call(c.GrantPattern, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_1", GranteeTenant: "globex"})},
		{Name: "GrantPattern/no grantee", Call: vt.Call(c.GrantPattern, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_1"}), Field: "grantee_tenant"},
		{Name: "GrantPattern/self", Call: vt.Call(c.GrantPattern, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_1", GranteeTenant: "acme"}), Field: "grantee_tenant"},
		{Name: "GrantPattern/bad grantee", Call: vt.Call(c.GrantPattern, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_1", GranteeTenant: "a/b"}), Field: "grantee_tenant"},
		{Name: "RevokePatternGrant/no id", Call: vt.Call(c.RevokePatternGrant, &baagentv1.GatewayServiceRevokePatternGrantRequest{GranteeTenant: "globex"}), Field: "id"},
		{Name: "ListPatternGrants/valid", Call: vt.Call(c.ListPatternGrants, &baagentv1.GatewayServiceListPatternGrantsRequest{})},
		{Name: "ListPatternGrants/id", Call: vt.Call(c.ListPatternGrants, &baagentv1.GatewayServiceListPatternGrantsRequest{Id: " "}), Field: "id"},
		{Name: "UpdateMemorySettings/patterns", Call: vt.Call(c.UpdateMemorySettings, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{PatternsEnabled: ptr(false)})},
		{Name: "UpdateMemorySettings/conversation patterns without conversation", Call: vt.Call(c.UpdateMemorySettings,
			&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationPatterns: ptr(false)}), Field: "conversation_id"},
		{Name: "UpdateMemorySettings/conversation patterns", Call: vt.Call(c.UpdateMemorySettings,
			&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationId: "c1", ConversationPatterns: ptr(false)})},
	}
	for i := range cases {
		call := cases[i].Call
		cases[i].Call = func(ctx context.Context) error { return call(withKey(ctx, keyAcme)) }
	}
	vt.Run(t, cases)
}

// TestPatternHTTPRequestErrors: malformed queries, headers and bodies are
// 400 naming what is wrong, before any call; a body over the limit is 413.
func TestPatternHTTPRequestErrors(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	for path, field := range map[string]string{
		"/v1/patterns?state=done":                          "state",
		"/v1/patterns?include_shared=maybe":                "include_shared",
		"/v1/patterns?page_size=x":                         "page_size",
		"/v1/patterns?page_size=100000":                    "page_size",
		"/v1/patterns?task_type=" + url.QueryEscape("a b"): "task_type",
		"/v1/patterns/grants?id=" + url.QueryEscape("a b"): "id",
	} {
		r := e.do(t, keyAcme, "GET", path, "", nil)
		if r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), field) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, r.code, r.raw, field)
		}
	}
	for _, tc := range []struct {
		body, ifMatch, field string
	}{
		{"", "", "body"},
		{`[1]`, "", "body"},
		{`{"name":`, "", "body"},
		{`{}`, "", "edit"},
		{`{"name":"n","expected_version":"x"}`, "", "expected_version"},
		{`{"name":"n","expected_version":1.5}`, "", "expected_version"},
		{`{"name":"n"}`, "W/\"3\"", "If-Match"},
		{`{"name":"n"}`, "*", "If-Match"},
		{`{"name":"n"}`, `"0"`, "If-Match"},
		{`{"name":"n"}`, `"3", "4"`, "If-Match"},
		{`{"tool_chain":[1]}`, "", "body"},
		{`{"steps":[]}`, "", "edit.steps"},
	} {
		var h []string
		if tc.ifMatch != "" {
			h = []string{"If-Match", tc.ifMatch}
		}
		r := e.do(t, keyAcme, "PATCH", "/v1/patterns/pt_1", "application/json", []byte(tc.body), h...)
		if r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), tc.field) {
			t.Errorf("PATCH %s (If-Match %s): %d %s, want 400 naming %s", tc.body, tc.ifMatch, r.code, r.raw, tc.field)
		}
	}
	r := e.do(t, keyAcme, "POST", "/v1/patterns/pt_1/useless", "application/json", []byte(`{"id":"pt_2"}`))
	if r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), "id") {
		t.Errorf("POST useless with another id: %d %s", r.code, r.raw)
	}
	big := []byte(`{"name":"` + strings.Repeat("n", int(e.srv.opts.MaxBodyBytes)) + `"}`)
	if r := e.do(t, keyAcme, "PATCH", "/v1/patterns/pt_1", "application/json", big); r.code != http.StatusRequestEntityTooLarge {
		t.Errorf("PATCH over the body limit: %d %s", r.code, r.raw)
	}
	if n := mem.count(); n != 0 {
		t.Errorf("the memory service received %d requests, want none", n)
	}
}

// TestPatternPeerErrors: NotFound (also the answer to another tenant's id)
// passes through as 404, an old memory service's Unimplemented is 501
// naming the RPC, one that is down is 503, and a gateway without one
// answers as the memory routes do.
func TestPatternPeerErrors(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	mem.setFail(status.Error(codes.NotFound, "pattern pt_9 not found"))
	if r := e.do(t, keyAcme, "GET", "/v1/patterns/pt_9", "", nil); r.code != http.StatusNotFound || !strings.Contains(r.raw, "pt_9 not found") {
		t.Errorf("NotFound: %d %s", r.code, r.raw)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(patOpGet, apiHTTP, "NOT_FOUND")); got != 1 {
		t.Errorf("memory_requests_total{op=get_pattern,api=http,code=NOT_FOUND} = %v, want 1", got)
	}
	mem.setFail(status.Error(codes.Unavailable, "store closed"))
	_, err := e.client.ListPatterns(withKey(testCtx(t), keyAcme), &baagentv1.GatewayServiceListPatternsRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "memory service is unavailable") {
		t.Errorf("Unavailable: %v", err)
	}

	old := newMemoryEnv(t, nil) // implements nothing
	if r := old.do(t, keyAcme, "GET", "/v1/patterns", "", nil); r.code != http.StatusNotImplemented || !strings.Contains(r.raw, "ListPatterns") {
		t.Errorf("Unimplemented: %d %s", r.code, r.raw)
	}

	none := newEnv(t, Options{})
	if r := none.do(t, keyAcme, "GET", "/v1/patterns", "", nil); r.code != http.StatusServiceUnavailable || !strings.Contains(r.raw, "no memory connection") {
		t.Errorf("no memory peer: %d %s", r.code, r.raw)
	}
	_, err = none.client.GetPattern(withKey(testCtx(t), keyAcme), &baagentv1.GatewayServiceGetPatternRequest{Id: "pt_1"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("no memory peer over gRPC: %v", err)
	}
}

// FuzzPatternHandlers feeds arbitrary requests to the pattern RPCs: never
// a panic, always InvalidArgument or (from a memory service that
// implements nothing) Unimplemented.
func FuzzPatternHandlers(f *testing.F) {
	opts := unimplementedPeers(f, Options{})
	opts.Memory = baagentv1.NewMemoryServiceClient(vt.Serve(f, func(grpc.ServiceRegistrar) {}))
	s := New(opts)
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.ListPatterns),
		vt.Handler(s.GetPattern),
		vt.Handler(s.UpdatePattern),
		vt.Handler(s.DeletePattern),
		vt.Handler(s.MarkPatternUseless),
		vt.Handler(s.GrantPattern),
		vt.Handler(s.RevokePatternGrant),
		vt.Handler(s.ListPatternGrants),
	}
	corpus := []proto.Message{
		&baagentv1.GatewayServiceListPatternsRequest{TaskType: "report", State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, PageSize: 10},
		&baagentv1.GatewayServiceGetPatternRequest{Id: "pt_1"},
		&baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", ExpectedVersion: 2, Edit: &baagentv1.PatternEdit{Name: ptr("n"), ReplaceSteps: true,
			Steps: []*baagentv1.PatternStep{{Description: "s", Tools: []string{"sql_query"}}}, ToolChain: &baagentv1.ToolChain{Tools: []string{"a"}}}},
		&baagentv1.GatewayServiceDeletePatternRequest{Id: "pt_1"},
		&baagentv1.GatewayServiceMarkPatternUselessRequest{Id: "pt_1", Reason: "r"},
		&baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_1", GranteeTenant: "globex"},
		&baagentv1.GatewayServiceRevokePatternGrantRequest{Id: "pt_1", GranteeTenant: "globex"},
		&baagentv1.GatewayServiceListPatternGrantsRequest{Id: "pt_1"},
	}
	for i, m := range corpus {
		f.Add(uint8(i), vt.Marshal(f, m))
	}
	for i, h := range handlers {
		handlers[i] = func(ctx context.Context, data []byte) (bool, error) { return h(loopback(ctx), data) }
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		vt.Fuzz(t, handlers, which, data)
	})
}

// FuzzPatternListQuery parses arbitrary query strings of GET /v1/patterns:
// never a panic; parse errors are InvalidArgument; a query that parses and
// validates is within the memory service's limits.
func FuzzPatternListQuery(f *testing.F) {
	for _, s := range []string{"task_type=report&state=active&include_shared=1&page_size=5", "state=PATTERN_STATE_DRAFT&page_token=abc",
		"state=&include_shared=&page_size=", "state=%ff&page_size=-1", "include_shared=yes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := &http.Request{URL: &url.URL{RawQuery: raw}}
		req, err := parseListPatternsQuery(r)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("parse error is not InvalidArgument: %v", err)
			}
			return
		}
		if validateListPatterns(req) != nil {
			return
		}
		if len(req.GetTaskType()) > MaxPatternTaskTypeBytes || req.GetPageSize() < 0 || req.GetPageSize() > MaxPageSize {
			t.Fatalf("valid request out of limits: %v", req)
		}
		if _, ok := baagentv1.PatternState_name[int32(req.GetState())]; !ok {
			t.Fatalf("valid request with an unknown state: %v", req)
		}
	})
}

// FuzzPatternEditBody parses arbitrary PATCH bodies and If-Match headers:
// never a panic; errors are InvalidArgument; a body that parses and
// validates is an edit within the limits, of the path's pattern.
func FuzzPatternEditBody(f *testing.F) {
	for _, s := range []struct{ body, ifMatch string }{
		{`{"name":"n","expected_version":3}`, ""},
		{`{"steps":[{"description":"s","tools":["a"],"corrections":["c"]}],"tool_chain":["a","b"]}`, `"4"`},
		{`{"tool_chain":{"tools":["a"]},"expected_version":"2"}`, "2"},
		{`{"id":"pt_1","description":""}`, `W/"1"`},
		{`{"replace_steps":true,"steps":[]}`, "*"},
		{`null`, ""},
	} {
		f.Add(s.body, s.ifMatch)
	}
	f.Fuzz(func(t *testing.T, body, ifMatch string) {
		v, err := parseVersionTag(ifMatch)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("If-Match error is not InvalidArgument: %v", err)
			}
		} else if v < 0 {
			t.Fatalf("negative version %d from %q", v, ifMatch)
		}
		req, err := parsePatternEditBody([]byte(body), "pt_1")
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("body error is not InvalidArgument: %v", err)
			}
			return
		}
		if req.GetId() != "pt_1" {
			t.Fatalf("id %q, want the path's", req.GetId())
		}
		if validateUpdatePattern(req) != nil {
			return
		}
		ed := req.GetEdit()
		if len(ed.GetSteps()) > MaxPatternSteps || len(ed.GetToolChain().GetTools()) > MaxPatternToolChain || len(ed.GetName()) > MaxPatternNameBytes ||
			(ed.GetReplaceSteps() && len(ed.GetSteps()) == 0) || req.GetExpectedVersion() < 0 {
			t.Fatalf("valid edit out of limits: %v", req)
		}
	})
}
