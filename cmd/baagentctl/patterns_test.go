package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// patGateway answers the pattern RPCs of the gateway from one pattern at
// a version, records every request, refuses unknown ids, and refuses an
// edit at another version as the memory service does.
type patGateway struct {
	baagentv1.UnimplementedGatewayServiceServer
	mu      sync.Mutex
	reqs    []proto.Message
	pattern *baagentv1.InteractionPattern
}

func (g *patGateway) record(m proto.Message) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reqs = append(g.reqs, proto.Clone(m))
}

func (g *patGateway) last() proto.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.reqs) == 0 {
		return nil
	}
	return g.reqs[len(g.reqs)-1]
}

func (g *patGateway) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reqs)
}

func (g *patGateway) current() *baagentv1.InteractionPattern {
	g.mu.Lock()
	defer g.mu.Unlock()
	return proto.Clone(g.pattern).(*baagentv1.InteractionPattern)
}

func (g *patGateway) bump() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pattern.Version++
}

func testPatternFor(now time.Time) *baagentv1.InteractionPattern {
	return &baagentv1.InteractionPattern{
		Id: "pt_1", Tenant: "acme", Name: "Regional revenue report", Description: "Revenue by region for a quarter",
		TaskType: "report", EntityTypes: []string{"Metric", "Region"}, Entities: []string{"north region", "q3 revenue"},
		Steps: []*baagentv1.PatternStep{
			{Description: "Query revenue by region", Tools: []string{"sql_query"}, ExpectedOutput: "a table", Corrections: []string{"use the fiscal quarter"}},
			{Description: "Chart it", Tools: []string{"chart"}},
		},
		ToolChains:     []*baagentv1.ToolChain{{Tools: []string{"sql_query", "chart"}}, {Tools: []string{"sql_query"}}},
		Decisions:      []*baagentv1.PatternDecision{{Question: "Which quarter?", Recommended: "Q3", Choices: map[string]int32{"Q3": 4, "Q2": 1}}},
		SuccessFactors: &baagentv1.PatternSuccessFactors{ClarificationsNeeded: 1, CommonCorrections: []string{"use the fiscal quarter"}},
		UsageCount:     5, SuccessCount: 4, FailureCount: 1, SuccessRate: 0.8, EffectiveSuccessRate: 0.8, AvgDurationMs: 42000,
		State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, Version: 3,
		CreatedAt: timestamppb.New(now.Add(-48 * time.Hour)), UpdatedAt: timestamppb.New(now.Add(-time.Hour)),
		LastQueriedAt: timestamppb.New(now.Add(-time.Hour)), LastUsedAt: timestamppb.New(now.Add(-time.Hour)),
	}
}

func (g *patGateway) ListPatterns(_ context.Context, req *baagentv1.GatewayServiceListPatternsRequest) (*baagentv1.GatewayServiceListPatternsResponse, error) {
	g.record(req)
	shared := &baagentv1.InteractionPattern{Id: "pt_2", Tenant: "globex", Name: "Churn ranking", Shared: true, State: baagentv1.PatternState_PATTERN_STATE_CANDIDATE}
	return &baagentv1.GatewayServiceListPatternsResponse{Patterns: []*baagentv1.InteractionPattern{g.current(), shared}, NextPageToken: "tok2"}, nil
}

func (g *patGateway) GetPattern(_ context.Context, req *baagentv1.GatewayServiceGetPatternRequest) (*baagentv1.GatewayServiceGetPatternResponse, error) {
	g.record(req)
	if req.GetId() != "pt_1" {
		return nil, status.Errorf(codes.NotFound, "pattern %s not found", req.GetId())
	}
	return &baagentv1.GatewayServiceGetPatternResponse{Pattern: g.current()}, nil
}

func (g *patGateway) UpdatePattern(_ context.Context, req *baagentv1.GatewayServiceUpdatePatternRequest) (*baagentv1.GatewayServiceUpdatePatternResponse, error) {
	g.record(req)
	g.mu.Lock()
	defer g.mu.Unlock()
	if v := req.GetExpectedVersion(); v != 0 && v != g.pattern.Version {
		return nil, status.Errorf(codes.FailedPrecondition, "pattern pt_1 is at version %d, not %d", g.pattern.Version, v)
	}
	p := proto.Clone(g.pattern).(*baagentv1.InteractionPattern)
	p.Version++
	return &baagentv1.GatewayServiceUpdatePatternResponse{Pattern: p}, nil
}

func (g *patGateway) DeletePattern(_ context.Context, req *baagentv1.GatewayServiceDeletePatternRequest) (*baagentv1.GatewayServiceDeletePatternResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceDeletePatternResponse{}, nil
}

func (g *patGateway) MarkPatternUseless(_ context.Context, req *baagentv1.GatewayServiceMarkPatternUselessRequest) (*baagentv1.GatewayServiceMarkPatternUselessResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceMarkPatternUselessResponse{}, nil
}

func (g *patGateway) GrantPattern(_ context.Context, req *baagentv1.GatewayServiceGrantPatternRequest) (*baagentv1.GatewayServiceGrantPatternResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceGrantPatternResponse{Grant: &baagentv1.PatternGrant{OwnerTenant: "acme", PatternId: req.GetId(), GranteeTenant: req.GetGranteeTenant()}}, nil
}

func (g *patGateway) RevokePatternGrant(_ context.Context, req *baagentv1.GatewayServiceRevokePatternGrantRequest) (*baagentv1.GatewayServiceRevokePatternGrantResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceRevokePatternGrantResponse{}, nil
}

func (g *patGateway) ListPatternGrants(_ context.Context, req *baagentv1.GatewayServiceListPatternGrantsRequest) (*baagentv1.GatewayServiceListPatternGrantsResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceListPatternGrantsResponse{Grants: []*baagentv1.PatternGrant{{OwnerTenant: "acme", PatternId: "pt_1", GranteeTenant: "globex"}}}, nil
}

func (g *patGateway) GetMemorySettings(_ context.Context, req *baagentv1.GatewayServiceGetMemorySettingsRequest) (*baagentv1.GatewayServiceGetMemorySettingsResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceGetMemorySettingsResponse{Settings: &baagentv1.MemorySettings{CaptureRuns: true, PatternsEnabled: true,
		PatternsDisabledConversations: []string{"conv-7"}}, CaptureEffective: true, PatternsEffective: false}, nil
}

func (g *patGateway) UpdateMemorySettings(_ context.Context, req *baagentv1.GatewayServiceUpdateMemorySettingsRequest) (*baagentv1.GatewayServiceUpdateMemorySettingsResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceUpdateMemorySettingsResponse{Settings: &baagentv1.MemorySettings{PatternsEnabled: req.GetPatternsEnabled()}}, nil
}

// servePatGateway serves g on loopback and returns the CLI's environment.
func servePatGateway(t *testing.T, g baagentv1.GatewayServiceServer) map[string]string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	baagentv1.RegisterGatewayServiceServer(srv, g)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return map[string]string{"BAAGENT_ADDR": lis.Addr().String(), "BAAGENT_API_KEY": "test-key-0123456789"}
}

func TestPatternsCommands(t *testing.T) {
	t.Parallel()
	g := &patGateway{pattern: testPatternFor(time.Now())}
	env := servePatGateway(t, g)
	run := func(args ...string) (int, string, string) { return ctlRun(testCtx(t), env, args[0], args[1:]...) }
	bp := func(v bool) *bool { return &v }
	sp := func(v string) *string { return &v }
	steps := filepath.Join(t.TempDir(), "steps.yaml")
	if err := os.WriteFile(steps, []byte("- description: Query revenue\n  tools: [sql_query]\n- description: Chart it\n  tools: [chart]\n  corrections: [label the axes]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stepsJSON := filepath.Join(t.TempDir(), "steps.json")
	if err := os.WriteFile(stepsJSON, []byte(`[{"description":"Only step","expected_output":"a number"}]`), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		args []string
		want proto.Message
		out  []string
	}{
		{[]string{"patterns", "list", "--task-type", "report", "--state", "active", "--shared", "--page-size", "20"},
			&baagentv1.GatewayServiceListPatternsRequest{TaskType: "report", State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, IncludeShared: true, PageSize: 20},
			[]string{"PATTERN_ID", "NAME", "STATE", "USES", "SUCCESS", "UPDATED", "pt_1", "Regional revenue report", "active", "80%", "Churn ranking (shared by globex)", "candidate", "--page-token tok2"}},
		{[]string{"patterns", "show", "pt_1"}, &baagentv1.GatewayServiceGetPatternRequest{Id: "pt_1"},
			[]string{"signature", "report + Metric, Region", "north region", "version", "5 (4 succeeded, 1 failed, 0 failures in a row)", "effective 80%",
				"1. Query revenue by region", "tools: sql_query", "expect: a table", "correction: use the fiscal quarter", "2. Chart it",
				"sql_query → chart", "Which quarter?", "recommended: Q3", "Q3 ×4, Q2 ×1", "clarifications needed: 1", "common correction: use the fiscal quarter",
				"✓ at least 3 successes (4)", "✓ effective success rate at least 60% (80%)", "✓ queried within 7 days", "✓ at most 5 failures in a row (0)", "✓ used within 180 days"}},
		{[]string{"patterns", "edit", "pt_1", "--name", "Revenue by region", "--tool-chain", "sql_query, chart,"},
			&baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", Edit: &baagentv1.PatternEdit{Name: sp("Revenue by region"), ToolChain: &baagentv1.ToolChain{Tools: []string{"sql_query", "chart"}}}},
			[]string{"pattern pt_1 edited (version 4)"}},
		{[]string{"patterns", "edit", "pt_1", "--description", "", "--steps-file", steps},
			&baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", Edit: &baagentv1.PatternEdit{Description: sp(""), ReplaceSteps: true, Steps: []*baagentv1.PatternStep{
				{Description: "Query revenue", Tools: []string{"sql_query"}}, {Description: "Chart it", Tools: []string{"chart"}, Corrections: []string{"label the axes"}}}}},
			[]string{"edited"}},
		{[]string{"patterns", "edit", "pt_1", "--steps-file", stepsJSON},
			&baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", Edit: &baagentv1.PatternEdit{ReplaceSteps: true, Steps: []*baagentv1.PatternStep{{Description: "Only step", ExpectedOutput: "a number"}}}},
			[]string{"edited"}},
		{[]string{"patterns", "rm", "pt_1", "--yes"}, &baagentv1.GatewayServiceDeletePatternRequest{Id: "pt_1"}, []string{"pattern pt_1 deleted"}},
		{[]string{"patterns", "mark-useless", "pt_1", "--reason", "wrong table"}, &baagentv1.GatewayServiceMarkPatternUselessRequest{Id: "pt_1", Reason: "wrong table"},
			[]string{"not learned again for 180 days"}},
		{[]string{"patterns", "grant", "pt_1", "globex"}, &baagentv1.GatewayServiceGrantPatternRequest{Id: "pt_1", GranteeTenant: "globex"}, []string{"shared with globex"}},
		{[]string{"patterns", "revoke", "pt_1", "globex"}, &baagentv1.GatewayServiceRevokePatternGrantRequest{Id: "pt_1", GranteeTenant: "globex"}, []string{"no longer shared with globex"}},
		{[]string{"patterns", "grants"}, &baagentv1.GatewayServiceListPatternGrantsRequest{}, []string{"PATTERN_ID", "TENANT", "globex"}},
		{[]string{"patterns", "grants", "pt_1"}, &baagentv1.GatewayServiceListPatternGrantsRequest{Id: "pt_1"}, []string{"globex"}},
		{[]string{"memory", "settings", "get", "--conversation", "conv-7"}, &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: "conv-7"},
			[]string{"patterns: on", "no patterns: conv-7", "conversation conv-7 patterns: off"}},
		{[]string{"memory", "settings", "set", "--patterns=false"}, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{PatternsEnabled: bp(false)}, []string{"patterns: off"}},
		{[]string{"memory", "settings", "set", "--conversation", "conv-7", "--conversation-patterns=true"},
			&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationId: "conv-7", ConversationPatterns: bp(true)}, nil},
	}
	for _, tc := range cases {
		code, out, errOut := run(tc.args...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s\n%s", tc.args, code, out, errOut)
			continue
		}
		if got := g.last(); !proto.Equal(got, tc.want) {
			t.Errorf("%v: gateway received %v, want %v", tc.args, got, tc.want)
		}
		for _, s := range tc.out {
			if !strings.Contains(out, s) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, s, out)
			}
		}
	}

	code, out, _ := run("patterns", "list", "--json")
	var lr struct {
		Patterns []struct {
			ID string `json:"id"`
		} `json:"patterns"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &lr) != nil || len(lr.Patterns) != 2 || lr.Patterns[0].ID != "pt_1" {
		t.Errorf("list --json: exit %d\n%s", code, out)
	}

	before := g.count()
	for _, bad := range [][]string{
		{"patterns", "list", "--state", "done"},
		{"patterns", "show"},
		{"patterns", "rm", "pt_1"},
		{"patterns", "grant", "pt_1"},
		{"patterns", "revoke", "pt_1", "globex", "extra"},
		{"patterns", "grants", "pt_1", "pt_2"},
		{"patterns", "edit", "pt_1", "--tool-chain", " , "},
		{"patterns", "edit", "pt_1", "--steps-file", stepsJSON + ".missing"},
		{"memory", "settings", "set", "--conversation-patterns=false"},
	} {
		if code, _, errOut := run(bad...); code == 0 {
			t.Errorf("%v: exit 0, want a failure (%s)", bad, errOut)
		}
	}
	if n := g.count(); n != before {
		t.Errorf("usage errors made %d calls", n-before)
	}
	if code, _, errOut := run("patterns", "show", "pt_x"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("show unknown: exit %d, %q", code, errOut)
	}
}

// writeEditor writes a shell script that stands for $EDITOR: it runs
// script on the file it is given ($1).
func writeEditor(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nset -e\n"+script+"\n"), 0o700); err != nil { //nolint:gosec // an executable test script
		t.Fatal(err)
	}
	return path
}

// TestPatternsEditInEditor: with no flags, edit opens $EDITOR on the
// editable fields and sends only what changed, at the version it read; a
// document left as it was sends nothing; a version that moved meanwhile
// is reported as a conflict.
func TestPatternsEditInEditor(t *testing.T) {
	t.Parallel()
	g := &patGateway{pattern: testPatternFor(time.Now())}
	env := servePatGateway(t, g)

	// Renames and drops the second step; the description, the tool chain
	// and the first step are left alone.
	env["EDITOR"] = writeEditor(t, `sed -i -e 's/^name: .*/name: Revenue per region/' -e '/- description: Chart it/,$d' "$1"`)
	code, out, errOut := ctlRun(testCtx(t), env, "patterns", "edit", "pt_1")
	if code != 0 {
		t.Fatalf("edit: exit %d\n%s\n%s", code, out, errOut)
	}
	want := &baagentv1.GatewayServiceUpdatePatternRequest{Id: "pt_1", ExpectedVersion: 3, Edit: &baagentv1.PatternEdit{
		Name: proto.String("Revenue per region"), ReplaceSteps: true,
		Steps: []*baagentv1.PatternStep{{Description: "Query revenue by region", Tools: []string{"sql_query"}, ExpectedOutput: "a table", Corrections: []string{"use the fiscal quarter"}}},
	}}
	if got := g.last(); !proto.Equal(got, want) {
		t.Errorf("gateway received %v, want %v", got, want)
	}
	if !strings.Contains(out, "edited (version 4)") {
		t.Errorf("output: %s", out)
	}

	// A person takes longer than a call's --timeout: the editor is not
	// bound by it (the sleep stands for the person typing).
	env["EDITOR"] = writeEditor(t, `sleep 2; sed -i 's/^name: .*/name: Slowly renamed/' "$1"`)
	code, out, errOut = ctlRun(testCtx(t), env, "patterns", "edit", "pt_1", "--timeout", "1s")
	if code != 0 || !strings.Contains(out, "edited") {
		t.Errorf("a slow editor: exit %d\n%s\n%s", code, out, errOut)
	} else if got, _ := g.last().(*baagentv1.GatewayServiceUpdatePatternRequest); got.GetEdit().GetName() != "Slowly renamed" {
		t.Errorf("a slow editor sent %v", g.last())
	}

	// Unchanged: nothing is sent after the read.
	env["EDITOR"] = writeEditor(t, `true`)
	before := g.count()
	code, out, errOut = ctlRun(testCtx(t), env, "patterns", "edit", "pt_1")
	if code != 0 || !strings.Contains(out, "unchanged") {
		t.Errorf("unchanged: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := g.count() - before; n != 1 {
		t.Errorf("unchanged edit made %d calls, want only the read", n)
	}

	// A broken document is refused before any write.
	env["EDITOR"] = writeEditor(t, `echo 'bogus_field: 1' >> "$1"`)
	before = g.count()
	if code, _, errOut := ctlRun(testCtx(t), env, "patterns", "edit", "pt_1"); code != 2 || !strings.Contains(errOut, "bogus_field") {
		t.Errorf("bad document: exit %d, %q", code, errOut)
	}
	if n := g.count() - before; n != 1 {
		t.Errorf("bad document made %d calls, want only the read", n)
	}

	// The pattern moves on while the editor is open: a conflict.
	marker := filepath.Join(t.TempDir(), "opened")
	env["EDITOR"] = writeEditor(t, `sed -i 's/^description: .*/description: changed/' "$1"; touch `+marker)
	g2 := &conflictGateway{patGateway: g, marker: marker}
	env2 := servePatGateway(t, g2)
	env2["EDITOR"] = env["EDITOR"]
	code, _, errOut = ctlRun(testCtx(t), env2, "patterns", "edit", "pt_1")
	if code != 1 || !strings.Contains(errOut, "changed since it was opened") || !strings.Contains(errOut, "nothing was written") {
		t.Errorf("conflict: exit %d, %q", code, errOut)
	}
}

// conflictGateway is patGateway whose pattern gains a version once the
// editor has opened it (the marker file exists), as another user's edit.
type conflictGateway struct {
	*patGateway
	marker string
	once   sync.Once
}

func (g *conflictGateway) UpdatePattern(ctx context.Context, req *baagentv1.GatewayServiceUpdatePatternRequest) (*baagentv1.GatewayServiceUpdatePatternResponse, error) {
	if _, err := os.Stat(g.marker); err == nil {
		g.once.Do(g.bump)
	}
	return g.patGateway.UpdatePattern(ctx, req)
}

func TestPatternGates(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := testPatternFor(now)
	p.SuccessCount, p.EffectiveSuccessRate, p.ConsecutiveFailures = 2, 0.5, 6
	p.LastQueriedAt = timestamppb.New(now.Add(-8 * 24 * time.Hour))
	p.LastUsedAt, p.UpdatedAt, p.CreatedAt = timestamppb.New(now.Add(-200*24*time.Hour)), timestamppb.New(now.Add(-190*24*time.Hour)), timestamppb.New(now.Add(-300*24*time.Hour))
	got := strings.Join(patternGates(p, now), "\n")
	for _, want := range []string{"✗ at least 3 successes (2)", "✗ effective success rate at least 60% (50%)", "✗ queried within 7 days",
		"✗ at most 5 failures in a row (6)", "✗ used within 180 days"} {
		if !strings.Contains(got, want) {
			t.Errorf("gates lack %q:\n%s", want, got)
		}
	}
	// A pattern never queried nor timestamped is not archived by a zero time.
	if archivedBy(&baagentv1.InteractionPattern{}, now) {
		t.Error("a pattern without times is archived")
	}
}

func TestDiffEdit(t *testing.T) {
	was := editDocOf(testPatternFor(time.Now()))
	if ed := diffEdit(was, was); !emptyEdit(ed) {
		t.Errorf("no change gave %v", ed)
	}
	now := was
	now.ToolChain = []string{"chart"}
	now.Description = "  " + was.Description + "\n"
	ed := diffEdit(was, now)
	if ed.ToolChain == nil || ed.Description != nil || ed.Name != nil || ed.GetReplaceSteps() {
		t.Errorf("tool chain change gave %v", ed)
	}
}

func TestParseStepsDoc(t *testing.T) {
	for _, bad := range []string{"", "[]", "description: x", "- description: x\n  tool: [a]", "- [1, 2]"} {
		if _, err := parseStepsDoc([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	steps, err := parseStepsDoc([]byte(`[{"description":"a","tools":["x","y"]}]`))
	if err != nil || len(steps) != 1 || steps[0].Description != "a" || len(steps[0].Tools) != 2 {
		t.Errorf("JSON steps: %v %v", steps, err)
	}
}

// FuzzParseEditDocs feeds arbitrary documents to the steps file and editor
// document parsers: never a panic, and a document that parses gives an
// edit whose steps, when replaced, are the document's.
func FuzzParseEditDocs(f *testing.F) {
	for _, s := range []string{"- description: a\n  tools: [x]\n", `[{"description":"a"}]`, "name: n\ndescription: d\ntool_chain: [a, b]\nsteps:\n  - description: s\n",
		"steps: 1", "&a [*a]", "name: !!binary aGk=", "- {description: a, corrections: [c, d]}"} {
		f.Add(s)
	}
	was := editDocOf(testPatternFor(time.Unix(1e9, 0)))
	f.Fuzz(func(t *testing.T, doc string) {
		if steps, err := parseStepsDoc([]byte(doc)); err == nil && len(steps) == 0 {
			t.Fatal("no error and no steps")
		}
		d, err := parseEditDoc([]byte(doc))
		if err != nil {
			return
		}
		ed := diffEdit(was, d)
		if ed.GetReplaceSteps() && len(ed.GetSteps()) != len(d.Steps) {
			t.Fatalf("replaced %d steps, the document has %d", len(ed.GetSteps()), len(d.Steps))
		}
	})
}

func TestLiveViewShowsPatternMatched(t *testing.T) {
	var out strings.Builder
	v := &liveView{w: &out}
	ev := &baagentv1.Event{Payload: &baagentv1.Event_PatternMatched{PatternMatched: &baagentv1.PatternMatchedPayload{
		PatternId: "pt_1", Name: "Regional revenue report", Score: 0.8712, Mode: "reuse", DecisionId: "d1",
	}}}
	if err := v.show(ev); err != nil {
		t.Fatal(err)
	}
	if want := `◆ pattern "Regional revenue report" matched (0.87, reuse)` + "\n"; out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
	got := patternMatchedLine(&baagentv1.PatternMatchedPayload{Name: "a\nb", Score: 0.6, Mode: "reference", Shared: true})
	if got != `◆ pattern "a b" matched (0.60, reference, shared)` {
		t.Fatalf("shared reference: %q", got)
	}
}
