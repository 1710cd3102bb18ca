package skills

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

type (
	listReq     = baagentv1.ListSkillsRequest
	getReq      = baagentv1.GetSkillRequest
	catalogReq  = baagentv1.GetCatalogRequest
	activateReq = baagentv1.ActivateSkillRequest
	resourceReq = baagentv1.ReadSkillResourceRequest
)

var (
	validList     = &listReq{Tenant: "acme", Project: "p1", IncludeInvalid: true}
	validGet      = &getReq{Tenant: "acme", Name: "sales-analysis", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS}
	validCatalog  = &catalogReq{Tenant: "acme", Model: "gpt-4o", TokenBudget: 2000}
	validActivate = &activateReq{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "sales-analysis", ActivationId: "act_1", ConversationId: "conv-1", UserRequest: "revenue by region",
		ConversationHistory: []*baagentv1.ChatMessage{{Role: baagentv1.Role_ROLE_USER, Content: "revenue by region"}},
		ActivationChain:     []string{"executive-summary"}, ActivationDepth: 1, MaxDepth: 3, Tenant: "acme",
	}}
	validResource = &resourceReq{Tenant: "acme", SkillName: "sales-analysis", Path: "references/schema.md", Limit: 100}
)

func TestServiceName(t *testing.T) {
	t.Parallel()

	if ServiceName != baagentv1.SkillsService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName = %q, generated %q", ServiceName, baagentv1.SkillsService_ServiceDesc.ServiceName)
	}
}

// serveExamples serves the repository's sample skills over loopback gRPC.
func serveExamples(t *testing.T, mutate ...func(*Options)) (*Server, baagentv1.SkillsServiceClient) {
	t.Helper()
	s := newTestServer(t, examplesDir, append([]func(*Options){func(o *Options) { o.MaxHistoryMessages = 4 }}, mutate...)...)
	return s, baagentv1.NewSkillsServiceClient(vt.Serve(t, s.Register))
}

// TestRPCValidation: every RPC over real gRPC, valid requests answered and
// bad ones refused with InvalidArgument naming the field.
func TestRPCValidation(t *testing.T) {
	t.Parallel()

	_, c := serveExamples(t)
	act := func(mutate func(*baagentv1.SkillActivationRequest)) *activateReq {
		return vt.With(validActivate, func(r *activateReq) { mutate(r.Activation) })
	}
	cases := []vt.Case{
		{Name: "ListSkills/valid", Call: vt.Call(c.ListSkills, validList)},
		{Name: "ListSkills/no tenant", Call: vt.Call(c.ListSkills, &listReq{}), Field: "tenant"},
		{Name: "ListSkills/tenant with a dot", Call: vt.Call(c.ListSkills, &listReq{Tenant: "a.b"}), Field: "tenant"},
		{Name: "ListSkills/tenant with a slash", Call: vt.Call(c.ListSkills, &listReq{Tenant: "../acme"}), Field: "tenant"},
		{Name: "ListSkills/project path", Call: vt.Call(c.ListSkills, &listReq{Tenant: "acme", Project: "../p"}), Field: "project"},

		{Name: "GetSkill/valid", Call: vt.Call(c.GetSkill, validGet)},
		{Name: "GetSkill/no name", Call: vt.Call(c.GetSkill, vt.With(validGet, func(r *getReq) { r.Name = "" })), Field: "name"},
		{Name: "GetSkill/name uppercase", Call: vt.Call(c.GetSkill, vt.With(validGet, func(r *getReq) { r.Name = "Sales" })), Field: "name"},
		{Name: "GetSkill/name a path", Call: vt.Call(c.GetSkill, vt.With(validGet, func(r *getReq) { r.Name = "../tenants" })), Field: "name"},
		{Name: "GetSkill/unknown level", Call: vt.Call(c.GetSkill, vt.With(validGet, func(r *getReq) { r.Level = 9 })), Field: "level"},
		{Name: "GetSkill/no tenant", Call: vt.Call(c.GetSkill, vt.With(validGet, func(r *getReq) { r.Tenant = "" })), Field: "tenant"},

		{Name: "GetCatalog/valid", Call: vt.Call(c.GetCatalog, validCatalog)},
		{Name: "GetCatalog/negative budget", Call: vt.Call(c.GetCatalog, vt.With(validCatalog, func(r *catalogReq) { r.TokenBudget = -1 })), Field: "token_budget"},
		{Name: "GetCatalog/model with a space", Call: vt.Call(c.GetCatalog, vt.With(validCatalog, func(r *catalogReq) { r.Model = "gpt 4o" })), Field: "model"},
		{Name: "GetCatalog/no tenant", Call: vt.Call(c.GetCatalog, &catalogReq{}), Field: "tenant"},

		{Name: "ActivateSkill/valid", Call: vt.Call(c.ActivateSkill, validActivate)},
		{Name: "ActivateSkill/no activation", Call: vt.Call(c.ActivateSkill, &activateReq{}), Field: "activation"},
		{Name: "ActivateSkill/no skill name", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.SkillName = "" })), Field: "activation.skill_name"},
		{Name: "ActivateSkill/no activation id", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.ActivationId = "" })), Field: "activation.activation_id"},
		{Name: "ActivateSkill/bad conversation id", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.ConversationId = "a b" })), Field: "activation.conversation_id"},
		{Name: "ActivateSkill/no tenant", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.Tenant = "" })), Field: "activation.tenant"},
		{Name: "ActivateSkill/bad project", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.Project = "/p" })), Field: "activation.project"},
		{Name: "ActivateSkill/unknown level", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.LoadLevel = 7 })), Field: "activation.load_level"},
		{Name: "ActivateSkill/negative depth", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.ActivationDepth = -1 })), Field: "activation.activation_depth"},
		{Name: "ActivateSkill/max depth too large", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) { a.MaxDepth = MaxDepthLimit + 1 })), Field: "activation.max_depth"},
		{Name: "ActivateSkill/bad chain entry", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) {
			a.ActivationChain = []string{"ok", "Not_OK"}
			a.ActivationDepth = 2
		})), Field: "activation.activation_chain[1]"},
		{Name: "ActivateSkill/chain too long", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) {
			a.ActivationChain = make([]string, MaxActivationChain+1)
			for i := range a.ActivationChain {
				a.ActivationChain[i] = "s"
			}
			a.ActivationDepth = 0
		})), Field: "activation.activation_chain"},
		{Name: "ActivateSkill/history too long", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) {
			for range 4 {
				a.ConversationHistory = append(a.ConversationHistory, a.ConversationHistory[0])
			}
		})), Field: "activation.conversation_history"},
		{Name: "ActivateSkill/history message without role", Call: vt.Call(c.ActivateSkill, act(func(a *baagentv1.SkillActivationRequest) {
			a.ConversationHistory[0].Role = 0
		})), Field: "activation.conversation_history[0].role"},

		{Name: "ReadSkillResource/valid", Call: vt.Call(c.ReadSkillResource, validResource)},
		{Name: "ReadSkillResource/no path", Call: vt.Call(c.ReadSkillResource, vt.With(validResource, func(r *resourceReq) { r.Path = "" })), Field: "path"},
		{Name: "ReadSkillResource/parent path", Call: vt.Call(c.ReadSkillResource, vt.With(validResource, func(r *resourceReq) { r.Path = "../executive-summary/SKILL.md" })), Field: "path"},
		{Name: "ReadSkillResource/absolute path", Call: vt.Call(c.ReadSkillResource, vt.With(validResource, func(r *resourceReq) { r.Path = "/etc/passwd" })), Field: "path"},
		{Name: "ReadSkillResource/negative offset", Call: vt.Call(c.ReadSkillResource, vt.With(validResource, func(r *resourceReq) { r.Offset = -1 })), Field: "offset"},
		{Name: "ReadSkillResource/negative limit", Call: vt.Call(c.ReadSkillResource, vt.With(validResource, func(r *resourceReq) { r.Limit = -1 })), Field: "limit"},
		{Name: "ReadSkillResource/no skill", Call: vt.Call(c.ReadSkillResource, vt.With(validResource, func(r *resourceReq) { r.SkillName = "" })), Field: "skill_name"},
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Call(t.Context())
			if tc.Field == "" {
				if err != nil {
					t.Fatalf("valid request failed: %v", err)
				}
				return
			}
			vt.WantInvalid(t, err, tc.Field)
		})
	}
}

// TestRPCsOverGRPC exercises each RPC's answer through a real client.
func TestRPCsOverGRPC(t *testing.T) {
	t.Parallel()

	_, c := serveExamples(t)
	ctx := t.Context()

	list, err := c.ListSkills(ctx, &listReq{Tenant: "acme", IncludeInvalid: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetInvalid()) != 0 {
		t.Errorf("the samples have invalid skills: %v", list.GetInvalid())
	}
	if len(list.GetSkills()) < 3 {
		t.Fatalf("acme sees %v", skillNames(list.GetSkills()))
	}

	got, err := c.GetSkill(ctx, &getReq{Tenant: "default", Name: "sales-analysis", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetMetadata().GetLicense() != "Apache-2.0" || got.GetBody() == "" || len(got.GetResources()) != 1 ||
		!strings.Contains(got.GetResources()[0].GetContent(), "| orders |") {
		t.Fatalf("sales-analysis level 3: %v", got)
	}

	var header metadata.MD
	cat, err := c.GetCatalog(ctx, &catalogReq{Tenant: "default", TokenBudget: 4000}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cat.GetText(), "<available_skills>\n") || cat.GetSkillCount() < 3 || cat.GetTokens() > 4000 {
		t.Fatalf("catalog %v", cat)
	}
	if got := header.Get(TokenSourceHeader); len(got) != 1 || got[0] != "estimate" {
		t.Errorf("%s header = %v, want estimate", TokenSourceHeader, got)
	}
	// From the cache, the header is still there.
	header = nil
	if _, err := c.GetCatalog(ctx, &catalogReq{Tenant: "default", TokenBudget: 4000}, grpc.Header(&header)); err != nil || len(header.Get(TokenSourceHeader)) != 1 {
		t.Errorf("cached catalog header %v, %v", header, err)
	}

	act, err := c.ActivateSkill(ctx, validActivate)
	if err != nil {
		t.Fatal(err)
	}
	// acme's executive-summary does not name sales-analysis (the system
	// one does): a sibling, its scope ends.
	if !act.GetResult().GetSuccess() || strings.Join(act.GetResult().GetActivationChain(), ",") != "sales-analysis" ||
		strings.Join(act.GetResult().GetEnded(), ",") != "executive-summary" {
		t.Fatalf("activation %v", act)
	}

	// A cycle over gRPC: FailedPrecondition with the path, and the failed
	// result as a detail.
	_, err = c.ActivateSkill(ctx, vt.With(validActivate, func(r *activateReq) {
		r.Activation.ActivationChain = []string{"sales-analysis", "executive-summary", "sales-analysis"}
		r.Activation.ActivationDepth = 3
	}))
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "Circular dependency detected: sales-analysis → executive-summary → sales-analysis" {
		t.Fatalf("cycle: %v", err)
	}
	if len(st.Details()) != 1 {
		t.Fatalf("cycle details: %v", st.Details())
	}
	if r, ok := st.Details()[0].(*baagentv1.ActivateSkillResponse); !ok || r.GetResult().GetSuccess() || r.GetResult().GetError() != st.Message() {
		t.Fatalf("cycle detail: %v", st.Details()[0])
	}

	res, err := c.ReadSkillResource(ctx, validResource)
	if err != nil || len(res.GetContent()) > 100 || res.GetNextOffset() == 0 || res.GetSizeBytes() <= 100 {
		t.Fatalf("resource page: %v, %v", res, err)
	}
	if _, err := c.GetSkill(ctx, &getReq{Tenant: "default", Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown skill: %v", err)
	}
}

// TestNilAndInvalidUTF8Requests calls the handlers directly: no panic, and
// the fields named.
func TestNilAndInvalidUTF8Requests(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, t.TempDir())
	ctx := t.Context()
	_, err := s.ListSkills(ctx, nil)
	vt.WantInvalid(t, err, "tenant")
	_, err = s.GetSkill(ctx, nil)
	vt.WantInvalid(t, err, "name")
	_, err = s.GetCatalog(ctx, nil)
	vt.WantInvalid(t, err, "tenant")
	_, err = s.ActivateSkill(ctx, nil)
	vt.WantInvalid(t, err, "activation")
	_, err = s.ReadSkillResource(ctx, nil)
	vt.WantInvalid(t, err, "path")
	_, err = s.ActivateSkill(ctx, &activateReq{Activation: &baagentv1.SkillActivationRequest{SkillName: "a", ActivationId: "x", Tenant: "t", UserRequest: "\xff"}})
	vt.WantInvalid(t, err, "activation.user_request")
	_, err = s.ReadSkillResource(ctx, &resourceReq{Tenant: "t", SkillName: "a", Path: "a\xff"})
	vt.WantInvalid(t, err, "path")
}

// FuzzHandlers feeds arbitrary bytes, decoded as each request type, to the
// handlers over the sample skills: never a panic, and never an Internal or
// Unknown error.
func FuzzHandlers(f *testing.F) {
	s := newTestServer(f, examplesDir)
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.ListSkills),
		vt.Handler(s.GetSkill),
		vt.Handler(s.GetCatalog),
		vt.Handler(s.ActivateSkill),
		vt.Handler(s.ReadSkillResource),
	}
	f.Add(uint8(0), vt.Marshal(f, validList))
	f.Add(uint8(1), vt.Marshal(f, validGet))
	f.Add(uint8(2), vt.Marshal(f, validCatalog))
	f.Add(uint8(2), vt.Marshal(f, &catalogReq{Tenant: "acme", TokenBudget: 70}))
	f.Add(uint8(3), vt.Marshal(f, validActivate))
	f.Add(uint8(4), vt.Marshal(f, validResource))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		h := handlers[int(which)%len(handlers)]
		ok, err := h(t.Context(), data)
		if !ok {
			return
		}
		switch status.Code(err) {
		case codes.Internal, codes.Unknown, codes.Unimplemented:
			t.Fatalf("handler %d: %v", int(which)%len(handlers), err)
		}
	})
}
