package skills

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestActivationStackCycles(t *testing.T) {
	t.Parallel()

	s := NewActivationStack(0)
	if err := s.Push("a", "1"); err != nil {
		t.Fatal(err)
	}
	// Direct: a skill activating itself.
	err := s.Push("a", "2")
	if !errors.Is(err, ErrCircularDependency) || err.Error() != "Circular dependency detected: a → a" {
		t.Fatalf("direct cycle: %v", err)
	}
	if err := s.Push("b", "2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Push("c", "3"); err != nil {
		t.Fatal(err)
	}
	// Indirect: a → b → c → a, the full path in the message.
	err = s.Push("a", "4")
	if !errors.Is(err, ErrCircularDependency) || err.Error() != "Circular dependency detected: a → b → c → a" {
		t.Fatalf("indirect cycle: %v", err)
	}
	err = s.Push("b", "4")
	if err == nil || err.Error() != "Circular dependency detected: a → b → c → b" {
		t.Fatalf("indirect cycle to the middle: %v", err)
	}
	if got := s.Chain(); !slices.Equal(got, []string{"a", "b", "c"}) || s.Depth() != 3 || !s.Contains("b") || s.Contains("d") {
		t.Fatalf("a refused push changed the stack: %v", got)
	}
}

func TestActivationStackDepthLimit(t *testing.T) {
	t.Parallel()

	s := NewActivationStack(DefaultMaxDepth)
	for i, n := range []string{"a", "b", "c"} {
		if err := s.Push(n, string(rune('1'+i))); err != nil {
			t.Fatalf("push %s: %v", n, err)
		}
	}
	err := s.Push("d", "4")
	if !errors.Is(err, ErrMaxDepth) || err.Error() != "Maximum skill activation depth (3) exceeded. Current stack: a → b → c" {
		t.Fatalf("depth: %v", err)
	}
	// Completing the innermost frees a slot.
	if err := s.Pop("c", "3"); err != nil {
		t.Fatal(err)
	}
	if err := s.Push("d", "4"); err != nil {
		t.Fatalf("push after pop: %v", err)
	}
	one := NewActivationStack(1)
	_ = one.Push("a", "1")
	if err := one.Push("b", "2"); !errors.Is(err, ErrMaxDepth) {
		t.Fatalf("max depth 1: %v", err)
	}
}

func TestActivationStackPopMismatch(t *testing.T) {
	t.Parallel()

	s := NewActivationStack(3)
	err := s.Pop("a", "1")
	if !errors.Is(err, ErrStackMismatch) || !strings.Contains(err.Error(), `pop of "a" from an empty activation stack`) {
		t.Fatalf("empty pop: %v", err)
	}
	_ = s.Push("a", "1")
	_ = s.Push("b", "2")
	for _, c := range []struct{ name, id, want string }{
		{"a", "1", `Stack mismatch: expected "b" (activation "2") but got "a" (activation "1")`},
		{"b", "9", `Stack mismatch: expected "b" (activation "2") but got "b" (activation "9")`},
	} {
		if err := s.Pop(c.name, c.id); !errors.Is(err, ErrStackMismatch) || err.Error() != c.want {
			t.Errorf("pop %s/%s: %v", c.name, c.id, err)
		}
	}
	if s.Depth() != 2 {
		t.Fatalf("a mismatched pop popped: depth %d", s.Depth())
	}
	if err := s.Pop("b", "2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Pop("a", "1"); err != nil || s.Depth() != 0 {
		t.Fatalf("pop a: %v, depth %d", err, s.Depth())
	}
}

func TestActivationStackConcurrentUse(t *testing.T) {
	t.Parallel()

	s := NewActivationStack(64)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_ = s.Push("skill-"+string(rune('a'+i)), "x")
				_ = s.Chain()
				_ = s.Pop("skill-"+string(rune('a'+i)), "x")
			}
		}()
	}
	wg.Wait()
	if s.Depth() > 8 {
		t.Fatalf("depth %d after balanced pushes and pops", s.Depth())
	}
}

func TestCheckActivation(t *testing.T) {
	t.Parallel()

	cases := []struct {
		chain    []string
		depth    int
		maxDepth int
		name     string
		want     string // error text, or the chain after the push joined by " "
		kind     error
	}{
		{nil, 0, 0, "a", "a", nil},
		{[]string{"a"}, 1, 0, "b", "a b", nil},
		{[]string{"a", "b"}, 0, 0, "c", "a b c", nil},
		{[]string{"a"}, 0, 0, "a", "Circular dependency detected: a → a", ErrCircularDependency},
		{[]string{"a", "b", "c"}, 3, 5, "a", "Circular dependency detected: a → b → c → a", ErrCircularDependency},
		{[]string{"a", "b", "a"}, 0, 5, "c", "Circular dependency detected: a → b → a", ErrCircularDependency},
		{[]string{"a", "b", "c"}, 0, 0, "d", "Maximum skill activation depth (3) exceeded. Current stack: a → b → c", ErrMaxDepth},
		{[]string{"a"}, 0, 1, "b", "Maximum skill activation depth (1) exceeded. Current stack: a", ErrMaxDepth},
		{[]string{"a", "b"}, 1, 0, "c", "Stack mismatch: activation_depth is 1 but activation_chain holds 2 skills (a → b)", ErrStackMismatch},
		{nil, 2, 0, "c", "Stack mismatch: activation_depth is 2 but activation_chain holds 0 skills ()", ErrStackMismatch},
	}
	for _, c := range cases {
		got, err := checkActivation(c.chain, c.depth, c.maxDepth, c.name, "id")
		if c.kind == nil {
			if err != nil || strings.Join(got, " ") != c.want {
				t.Errorf("%v + %s: %v, %v", c.chain, c.name, got, err)
			}
			continue
		}
		if !errors.Is(err, c.kind) || err.Error() != c.want {
			t.Errorf("%v (depth %d, max %d) + %s: %v, want %q", c.chain, c.depth, c.maxDepth, c.name, err, c.want)
		}
	}
}

func activationRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		addSkill(t, root, "", n, "Skill "+n+".")
	}
	addSkill(t, root, "", "restricted", "Restricted skill.", "allowed-tools: sql_query file_read", "model: gpt-4o-mini",
		"disable-model-invocation: true", "version: 2.0.0")
	writeFile(t, root, "restricted/references/guide.md", "# Guide\nUse SUM.")
	writeFile(t, root, "tenants/t/tenant.yaml", "disabled_skills: [d]\n")
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

	_, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "a", ActivationChain: []string{"a"}})
	refusedResult(t, err, "Circular dependency detected: a → a")
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "a", ActivationChain: []string{"a", "b", "c"}, ActivationDepth: 3, MaxDepth: 5})
	refusedResult(t, err, "Circular dependency detected: a → b → c → a")
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "d", ActivationChain: []string{"a", "b", "c"}})
	refusedResult(t, err, "Maximum skill activation depth (3) exceeded. Current stack: a → b → c")
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "c", ActivationChain: []string{"a", "b"}, MaxDepth: 2})
	refusedResult(t, err, "Maximum skill activation depth (2) exceeded. Current stack: a → b")
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "c", ActivationChain: []string{"a", "b"}, ActivationDepth: 3})
	refusedResult(t, err, "Stack mismatch: activation_depth is 3 but activation_chain holds 2 skills (a → b)")
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "d"})
	refusedResult(t, err, `skill "d" is not available to tenant "t": disabled by tenant.yaml (disabled_skills)`)
	if _, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "zzz"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown skill: %v", err)
	}
	// The depth is checked before the skill is looked up: a cycle through a
	// skill that does not exist is still a cycle.
	_, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "zzz", ActivationChain: []string{"zzz"}})
	refusedResult(t, err, "Circular dependency detected: zzz → zzz")

	for result, want := range map[string]float64{"cycle": 3, "depth": 2, "mismatch": 1, "unavailable": 1, "not_found": 1} {
		if got := testutil.ToFloat64(s.metrics.activations.WithLabelValues(result)); got != want {
			t.Errorf("activations{result=%q} = %v, want %v", result, got, want)
		}
	}
}

func TestActivateSkillResult(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, activationRoot(t))
	res, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "restricted", ActivationId: "act-7",
		ActivationChain: []string{"a", "b"}, ActivationDepth: 2, UserRequest: "sales by region"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetSuccess() || res.GetActivationId() != "act-7" || res.GetSkillName() != "restricted" ||
		!slices.Equal(res.GetActivationChain(), []string{"a", "b", "restricted"}) || res.GetScope() != baagentv1.SkillScope_SKILL_SCOPE_SYSTEM {
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
	if !strings.Contains(m[1].GetContent(), "Instructions of restricted.") || !strings.Contains(m[1].GetContent(), "- references/guide.md") {
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
	res, err = activate(s, &baagentv1.SkillActivationRequest{SkillName: "restricted", LoadLevel: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES})
	if err != nil || len(res.GetMessages()) != 4 || !strings.Contains(res.GetMessages()[2].GetContent(), "<skill_resource skill=\"restricted\" path=\"references/guide.md\">\n# Guide\nUse SUM.\n</skill_resource>") {
		t.Fatalf("level 3: %v, %v", res, err)
	}
}
