package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/skills"
)

// underSkill is what the model is offered under sales-analysis.
var underSkill = []string{"file_read", "sql_query", SkillToolName, SkillReadToolName, AskClarificationTool, AskDecisionTool}

func TestSkillMetaTool(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			if !slices.Contains(toolNames(req), "glob") {
				t.Errorf("before activation, tools %v", toolNames(req))
			}
			return callTools("This is a sales question.", "call_skill_1", SkillToolName, `{"name":"sales-analysis"}`), nil
		case 1:
			// sales-analysis allows sql_query file_read artifact_read;
			// skill_read and the ask tools stay whatever it allows.
			if got := toolNames(req); !slices.Equal(got, underSkill) {
				t.Errorf("after activation, tools %v", got)
			}
			// The skill's messages follow the step's tool results.
			if !slices.ContainsFunc(req.Messages, func(m *baagentv1.ChatMessage) bool {
				return m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION && contains(m.GetContent(), "# Sales analysis")
			}) || req.Messages[len(req.Messages)-1].GetKind() != baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION {
				t.Errorf("skill instructions not injected: %v", req.Messages)
			}
			res := lastToolResults(req)
			if len(res) != 1 || res[0].GetIsError() || !contains(res[0].GetContent(), `Skill "sales-analysis" activated`, "sql_query") {
				t.Errorf("skill observation %v", res)
			}
			return callTools("", "call_skill_2", SkillToolName, `{"skill":"executive-summary"}`), nil
		case 2:
			if got := toolNames(req); !slices.Equal(got, underSkill) {
				t.Errorf("nested skill widened the tools: %v", got)
			}
			return callTools("", "call_sql", "sql_query", `{"query":"SELECT 1"}`, "call_glob", "glob", `{"pattern":"*"}`), nil
		case 3:
			res := lastToolResults(req)
			if len(res) != 2 || res[0].GetIsError() || !res[1].GetIsError() || !contains(res[1].GetContent(), codeUnknownTool) {
				t.Errorf("results under the skill's tools: %v", res)
			}
			return callTools("", "call_cycle", SkillToolName, `{"name":"sales-analysis"}`, "call_missing", SkillToolName, `{"name":"no-such-skill"}`, "call_bad", SkillToolName, `{}`), nil
		case 4:
			res := lastToolResults(req)
			if len(res) != 3 {
				t.Fatalf("results %v", res)
			}
			if !contains(res[0].GetContent(), codeSkillRefused, "Circular dependency detected: sales-analysis → executive-summary → sales-analysis") {
				t.Errorf("cycle observation:\n%s", res[0].GetContent())
			}
			if !contains(res[1].GetContent(), codeSkillNotFound, "no-such-skill") {
				t.Errorf("unknown skill observation:\n%s", res[1].GetContent())
			}
			if !contains(res[2].GetContent(), codeInvalidArguments, "missing the skill name") {
				t.Errorf("bad arguments observation:\n%s", res[2].GetContent())
			}
			return answer("Summary."), nil
		}
		return nil, context.Canceled
	}, harnessOptions{mutate: func(o *Options) {
		// The input matches sales-analysis's triggers: this test is about
		// the model's activations.
		o.SkillTriggers = SkillTriggersOff
	}})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "Summarise sales growth for management"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	var activated []*baagentv1.SkillActivatedPayload
	for _, e := range evs {
		if a := e.GetSkillActivated(); a != nil {
			activated = append(activated, a)
		}
	}
	if len(activated) != 2 ||
		!slices.Equal(activated[0].GetActivationChain(), []string{"sales-analysis"}) ||
		!slices.Equal(activated[1].GetActivationChain(), []string{"sales-analysis", "executive-summary"}) ||
		activated[0].GetScope() != baagentv1.SkillScope_SKILL_SCOPE_SYSTEM ||
		!slices.Equal(activated[0].GetContextModifier().GetAllowedTools().GetNames(), []string{"sql_query", "file_read", "artifact_read"}) {
		t.Errorf("skill_activated events: %v", activated)
	}
	for _, inv := range h.tools.invocations() {
		if inv.GetToolCallId() == "call_sql" {
			if inv.GetCallerId() != "skill:executive-summary" || !slices.Equal(inv.GetAllowedTools().GetNames(), []string{"file_read", "sql_query"}) {
				t.Errorf("invocation under skills: caller %q, allowed %v", inv.GetCallerId(), inv.GetAllowedTools())
			}
		}
	}
	m := evs[len(evs)-1].GetComplete().GetMetrics()
	if m.GetSkillActivations() != 2 || !slices.Equal(m.GetUniqueSkills(), []string{"sales-analysis", "executive-summary"}) {
		t.Errorf("skill metrics: %d %v", m.GetSkillActivations(), m.GetUniqueSkills())
	}
	checkPairing(t, h.ctxSvc.history(run.GetConversationId()))
}

// A skill activation and tool calls of the same step run at once: the
// calls' checkpoints read the skill stack while the activation grows it
// (a data race the load test's race detector once reported).
func TestSkillActivationBesideParallelCalls(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if _, ok := lastToolResult(req); ok {
			return answer("done"), nil
		}
		return callTools("",
			"call_a", "noop", `{"i":1}`,
			"call_skill", SkillToolName, `{"name":"sales-analysis"}`,
			"call_b", "sql_query", `{"query":"SELECT 1"}`,
			"call_c", "glob", `{"pattern":"*"}`,
		), nil
	}, harnessOptions{})
	for range 5 {
		run := h.start(ctx, &baagentv1.RunSpec{Input: "sales"})
		evs := h.events(ctx, run.GetRunId())
		checkEnvelope(t, run, evs)
		if evs[len(evs)-1].GetComplete() == nil || indexOf(types(evs), "skill_activated") < 0 {
			t.Fatalf("events %v", types(evs))
		}
	}
}

// TestSkillReadRealService: skill_read against the real skills service
// reads an active skill's level-3 file (sales-analysis's
// references/schema.md) as numbered lines, from a line offset when given,
// refuses a path out of its folder, and is not offered before a skill is
// active. (The input names no trigger phrase, so no skill starts active.)
func TestSkillReadRealService(t *testing.T) {
	ctx := testCtx(t)
	schema, err := os.ReadFile("../../examples/skills/sales-analysis/references/schema.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(schema), "\n"), "\n")
	n := len(lines)
	h := newHarness(t, func(_ context.Context, call int, req ModelRequest) (*ModelResponse, error) {
		switch call {
		case 0:
			if slices.Contains(toolNames(req), SkillReadToolName) {
				t.Errorf("skill_read offered before an activation: %v", toolNames(req))
			}
			return callTools("", "c0", SkillToolName, `{"name":"sales-analysis"}`), nil
		case 1:
			return callTools("",
				"c1", SkillReadToolName, `{"path":"references/schema.md"}`,
				"c2", SkillReadToolName, fmt.Sprintf(`{"path":"references/schema.md","offset":%d}`, n-1),
				"c3", SkillReadToolName, `{"path":"../executive-summary/SKILL.md"}`,
				"c4", SkillReadToolName, `{"path":"references/none.md","offset":5}`), nil
		case 2:
			res := lastToolResults(req)
			if len(res) != 4 {
				t.Errorf("results %v", res)
				break
			}
			want := fmt.Sprintf("references/schema.md of skill sales-analysis:\n     1\t%s\n     2\t%s\n", lines[0], lines[1])
			if res[0].GetIsError() || !strings.HasPrefix(res[0].GetContent(), want) ||
				!strings.HasSuffix(res[0].GetContent(), fmt.Sprintf("%6d\t%s\n\n(End of file - total %d lines)", n, lines[n-1], n)) {
				t.Errorf("schema.md:\n%s", res[0].GetContent())
			}
			if want := fmt.Sprintf("references/schema.md of skill sales-analysis:\n%6d\t%s\n\n(End of file - total %d lines)", n, lines[n-1], n); res[1].GetContent() != want {
				t.Errorf("last line: %q, want %q", res[1].GetContent(), want)
			}
			if !res[2].GetIsError() || !contains(res[2].GetContent(), codeSkillResource) {
				t.Errorf("path out of the folder: %s", res[2].GetContent())
			}
			if !res[3].GetIsError() || !contains(res[3].GetContent(), codeSkillResource) {
				t.Errorf("missing file: %s", res[3].GetContent())
			}
		}
		return answer("done"), nil
	}, harnessOptions{})
	// No trigger phrase of the example skills: the model activates it.
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Which tables hold the orders?"})
	evs := h.events(ctx, run.GetRunId())
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
}

// TestSkillReadPagesRealService: a resource longer than a page, read
// through the real skills service, comes in line pages whose hint names
// the line to read on from; following the hints shows every line once,
// numbered, and the last page ends with the end-of-file hint.
func TestSkillReadPagesRealService(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	dir := filepath.Join(root, "pager")
	if err := os.MkdirAll(filepath.Join(dir, "references"), 0o750); err != nil {
		t.Fatal(err)
	}
	skillMD := "---\nname: pager\ndescription: Reads a long guide. Use when asked to page.\n---\n# Pager\n\nRead references/guide.md.\n"
	guide := guideText()
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(skillMD), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "references", "guide.md"), []byte(guide), 0o600); err != nil {
		t.Fatal(err)
	}
	sk, err := skills.New(skills.Options{Logger: slog.New(slog.DiscardHandler), Root: root})
	if err != nil {
		t.Fatal(err)
	}
	client := baagentv1.NewSkillsServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { sk.Register(gs) }))

	var pages []string
	h := newHarness(t, func(_ context.Context, call int, req ModelRequest) (*ModelResponse, error) {
		if call == 0 {
			return callTools("", "c0", SkillToolName, `{"name":"pager"}`), nil
		}
		res := lastToolResults(req)
		if call == 1 {
			return callTools("", "r0", SkillReadToolName, `{"path":"references/guide.md"}`), nil
		}
		if len(res) != 1 || res[0].GetIsError() || len(pages) > 10 {
			t.Errorf("page %d: %v", len(pages), res)
			return answer("stop"), nil
		}
		page := res[0].GetContent()
		pages = append(pages, page)
		m := offsetHint.FindStringSubmatch(page)
		if m == nil {
			return answer("read"), nil
		}
		return callTools("", fmt.Sprintf("r%d", len(pages)), SkillReadToolName, fmt.Sprintf(`{"path":"references/guide.md","offset":%s}`, m[1])), nil
	}, harnessOptions{mutate: func(o *Options) { o.Skills = client }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "page through the guide"})
	evs := h.events(ctx, run.GetRunId())
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	if len(pages) < 2 {
		t.Fatalf("%d pages, want at least 2", len(pages))
	}
	const header = "references/guide.md of skill pager:\n"
	var shown []string
	for i, p := range pages {
		if !strings.HasPrefix(p, header) || len(p) > len(header)+50*1024+200 {
			t.Errorf("page %d: %d bytes, starts %.80q", i, len(p), p)
		}
		body, _, _ := strings.Cut(strings.TrimPrefix(p, header), "\n\n(")
		for _, l := range strings.Split(body, "\n") {
			num, text, ok := strings.Cut(l, "\t")
			if !ok || strings.TrimSpace(num) != strconv.Itoa(len(shown)+1) {
				t.Fatalf("page %d: line %q, want number %d", i, l, len(shown)+1)
			}
			shown = append(shown, text)
		}
	}
	want := strings.Split(strings.TrimSuffix(guide, "\n"), "\n")
	want[11] = want[11][:2000] + "..."
	if !slices.Equal(shown, want) {
		t.Errorf("the pages show %d lines, want the guide's %d", len(shown), len(want))
	}
	if last := pages[len(pages)-1]; !strings.HasSuffix(last, fmt.Sprintf("(End of file - total %d lines)", guideLines)) {
		t.Errorf("last page ends %q", last[max(0, len(last)-80):])
	}
}

// TestSkillRoundsRealService: with the real skills service, a skill the
// model activated in one round is active from the first model call of the
// conversation's next round, its instructions not injected again.
func TestSkillRoundsRealService(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if _, ok := lastToolResult(req); ok {
			return answer("activated"), nil
		}
		if req.Messages[len(req.Messages)-1].GetContent() == "first question" {
			return callTools("", "c", SkillToolName, `{"name":"sales-analysis"}`), nil
		}
		return answer("ok"), nil
	}, harnessOptions{})
	const conv = "conv-real-rounds"
	for _, input := range []string{"first question", "second question"} {
		run := h.start(ctx, &baagentv1.RunSpec{Input: input, ConversationId: conv})
		evs := h.events(ctx, run.GetRunId())
		if evs[len(evs)-1].GetComplete() == nil {
			t.Fatalf("%s: events %v, last %v", input, types(evs), evs[len(evs)-1])
		}
		if input == "second question" {
			if got := skillEvents(evs); !slices.Equal(got, []string{"activated sales-analysis [sales-analysis] " +
				baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_RESTORED.String()}) {
				t.Errorf("second round skill events %v", got)
			}
		}
	}
	req, _ := firstRequestOf(h, "second question")
	if got := toolNames(req); !slices.Equal(got, underSkill) {
		t.Errorf("second round tools %v, want %v", got, underSkill)
	}
	n := 0
	for _, m := range h.ctxSvc.history(conv) {
		if m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION && contains(m.GetContent(), "# Sales analysis") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the instructions are in the history %d times, want 1", n)
	}
}
