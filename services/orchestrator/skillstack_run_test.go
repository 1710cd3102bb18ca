package orchestrator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// skillHarness is a harness whose skills service is fs.
func skillHarness(t *testing.T, fs *fakeSkills, turns turnFunc, mutate func(*Options)) *harness {
	t.Helper()
	client := fs.client(t)
	return newHarness(t, turns, harnessOptions{mutate: func(o *Options) {
		o.Skills = client
		if mutate != nil {
			mutate(o)
		}
	}})
}

// skillEvents returns the run's skill_activated and skill_ended events as
// "activated name chain origin reason" / "ended name chain reason" lines.
func skillEvents(evs []*baagentv1.Event) []string {
	var out []string
	for _, e := range evs {
		if a := e.GetSkillActivated(); a != nil {
			out = append(out, fmt.Sprintf("activated %s [%s] %s", a.GetSkillName(), strings.Join(a.GetActivationChain(), ","), a.GetOrigin()))
		}
		if d := e.GetSkillEnded(); d != nil {
			out = append(out, fmt.Sprintf("ended %s [%s] %s", d.GetSkillName(), strings.Join(d.GetActivationChain(), ","), d.GetReason()))
		}
	}
	return out
}

// guideText is a resource longer than one skill_read page, with one line
// longer than a line may be.
func guideText() string {
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "guide line %04d: revenue by region and quarter\n", i)
		if i == 10 {
			b.WriteString(strings.Repeat("x", 2500) + "\n")
		}
	}
	return b.String()
}

// guideLines is the number of lines of guideText.
const guideLines = 1501

// offsetHint finds the line to read on from in a page's hint.
var offsetHint = regexp.MustCompile(`Use 'offset' parameter to read beyond line (\d+)\)$`)

// TestSkillScopesInARun: a skill's scope ends when a sibling takes its
// place or the model ends it, so A, B, A is no cycle; activating the
// active skill is a no-op; a nested skill ends with its parent; the tools
// follow the stack (a popped skill's restriction is gone); skill_read
// pages an active skill's files and refuses the others.
func TestSkillScopesInARun(t *testing.T) {
	ctx := testCtx(t)
	fs := newFakeSkills()
	guide := guideText()
	fs.put("alpha", &fakeSkill{instructions: "# Alpha\nQuery with SQL only.", revision: "a1", allowed: []string{"sql_query"},
		files: map[string]string{"references/guide.md": guide, "bin.dat": "\xff\xfe\x00"}})
	fs.put("beta", &fakeSkill{instructions: "# Beta\nSummarise.", revision: "b1"})
	fs.put("outer", &fakeSkill{instructions: "# Outer\nWhen the data is in, activate inner.", revision: "o1"})
	fs.put("inner", &fakeSkill{instructions: "# Inner", revision: "i1"})

	var nextLine int
	h := skillHarness(t, fs, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		res := lastToolResults(req)
		tools := toolNames(req)
		switch n {
		case 0:
			if slices.Contains(tools, SkillReadToolName) {
				t.Errorf("skill_read offered with no skill active: %v", tools)
			}
			return callTools("", "c0", SkillToolName, `{"name":"alpha"}`), nil
		case 1:
			if want := []string{"sql_query", SkillToolName, SkillReadToolName, AskClarificationTool, AskDecisionTool}; !slices.Equal(tools, want) {
				t.Errorf("under alpha, tools %v, want %v", tools, want)
			}
			return callTools("", "c1a", SkillToolName, `{"skill":"alpha"}`, "c1b", SkillReadToolName, `{"path":"references/guide.md"}`), nil
		case 2:
			if len(res) != 2 || !contains(res[0].GetContent(), `Skill "alpha" is already active`) || res[0].GetIsError() {
				t.Errorf("already active: %v", res)
			}
			page := res[1].GetContent()
			m := offsetHint.FindStringSubmatch(page)
			if m == nil || !strings.HasPrefix(page, "references/guide.md of skill alpha:\n     1\tguide line 0000: ") ||
				!contains(page, "    12\t"+strings.Repeat("x", 2000)+"...\n", "Output truncated at 51200 bytes") || contains(page, strings.Repeat("x", 2001)) {
				t.Errorf("first page:\n%.300s … %s", page, page[max(0, len(page)-300):])
				return answer("stop"), nil
			}
			nextLine, _ = strconv.Atoi(m[1])
			if nextLine <= 12 || nextLine >= guideLines || !contains(page, fmt.Sprintf("%6d\tguide line %04d:", nextLine, nextLine-2)) ||
				contains(page, fmt.Sprintf("%6d\t", nextLine+1)) {
				t.Errorf("first page does not end at line %d:\n%s", nextLine, page[max(0, len(page)-300):])
			}
			return callTools("",
				"c2a", SkillReadToolName, fmt.Sprintf(`{"path":"references/guide.md","offset":%d}`, nextLine),
				"c2b", SkillReadToolName, `{"path":"bin.dat"}`,
				"c2c", SkillReadToolName, `{"path":"missing.md","skill":"alpha"}`,
				"c2d", SkillReadToolName, `{"path":"x.md","skill":"beta"}`), nil
		case 3:
			if len(res) != 4 {
				t.Errorf("results %v", res)
				return answer("stop"), nil
			}
			second := res[0].GetContent()
			if !strings.HasPrefix(second, fmt.Sprintf("references/guide.md of skill alpha:\n%6d\tguide line %04d:", nextLine+1, nextLine-1)) ||
				!strings.HasSuffix(second, fmt.Sprintf("%6d\tguide line 1499: revenue by region and quarter\n\n(End of file - total %d lines)", guideLines, guideLines)) {
				t.Errorf("second page:\n%.200s … %s", second, second[max(0, len(second)-200):])
			}
			if !res[1].GetIsError() || !contains(res[1].GetContent(), codeSkillResource, "binary") {
				t.Errorf("binary: %s", res[1].GetContent())
			}
			if !res[2].GetIsError() || !contains(res[2].GetContent(), codeSkillResource, "not found") {
				t.Errorf("missing: %s", res[2].GetContent())
			}
			if !res[3].GetIsError() || !contains(res[3].GetContent(), codeSkillNotActive, `"beta" is not active`, "Active skills: alpha") {
				t.Errorf("not active: %s", res[3].GetContent())
			}
			return callTools("", "c3", SkillToolName, `{"name":"beta"}`), nil
		case 4:
			if !slices.Contains(tools, "glob") || !slices.Contains(tools, SkillReadToolName) {
				t.Errorf("after beta replaced alpha, tools %v", tools)
			}
			if len(res) != 1 || !contains(res[0].GetContent(), "took the place of alpha") {
				t.Errorf("sibling: %v", res)
			}
			return callTools("", "c4", SkillToolName, `{"name":"alpha","action":"activate"}`), nil
		case 5:
			if len(res) != 1 || res[0].GetIsError() {
				t.Errorf("A, B, A refused: %v", res)
			}
			return callTools("", "c5", SkillToolName, `{"name":"alpha","action":"end"}`), nil
		case 6:
			if len(res) != 1 || res[0].GetIsError() || !contains(res[0].GetContent(), `Skill "alpha" ended`, "No skill is active now") {
				t.Errorf("end: %v", res)
			}
			if !slices.Contains(tools, "glob") || slices.Contains(tools, SkillReadToolName) {
				t.Errorf("with no skill active, tools %v", tools)
			}
			return callTools("", "c6", SkillToolName, `{"name":"outer"}`), nil
		case 7:
			return callTools("", "c7", SkillToolName, `{"name":"inner"}`), nil
		case 8:
			if len(res) != 1 || !contains(res[0].GetContent(), "outer → inner") {
				t.Errorf("nested: %v", res)
			}
			return callTools("", "c8", SkillToolName, `{"name":"outer","action":"end"}`), nil
		case 9:
			if len(res) != 1 || !contains(res[0].GetContent(), `Skill "outer" ended together with the skills nested in it (inner)`) {
				t.Errorf("end of a parent: %v", res)
			}
			return callTools("", "c9", SkillToolName, `{"name":"outer","action":"end"}`), nil
		case 10:
			if len(res) != 1 || !res[0].GetIsError() || !contains(res[0].GetContent(), codeSkillNotActive, "nothing to end") {
				t.Errorf("end of an inactive skill: %v", res)
			}
			return answer("done"), nil
		}
		return nil, context.Canceled
	}, nil)

	run := h.start(ctx, &baagentv1.RunSpec{Input: "analyse the sales"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	model := baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL.String()
	want := []string{
		"activated alpha [alpha] " + model,
		"ended alpha [] sibling",
		"activated beta [beta] " + model,
		"ended beta [] sibling",
		"activated alpha [alpha] " + model,
		"ended alpha [] done",
		"activated outer [outer] " + model,
		"activated inner [outer,inner] " + model,
		"ended inner [outer] done",
		"ended outer [] done",
	}
	if got := skillEvents(evs); !slices.Equal(got, want) {
		t.Errorf("skill events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range evs {
		if a := e.GetSkillActivated(); a != nil && a.GetSkillName() == "beta" && (!slices.Equal(a.GetEnded(), []string{"alpha"}) || a.GetRevision() != "b1") {
			t.Errorf("skill_activated of beta: %v", a)
		}
	}
	for _, req := range fs.requests() {
		if req.GetOrigin() != baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL {
			t.Errorf("activation origin %v", req.GetOrigin())
		}
	}
	checkPairing(t, h.ctxSvc.history(run.GetConversationId()))
}

// firstRequestOf returns the first model request whose user message is
// input.
func firstRequestOf(h *harness, input string) (ModelRequest, bool) {
	for _, req := range h.model.requests() {
		for _, m := range req.Messages {
			if m.GetRole() == baagentv1.Role_ROLE_USER && m.GetContent() == input {
				return req, true
			}
		}
	}
	return ModelRequest{}, false
}

// hasMessage reports whether req holds a message containing every part.
func hasMessage(req ModelRequest, kind baagentv1.MessageKind, parts ...string) bool {
	return slices.ContainsFunc(req.Messages, func(m *baagentv1.ChatMessage) bool {
		return m.GetRole() == baagentv1.Role_ROLE_SYSTEM && m.GetKind() == kind && contains(m.GetContent(), parts...)
	})
}

// TestSkillTriggers: per -skill-triggers, a user message naming a skill
// (/name) or matching its triggers activates it before the first model
// call (activate), is suggested to the model (suggest; /name still
// activates), or is ignored (off); a skill only the user may invoke is
// refused to the model with a clear error and left out of the catalog;
// a skills service without MatchTriggers means no triggers.
func TestSkillTriggers(t *testing.T) {
	newFS := func() *fakeSkills {
		fs := newFakeSkills()
		fs.put("report", &fakeSkill{instructions: "# Report\nWrite the quarterly report.", revision: "r1", userOnly: true, triggers: []string{"quarterly report"}})
		fs.put("sales", &fakeSkill{instructions: "# Sales\nRevenue analysis.", revision: "s1", triggers: []string{"revenue"}})
		return fs
	}
	// The model answers at once, except that asked to, it activates the
	// user-only skill.
	turns := func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if res := lastToolResults(req); len(res) > 0 {
			return answer(res[0].GetContent()), nil
		}
		if slices.ContainsFunc(req.Messages, func(m *baagentv1.ChatMessage) bool { return m.GetContent() == "model activates report" }) {
			return callTools("", "c", SkillToolName, `{"name":"report"}`), nil
		}
		return answer("ok"), nil
	}
	user := baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER.String()
	trigger := baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_TRIGGER.String()
	type runCase struct {
		input  string
		events []string // skill events
		reason string   // skill_activated.reason, when one
		inject string   // a skill instruction the first request holds
		note   string   // a platform note the first request holds
		answer string   // part of the answer
	}
	for _, tc := range []struct {
		mode       string
		noTriggers bool
		runs       []runCase
	}{
		{mode: SkillTriggersActivate, runs: []runCase{
			{input: "/report for Q3", events: []string{"activated report [report] " + user}, reason: "the message names /report", inject: "# Report",
				note: `Skill "report" was activated because the message names /report`},
			{input: "show revenue by region", events: []string{"activated sales [sales] " + trigger}, reason: `the message matched the trigger "revenue"`, inject: "# Sales"},
			{input: "model activates report", answer: "can only be invoked by the user"},
		}},
		{mode: SkillTriggersSuggest, runs: []runCase{
			{input: "show revenue by region", note: `The user's message matches these skills: sales (the message matched the trigger "revenue")`},
			{input: "/report please", events: []string{"activated report [report] " + user}, inject: "# Report"},
		}},
		{mode: SkillTriggersOff, runs: []runCase{
			{input: "/report and revenue"},
		}},
		{mode: SkillTriggersActivate, noTriggers: true, runs: []runCase{
			{input: "/sales and revenue"},
		}},
	} {
		t.Run(fmt.Sprintf("%s-unimplemented=%v", tc.mode, tc.noTriggers), func(t *testing.T) {
			ctx := testCtx(t)
			fs := newFS()
			fs.noTriggers = tc.noTriggers
			h := skillHarness(t, fs, turns, func(o *Options) { o.SkillTriggers = tc.mode })
			for _, rc := range tc.runs {
				run := h.start(ctx, &baagentv1.RunSpec{Input: rc.input})
				evs := h.events(ctx, run.GetRunId())
				last := evs[len(evs)-1].GetComplete()
				if last == nil {
					t.Fatalf("%q: events %v, last %v", rc.input, types(evs), evs[len(evs)-1])
				}
				if got := skillEvents(evs); !slices.Equal(got, rc.events) {
					t.Errorf("%q: skill events %v, want %v", rc.input, got, rc.events)
				}
				if i := indexOf(types(evs), "skill_activated"); i >= 0 {
					if j := indexOf(types(evs), "step_start"); j < i {
						t.Errorf("%q: skill_activated after the first step: %v", rc.input, types(evs))
					}
					if a := evs[i].GetSkillActivated(); rc.reason != "" && a.GetReason() != rc.reason {
						t.Errorf("%q: reason %q, want %q", rc.input, a.GetReason(), rc.reason)
					}
				}
				req, ok := firstRequestOf(h, rc.input)
				if !ok {
					t.Fatalf("%q: no model request", rc.input)
				}
				if hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG, "report") {
					t.Errorf("the user-only skill is in the catalog")
				}
				if rc.inject != "" && !hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION, rc.inject) {
					t.Errorf("%q: instructions %q not injected before the first call", rc.input, rc.inject)
				}
				if rc.inject == "" && hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION) {
					t.Errorf("%q: instructions injected", rc.input)
				}
				if rc.note != "" && !hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_UNSPECIFIED, rc.note) {
					t.Errorf("%q: no note %q in %v", rc.input, rc.note, req.Messages)
				}
				if rc.note == "" && rc.inject == "" && len(req.Messages) > 0 && hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_UNSPECIFIED, "The user's message") {
					t.Errorf("%q: a note about skills: %v", rc.input, req.Messages)
				}
				if rc.answer != "" && !contains(last.GetContent(), rc.answer, codeSkillRefused) {
					t.Errorf("%q: answer %q", rc.input, last.GetContent())
				}
			}
		})
	}
}

// TestSkillStackAcrossRounds: the skills active at the end of a round are
// active in the next round of the conversation from its first model call
// (restored, without their instructions again); a changed skill's new
// instructions are injected; a removed one ends with a note.
func TestSkillStackAcrossRounds(t *testing.T) {
	ctx := testCtx(t)
	fs := newFakeSkills()
	fs.put("alpha", &fakeSkill{instructions: "# Alpha v1", revision: "a1", allowed: []string{"sql_query"}})
	h := skillHarness(t, fs, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if _, ok := lastToolResult(req); ok {
			return answer("activated"), nil
		}
		if req.Messages[len(req.Messages)-1].GetContent() == "round 1" {
			return callTools("", "c", SkillToolName, `{"name":"alpha"}`), nil
		}
		return answer("ok"), nil
	}, nil)
	const conv = "conv-rounds"
	round := func(input string) []*baagentv1.Event {
		t.Helper()
		run := h.start(ctx, &baagentv1.RunSpec{Input: input, ConversationId: conv})
		evs := h.events(ctx, run.GetRunId())
		if evs[len(evs)-1].GetComplete() == nil {
			t.Fatalf("%s: events %v, last %v", input, types(evs), evs[len(evs)-1])
		}
		return evs
	}
	instructions := func(text string) int {
		n := 0
		for _, m := range h.ctxSvc.history(conv) {
			if m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION && contains(m.GetContent(), text) {
				n++
			}
		}
		return n
	}
	restored := baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_RESTORED

	round("round 1")
	evs := round("round 2")
	if got := skillEvents(evs); !slices.Equal(got, []string{"activated alpha [alpha] " + restored.String()}) {
		t.Errorf("round 2 skill events %v", got)
	}
	if a := evs[indexOf(types(evs), "skill_activated")].GetSkillActivated(); !contains(a.GetReason(), "restored") || a.GetRevision() != "a1" {
		t.Errorf("restored: %v", a)
	}
	req, _ := firstRequestOf(h, "round 2")
	if tools := toolNames(req); slices.Contains(tools, "glob") || !slices.Contains(tools, SkillReadToolName) {
		t.Errorf("round 2 tools %v: alpha's restriction not restored", tools)
	}
	if n := instructions("# Alpha v1"); n != 1 {
		t.Errorf("alpha's instructions are in the history %d times, want 1 (not injected again)", n)
	}
	reqs := fs.requests()
	if last := reqs[len(reqs)-1]; last.GetOrigin() != restored || last.GetRevision() != "a1" {
		t.Errorf("restoring activation %v", last)
	}

	// Edited, the earlier revision not kept: the next round gets the new
	// one. (A kept revision would be restored as it was.)
	fs.replace("alpha", &fakeSkill{instructions: "# Alpha v2", revision: "a2", allowed: []string{"sql_query", "glob"}})
	evs = round("round 3")
	if a := evs[indexOf(types(evs), "skill_activated")].GetSkillActivated(); !contains(a.GetReason(), "changed", "a1 → a2") || a.GetRevision() != "a2" {
		t.Errorf("restored after a change: %v", a)
	}
	req, _ = firstRequestOf(h, "round 3")
	if !hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION, "# Alpha v2") || !slices.Contains(toolNames(req), "glob") {
		t.Errorf("round 3: new instructions or modifier missing: tools %v", toolNames(req))
	}

	fs.remove("alpha")
	evs = round("round 4")
	if got := skillEvents(evs); !slices.Equal(got, []string{"ended alpha [] removed"}) {
		t.Errorf("round 4 skill events %v", got)
	}
	req, _ = firstRequestOf(h, "round 4")
	if !hasMessage(req, baagentv1.MessageKind_MESSAGE_KIND_UNSPECIFIED, `Skill "alpha"`, "no longer available") || slices.Contains(toolNames(req), SkillReadToolName) {
		t.Errorf("round 4: no note, or skill_read offered: %v", toolNames(req))
	}
	if got := skillEvents(round("round 5")); len(got) != 0 {
		t.Errorf("round 5 skill events %v", got)
	}
}

// TestSkillStackSurvivesHandOver: a run handed over to another replica
// mid-run resumes with its skill stack (from its checkpoint).
func TestSkillStackSurvivesHandOver(t *testing.T) {
	ctx := testCtx(t)
	fs := newFakeSkills()
	fs.put("alpha", &fakeSkill{instructions: "# Alpha", revision: "a1", allowed: []string{"sql_query"}})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var resumedTools []string
	h := skillHarness(t, fs, func(ctx context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("", "c", SkillToolName, `{"name":"alpha"}`), nil
		case 1:
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		mu.Lock()
		resumedTools = toolNames(req)
		mu.Unlock()
		return answer("done"), nil
	}, func(o *Options) { o.MaxConcurrentRuns = 1 })
	run := h.start(ctx, &baagentv1.RunSpec{Input: "one"})
	<-started
	h.stop()
	h.replica("replica-b")
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(resumedTools, "glob") || !slices.Contains(resumedTools, SkillReadToolName) {
		t.Errorf("tools after the hand-over %v: the stack was lost", resumedTools)
	}
	if got := skillEvents(evs); len(got) != 1 {
		t.Errorf("skill events %v", got)
	}
}
