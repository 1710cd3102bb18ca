package skills

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestPlanActivation checks the activation rule: a skill is nested only
// in an active skill whose instructions name it; otherwise scopes end.
func TestPlanActivation(t *testing.T) {
	t.Parallel()

	// parent → the skills its instructions name.
	naming := map[string][]string{"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}}
	cases := []struct {
		chain    []string
		depth    int
		maxDepth int
		name     string
		want     string // chain after, "| ended", "already" — or the error text
		kind     error
	}{
		{nil, 0, 0, "a", "a |", nil},
		{[]string{"a"}, 1, 0, "b", "a b |", nil},                     // a names b: nested
		{[]string{"x"}, 0, 0, "b", "b | x", nil},                     // x names nothing: its scope ends
		{[]string{"b"}, 0, 0, "x", "x | b", nil},                     // b does not name x
		{[]string{"x", "y"}, 0, 0, "z", "z | y x", nil},              // every scope ends, innermost first
		{[]string{"a", "x"}, 0, 0, "b", "a b | x", nil},              // x ends, a names b
		{[]string{"a"}, 0, 0, "a", "a | already", nil},               // innermost again: a no-op
		{[]string{"a", "b", "x"}, 0, 0, "b", "a b | x already", nil}, // back to b after x ends
		{[]string{"a", "b"}, 0, 5, "a", `Circular dependency detected: a → b → a (the instructions of "b" name "a", which is already active further out)`, ErrCircularDependency},
		{[]string{"a", "b", "a"}, 0, 5, "c", "Circular dependency detected: a → b → a", ErrCircularDependency},
		{[]string{"b", "c", "d"}, 0, 0, "e", `Maximum skill activation depth (3) exceeded: "e" would be nested in b → c → d, each skill's instructions naming the next`, ErrMaxDepth},
		{[]string{"b", "c", "d"}, 0, 4, "e", "b c d e |", nil},
		{[]string{"a", "b"}, 1, 0, "c", "Stack mismatch: activation_depth is 1 but activation_chain holds 2 skills (a → b)", ErrStackMismatch},
		{nil, 2, 0, "c", "Stack mismatch: activation_depth is 2 but activation_chain holds 0 skills ()", ErrStackMismatch},
	}
	for _, c := range cases {
		p, err := planActivation(c.chain, c.depth, c.maxDepth, c.name, func(parent string) bool {
			return slices.Contains(naming[parent], c.name)
		})
		if c.kind == nil {
			got := strings.Join(p.chain, " ") + " | " + strings.Join(p.ended, " ")
			if p.alreadyActive {
				got += " already"
			}
			if err != nil || strings.Join(strings.Fields(got), " ") != c.want {
				t.Errorf("%v + %s: %q, %v; want %q", c.chain, c.name, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, c.kind) || err.Error() != c.want {
			t.Errorf("%v (depth %d, max %d) + %s: %v, want %q", c.chain, c.depth, c.maxDepth, c.name, err, c.want)
		}
	}
}

// TestPlanActivationSequences: A, B, A with no naming is three siblings,
// and unrelated skills never reach the depth limit.
func TestPlanActivationSequences(t *testing.T) {
	t.Parallel()

	none := func(string) bool { return false }
	var chain []string
	var log []string
	for _, n := range []string{"a", "b", "a", "c", "d", "e", "f"} {
		p, err := planActivation(chain, len(chain), 0, n, none)
		if err != nil {
			t.Fatalf("%v + %s: %v", chain, n, err)
		}
		chain = p.chain
		log = append(log, strings.Join(p.chain, ",")+"/"+strings.Join(p.ended, ","))
	}
	if want := "a/ b/a a/b c/a d/c e/d f/e"; strings.Join(log, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(log, " "), want)
	}
}

func TestNamesSkill(t *testing.T) {
	t.Parallel()

	cases := []struct {
		body, name string
		want       bool
	}{
		{"Then use the sales-report skill.", "sales-report", true},
		{"Run /sales-report for the table.", "sales-report", true},
		{"See [the report](../sales-report/SKILL.md).", "sales-report", true},
		{"Use Sales-Report.", "sales-report", true},
		{"使用sales-report技能", "sales-report", true},
		{"Use the sales-reporting skill.", "sales-report", false},
		{"Use the sales-report-v2 skill.", "sales-report", false},
		{"Use the big-sales-report skill.", "sales-report", false},
		{"sales_report", "sales-report", false},
		{"", "a", false},
		{"a", "", false},
		{"x sales-report", "sales-report", true},
	}
	for _, c := range cases {
		if got := namesSkill(c.body, c.name); got != c.want {
			t.Errorf("namesSkill(%q, %q) = %v", c.body, c.name, got)
		}
	}
}

func activationRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	// a names b, b names a and c, c names d: a → b → c → d nest.
	bodies := map[string]string{"a": "Then use b.", "b": "Go back to /a, or on to c.", "c": "See [d](../d/SKILL.md).", "d": "Alone."}
	for n, body := range bodies {
		writeFile(t, root, n+"/SKILL.md", "---\nname: "+n+"\ndescription: Skill "+n+".\n---\n"+body+"\n")
	}
	addSkill(t, root, "", "e", "Skill e.")
	addSkill(t, root, "", "restricted", "Restricted skill.", "allowed-tools: sql_query file_read", "model: gpt-4o-mini",
		"disable-model-invocation: true", "version: 2.0.0")
	writeFile(t, root, "restricted/references/guide.md", "# Guide\nUse SUM.")
	writeFile(t, root, "tenants/t/tenant.yaml", "disabled_skills: [e]\n")
	return root
}

func activate(s *Server, a *baagentv1.SkillActivationRequest) (*baagentv1.SkillActivationResult, error) {
	if a.Tenant == "" {
		a.Tenant = "t"
	}
	if a.ActivationId == "" {
		a.ActivationId = "act-1"
	}
	resp, err := s.ActivateSkill(context.Background(), &baagentv1.ActivateSkillRequest{Activation: a})
	return resp.GetResult(), err
}

// refusedResult checks a FailedPrecondition whose message is want and whose
// detail is the failed SkillActivationResult.
func refusedResult(t *testing.T, err error, want string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != want {
		t.Fatalf("got %v, want FailedPrecondition %q", err, want)
	}
	for _, d := range st.Details() {
		if r, ok := d.(*baagentv1.ActivateSkillResponse); ok {
			if r.GetResult().GetSuccess() || r.GetResult().GetError() != want || r.GetResult().GetActivationId() == "" {
				t.Fatalf("detail %v", r)
			}
			return
		}
	}
	t.Fatalf("no ActivateSkillResponse detail in %v", st.Details())
}

func TestActivateSkillRefusals(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	s := newTestServer(t, activationRoot(t), func(o *Options) { o.Registerer = reg })

	_, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "a", ActivationChain: []string{"a", "b"}, ActivationDepth: 2, MaxDepth: 5})
	refusedResult(t, err, `Circular dependency detected: a → b → a (the instructions of "b" name "a", which is already active further out)`)
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "d", ActivationChain: []string{"a", "b", "c"}})
	refusedResult(t, err, `Maximum skill activation depth (3) exceeded: "d" would be nested in a → b → c, each skill's instructions naming the next`)
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "c", ActivationChain: []string{"a", "b"}, MaxDepth: 2})
	refusedResult(t, err, `Maximum skill activation depth (2) exceeded: "c" would be nested in a → b, each skill's instructions naming the next`)
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "c", ActivationChain: []string{"a", "b"}, ActivationDepth: 3})
	refusedResult(t, err, "Stack mismatch: activation_depth is 3 but activation_chain holds 2 skills (a → b)")
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "e"})
	refusedResult(t, err, `skill "e" is not available to tenant "t": disabled by tenant.yaml (disabled_skills)`)
	if _, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "zzz"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown skill: %v", err)
	}
	// disable-model-invocation: the model (origin MODEL, or unset) may not
	// activate it; the user, a trigger or a restored round may.
	const noModel = `Skill "restricted" cannot be activated by the model: only the user (/restricted in a message) or a trigger may activate it`
	for _, o := range []baagentv1.SkillActivationOrigin{baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_UNSPECIFIED, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL} {
		_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "restricted", Origin: o})
		refusedResult(t, err, noModel)
	}
	for _, o := range []baagentv1.SkillActivationOrigin{baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_TRIGGER, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_RESTORED} {
		res, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "restricted", Origin: o})
		if err != nil || !res.GetSuccess() || res.GetOrigin() != o {
			t.Fatalf("origin %v: %v, %v", o, res, err)
		}
	}
	if _, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "a", Origin: 99}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unknown origin: %v", err)
	}

	for result, want := range map[string]float64{"cycle": 1, "depth": 2, "mismatch": 1, "unavailable": 1, "not_found": 1, "model_disabled": 2, "ok": 3} {
		if got := testutil.ToFloat64(s.metrics.activations.WithLabelValues(result)); got != want {
			t.Errorf("activations{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// TestActivateSkillScopes: over RPC, a sibling ends the active scope, a
// named skill nests, and the innermost skill again is a no-op.
func TestActivateSkillScopes(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, activationRoot(t))
	var chain []string
	step := func(name string, wantChain, wantEnded string, wantAlready bool) {
		t.Helper()
		res, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: name, ActivationChain: chain})
		if err != nil {
			t.Fatalf("%v + %s: %v", chain, name, err)
		}
		if strings.Join(res.GetActivationChain(), ",") != wantChain || strings.Join(res.GetEnded(), ",") != wantEnded || res.GetAlreadyActive() != wantAlready {
			t.Fatalf("%v + %s: chain %v ended %v already %v", chain, name, res.GetActivationChain(), res.GetEnded(), res.GetAlreadyActive())
		}
		if wantAlready != (len(res.GetMessages()) == 0) || res.GetRevision() == "" || res.GetOrigin() != baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL {
			t.Fatalf("%s: messages %d, revision %q, origin %v", name, len(res.GetMessages()), res.GetRevision(), res.GetOrigin())
		}
		chain = res.GetActivationChain()
	}
	step("a", "a", "", false)
	step("b", "a,b", "", false)  // a names b
	step("b", "a,b", "", true)   // already the innermost
	step("d", "d", "b,a", false) // neither b nor a names d
}

func TestActivateSkillResult(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, activationRoot(t))
	res, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "restricted", ActivationId: "act-7",
		ActivationChain: []string{"a", "b"}, ActivationDepth: 2, UserRequest: "sales by region",
		Origin: baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER})
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetSuccess() || res.GetActivationId() != "act-7" || res.GetSkillName() != "restricted" ||
		!slices.Equal(res.GetActivationChain(), []string{"restricted"}) || !slices.Equal(res.GetEnded(), []string{"b", "a"}) ||
		res.GetScope() != baagentv1.SkillScope_SKILL_SCOPE_SYSTEM {
		t.Fatalf("result %v", res)
	}
	cm := res.GetContextModifier()
	if !slices.Equal(cm.GetAllowedTools().GetNames(), []string{"sql_query", "file_read"}) || cm.GetModel() != "gpt-4o-mini" || !cm.GetDisableModelInvocation() {
		t.Fatalf("context modifier %v", cm)
	}
	type msg struct {
		typ baagentv1.SkillMessageType
		vis baagentv1.SkillMessageVisibility
	}
	var got []msg
	for _, m := range res.GetMessages() {
		got = append(got, msg{m.GetType(), m.GetVisibility()})
	}
	want := []msg{
		{baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_METADATA, baagentv1.SkillMessageVisibility_SKILL_MESSAGE_VISIBILITY_VISIBLE},
		{baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_INSTRUCTION, baagentv1.SkillMessageVisibility_SKILL_MESSAGE_VISIBILITY_HIDDEN},
		{baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_PERMISSIONS, baagentv1.SkillMessageVisibility_SKILL_MESSAGE_VISIBILITY_HIDDEN},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	m := res.GetMessages()
	if m[0].GetContent() != `Skill "restricted" activated (system layer, version 2.0.0): Restricted skill.` {
		t.Errorf("metadata message %q", m[0].GetContent())
	}
	if !strings.Contains(m[1].GetContent(), "Instructions of restricted.") || !strings.Contains(m[1].GetContent(), "- references/guide.md (16 bytes)") ||
		!strings.Contains(m[1].GetContent(), `skill_read tool: {"skill": "restricted", "path": "<path below>"}`) {
		t.Errorf("instruction message %q", m[1].GetContent())
	}
	if m[2].GetContent() != `While the "restricted" skill is active, only these tools are allowed: sql_query, file_read; the model is gpt-4o-mini.` {
		t.Errorf("permissions message %q", m[2].GetContent())
	}

	// Level 1: metadata only; level 3: the resources as well.
	res, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "a", LoadLevel: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_METADATA})
	if err != nil || len(res.GetMessages()) != 1 || res.GetContextModifier().GetAllowedTools() != nil {
		t.Fatalf("level 1: %v, %v", res, err)
	}
	res, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "restricted", LoadLevel: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES,
		Origin: baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER})
	if err != nil || len(res.GetMessages()) != 4 || !strings.Contains(res.GetMessages()[2].GetContent(), "<skill_resource skill=\"restricted\" path=\"references/guide.md\">\n# Guide\nUse SUM.\n</skill_resource>") {
		t.Fatalf("level 3: %v, %v", res, err)
	}
}
