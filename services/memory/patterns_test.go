package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/memory/store"
)

// successTrace is a successful run of goal: a two-step plan with a tool
// call each and a high-impact decision.
func successTrace(run, goal string) *baagentv1.InteractionTrace {
	return &baagentv1.InteractionTrace{
		RunId: run, ConversationId: "conv-1", UserGoal: goal, Success: true, DurationMs: 4000,
		PlanSteps: []*baagentv1.TracePlanStep{
			{Description: "Query revenue by region", Tools: []string{"sql_query"}, Done: true},
			{Description: "Chart the result", Tools: []string{"chart"}, Done: true},
		},
		ToolCalls: []*baagentv1.TraceToolCall{
			{Tool: "sql_query", Success: true, PlanStep: 1},
			{Tool: "chart", Success: true, PlanStep: 2},
		},
		Decisions: []*baagentv1.TraceDecision{
			{Question: "Which period?", Options: []string{"Last quarter", "Last year"}, Recommended: "Last quarter", UserChoice: "Last quarter", Impact: "high"},
		},
		FinalResult: "Revenue rose 12% in the North.",
	}
}

func record(t *testing.T, c baagentv1.MemoryServiceClient, tenant string, tr *baagentv1.InteractionTrace) *baagentv1.RecordTraceResponse {
	t.Helper()
	resp, err := c.RecordTrace(t.Context(), &baagentv1.RecordTraceRequest{Tenant: tenant, Trace: tr})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func match(t *testing.T, c baagentv1.MemoryServiceClient, tenant, goal, conv string) *baagentv1.MatchPatternsResponse {
	t.Helper()
	resp, err := c.MatchPatterns(t.Context(), &baagentv1.MatchPatternsRequest{Tenant: tenant, Goal: goal, ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// learn records n successful traces of goal and returns the pattern they
// made.
func learn(t *testing.T, c baagentv1.MemoryServiceClient, tenant, goal string, n int) string {
	t.Helper()
	var id string
	for i := range n {
		resp := record(t, c, tenant, successTrace(fmt.Sprintf("run-%s-%d-%d", tenant, time.Now().UnixNano(), i), goal))
		if resp.GetPatternId() == "" || (i == 0) != resp.GetCreated() || (id != "" && resp.GetPatternId() != id) {
			t.Fatalf("trace %d: %v (pattern so far %q)", i, resp, id)
		}
		id = resp.GetPatternId()
	}
	return id
}

func wantStatus(t *testing.T, err error, code codes.Code, what string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: want %v, got %v", what, code, err)
	}
}

// Three successful traces make a pattern; the fourth request of the kind
// is offered it for reuse, with the goal's entities from memory; a run that
// reused it and failed evolves it.
func TestPatternsLearnThenOfferForReuse(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Extractor: sampleExtractor()}, true)
	ts.add(t, "acme", acmeText)
	const goal = "Report the revenue of Acme Labs in the North region"

	// Before any trace: nothing to offer, but the classification and the
	// entities are there.
	first := match(t, ts.c, "acme", goal, "")
	if !first.GetEnabled() || first.GetTaskType() != "report" || len(first.GetCandidates()) != 0 {
		t.Fatalf("first match %v", first)
	}
	if strings.Join(first.GetEntities(), ",") != "acme labs,north" || strings.Join(first.GetEntityTypes(), ",") != "customer,region" {
		t.Fatalf("entities %v types %v", first.GetEntities(), first.GetEntityTypes())
	}

	id := learn(t, ts.c, "acme", goal, 3)
	got, err := ts.c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "acme", Id: id})
	if err != nil {
		t.Fatal(err)
	}
	p := got.GetPattern()
	if p.GetSuccessCount() != 3 || p.GetTaskType() != "report" || strings.Join(p.GetEntityTypes(), ",") != "customer,region" ||
		len(p.GetSteps()) != 2 || p.GetToolChains()[0].GetTools()[1] != "chart" || p.GetShared() || p.GetVersion() != 3 {
		t.Fatalf("learned %v", p)
	}
	// Never queried yet: still a candidate.
	if p.GetState() != baagentv1.PatternState_PATTERN_STATE_CANDIDATE {
		t.Fatalf("state %v before any query", p.GetState())
	}

	fourth := match(t, ts.c, "acme", goal, "conv-2")
	if len(fourth.GetCandidates()) != 1 {
		t.Fatalf("fourth match %v", fourth)
	}
	cand := fourth.GetCandidates()[0]
	if cand.GetMode() != "reuse" || cand.GetPattern().GetId() != id || cand.GetPattern().GetState() != baagentv1.PatternState_PATTERN_STATE_ACTIVE ||
		cand.GetScore().GetScore() < 0.99 || !cand.GetScore().GetSignatureMatch() || cand.GetScore().GetEntityOverlap() != 1 ||
		len(cand.GetPattern().GetSteps()) != 2 || cand.GetPattern().GetLastQueriedAt() == nil {
		t.Fatalf("candidate %v", cand)
	}
	// Touched once: a match within touchEvery writes nothing.
	stored, err := ts.store.GetPattern(t.Context(), "acme", id)
	if err != nil || stored.LastQueriedAt.IsZero() {
		t.Fatalf("stored after the match %v, %v", stored, err)
	}
	if again := match(t, ts.c, "acme", goal, ""); len(again.GetCandidates()) != 1 || again.GetCandidates()[0].GetMode() != "reuse" {
		t.Fatalf("second match %v", again)
	}
	if st2, err := ts.store.GetPattern(t.Context(), "acme", id); err != nil || !st2.LastQueriedAt.Equal(stored.LastQueriedAt) || st2.Version != stored.Version {
		t.Fatalf("a second match within %v rewrote the pattern: %v -> %v", touchEvery, stored.LastQueriedAt, st2.LastQueriedAt)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_pattern_candidates_total", "mode", "reuse"); v != 2 {
		t.Fatalf("reuse candidates counted %v", v)
	}
	for state, want := range map[baagentv1.PatternState]int{
		baagentv1.PatternState_PATTERN_STATE_ACTIVE: 1, baagentv1.PatternState_PATTERN_STATE_CANDIDATE: 0, baagentv1.PatternState_PATTERN_STATE_UNSPECIFIED: 1,
	} {
		l, err := ts.c.ListPatterns(t.Context(), &baagentv1.ListPatternsRequest{Tenant: "acme", State: state})
		if err != nil || len(l.GetPatterns()) != want {
			t.Fatalf("list %v: %v, %v; want %d", state, l, err, want)
		}
	}

	// The run reused it and failed: it evolves with the failure.
	tr := successTrace("run-reused", goal)
	tr.Success, tr.PatternId, tr.PatternMode = false, id, "reuse"
	if resp := record(t, ts.c, "acme", tr); resp.GetPatternId() != id || resp.GetCreated() {
		t.Fatalf("reuse trace %v", resp)
	}
	got, err = ts.c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "acme", Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.GetPattern(); p.GetUsageCount() != 4 || p.GetFailureCount() != 1 || p.GetConsecutiveFailures() != 1 {
		t.Fatalf("after a failed reuse %v", p)
	}
	// The same run again: a duplicate, nothing changes.
	if resp := record(t, ts.c, "acme", tr); !resp.GetDuplicate() {
		t.Fatalf("replayed trace %v", resp)
	}
	for outcome, want := range map[string]float64{"created": 1, "evolved": 3, "duplicate": 1} {
		if v := counterValue(t, ts.reg, "baagent_memory_pattern_traces_total", "outcome", outcome); v != want {
			t.Errorf("traces %s = %v, want %v", outcome, v, want)
		}
	}
}

// Tenant B neither sees nor changes tenant A's patterns until A grants
// one; then B sees it read-only in get, list (include_shared) and match;
// revoking ends that.
func TestPatternsTenantIsolationAndGrants(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	c := ts.c
	const goal = "Report monthly revenue"
	id := learn(t, c, "acme", goal, 3)

	list := func(tenant string, shared bool) []*baagentv1.InteractionPattern {
		t.Helper()
		resp, err := c.ListPatterns(t.Context(), &baagentv1.ListPatternsRequest{Tenant: tenant, IncludeShared: shared})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetPatterns()
	}
	if ps := list("acme", false); len(ps) != 1 || ps[0].GetId() != id {
		t.Fatalf("acme lists %v", ps)
	}
	beforeGrant := func() {
		t.Helper()
		if ps := list("beta", true); len(ps) != 0 {
			t.Fatalf("beta lists %v", ps)
		}
		_, err := c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "beta", Id: id})
		wantStatus(t, err, codes.NotFound, "beta get")
		if m := match(t, c, "beta", goal, ""); len(m.GetCandidates()) != 0 {
			t.Fatalf("beta matched %v", m)
		}
		_, err = c.UpdatePattern(t.Context(), &baagentv1.UpdatePatternRequest{Tenant: "beta", Id: id, Edit: &baagentv1.PatternEdit{Name: str("mine")}})
		wantStatus(t, err, codes.NotFound, "beta update")
		_, err = c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "beta", Id: id})
		wantStatus(t, err, codes.NotFound, "beta delete")
		_, err = c.MarkPatternUseless(t.Context(), &baagentv1.MarkPatternUselessRequest{Tenant: "beta", Id: id})
		wantStatus(t, err, codes.NotFound, "beta mark useless")
		_, err = c.GrantPattern(t.Context(), &baagentv1.GrantPatternRequest{Tenant: "beta", Id: id, GranteeTenant: "gamma"})
		wantStatus(t, err, codes.NotFound, "beta grant")
	}
	beforeGrant()

	g, err := c.GrantPattern(t.Context(), &baagentv1.GrantPatternRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetGrant().GetOwnerTenant() != "acme" || g.GetGrant().GetGranteeTenant() != "beta" || g.GetGrant().GetPatternId() != id {
		t.Fatalf("grant %v", g)
	}
	grants, err := c.ListPatternGrants(t.Context(), &baagentv1.ListPatternGrantsRequest{Tenant: "acme"})
	if err != nil || len(grants.GetGrants()) != 1 {
		t.Fatalf("acme grants %v, %v", grants, err)
	}
	if bg, err := c.ListPatternGrants(t.Context(), &baagentv1.ListPatternGrantsRequest{Tenant: "beta"}); err != nil || len(bg.GetGrants()) != 0 {
		t.Fatalf("beta grants %v, %v", bg, err)
	}

	if ps := list("beta", false); len(ps) != 0 {
		t.Fatalf("beta lists without include_shared %v", ps)
	}
	if ps := list("beta", true); len(ps) != 1 || !ps[0].GetShared() || ps[0].GetTenant() != "acme" {
		t.Fatalf("beta lists with include_shared %v", ps)
	}
	got, err := c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "beta", Id: id})
	if err != nil || !got.GetPattern().GetShared() {
		t.Fatalf("beta get %v, %v", got, err)
	}
	// Granted patterns are evaluated as queried now: offered at once.
	m := match(t, c, "beta", goal, "")
	if len(m.GetCandidates()) != 1 || !m.GetCandidates()[0].GetPattern().GetShared() || m.GetCandidates()[0].GetMode() != "reference" {
		t.Fatalf("beta match %v", m)
	}
	// Read-only to the grantee.
	_, err = c.UpdatePattern(t.Context(), &baagentv1.UpdatePatternRequest{Tenant: "beta", Id: id, Edit: &baagentv1.PatternEdit{Name: str("mine")}})
	wantStatus(t, err, codes.PermissionDenied, "beta update of a granted pattern")
	_, err = c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "beta", Id: id})
	wantStatus(t, err, codes.PermissionDenied, "beta delete of a granted pattern")
	_, err = c.MarkPatternUseless(t.Context(), &baagentv1.MarkPatternUselessRequest{Tenant: "beta", Id: id})
	wantStatus(t, err, codes.PermissionDenied, "beta mark useless of a granted pattern")
	_, err = c.GrantPattern(t.Context(), &baagentv1.GrantPatternRequest{Tenant: "beta", Id: id, GranteeTenant: "gamma"})
	wantStatus(t, err, codes.PermissionDenied, "beta grant of a granted pattern")
	// beta's run that reused acme's pattern teaches beta, not acme.
	tr := successTrace("run-beta-1", goal)
	tr.PatternId, tr.PatternMode = id, "reference"
	resp := record(t, c, "beta", tr)
	if !resp.GetCreated() || resp.GetPatternId() == id {
		t.Fatalf("beta's trace %v", resp)
	}
	got, err = c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "acme", Id: id})
	if err != nil || got.GetPattern().GetUsageCount() != 3 || got.GetPattern().GetVersion() != 3 {
		t.Fatalf("acme's pattern after beta's trace %v, %v", got, err)
	}

	if _, err := c.RevokePatternGrant(t.Context(), &baagentv1.RevokePatternGrantRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.RevokePatternGrant(t.Context(), &baagentv1.RevokePatternGrantRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"})
	wantStatus(t, err, codes.NotFound, "second revoke")
	_, err = c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "beta", Id: id})
	wantStatus(t, err, codes.NotFound, "beta get after revoke")
	for _, p := range list("beta", true) {
		if p.GetId() == id {
			t.Fatal("beta still lists the revoked pattern")
		}
	}
	for _, cand := range match(t, c, "beta", goal, "").GetCandidates() {
		if cand.GetPattern().GetId() == id {
			t.Fatal("beta still matches the revoked pattern")
		}
	}
}

func TestPatternEditsAndVersions(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	c := ts.c
	id := learn(t, c, "acme", "Compare revenue against cost", 1)
	upd := func(version int64, e *baagentv1.PatternEdit) (*baagentv1.InteractionPattern, error) {
		resp, err := c.UpdatePattern(t.Context(), &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: id, ExpectedVersion: version, Edit: e})
		return resp.GetPattern(), err
	}
	p, err := upd(1, &baagentv1.PatternEdit{Name: str(" Revenue vs cost "), Description: str("Ask jane@example.com first")})
	if err != nil {
		t.Fatal(err)
	}
	if p.GetName() != "Revenue vs cost" || p.GetVersion() != 2 || strings.Contains(p.GetDescription(), "jane@") {
		t.Fatalf("edited %v", p)
	}
	_, err = upd(1, &baagentv1.PatternEdit{Name: str("stale")})
	wantStatus(t, err, codes.FailedPrecondition, "stale version")
	p, err = upd(0, &baagentv1.PatternEdit{
		ReplaceSteps: true, Steps: []*baagentv1.PatternStep{{Description: "Pull both series", Tools: []string{"sql_query"}}},
		ToolChain: &baagentv1.ToolChain{Tools: []string{"sql_query", "python"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GetSteps()) != 1 || p.GetSteps()[0].GetDescription() != "Pull both series" || p.GetVersion() != 3 ||
		strings.Join(p.GetToolChains()[0].GetTools(), ",") != "sql_query,python" || len(p.GetToolChains()) != 2 {
		t.Fatalf("edited %v", p)
	}
	_, err = c.UpdatePattern(t.Context(), &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: newID(patternPrefix, time.Now()), Edit: &baagentv1.PatternEdit{Name: str("x")}})
	wantStatus(t, err, codes.NotFound, "unknown id")
	if _, err := c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "acme", Id: id}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "acme", Id: id})
	wantStatus(t, err, codes.NotFound, "deleted")
	_, err = c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "acme", Id: id})
	wantStatus(t, err, codes.NotFound, "deleted twice")
}

// A pattern marked useless is deleted and its signature is not learned
// again.
func TestMarkPatternUselessSuppressesItsSignature(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	c := ts.c
	const goal = "Show the revenue trend over time"
	id := learn(t, c, "acme", goal, 2)
	if _, err := c.MarkPatternUseless(t.Context(), &baagentv1.MarkPatternUselessRequest{Tenant: "acme", Id: id, Reason: "wrong tables"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "acme", Id: id})
	wantStatus(t, err, codes.NotFound, "marked useless")
	resp := record(t, c, "acme", successTrace("run-after-useless", goal))
	if resp.GetPatternId() != "" || resp.GetCreated() {
		t.Fatalf("learned again after mark-useless: %v", resp)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_pattern_traces_total", "outcome", "unchanged"); v != 1 {
		t.Fatalf("unchanged traces %v", v)
	}
	// Another kind of task is still learned.
	if resp := record(t, c, "acme", successTrace("run-other-kind", "Rank the top products")); !resp.GetCreated() {
		t.Fatalf("other kind %v", resp)
	}
}

func TestPatternSettingsSwitches(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	c := ts.c
	const goal = "Report monthly revenue"
	settings := func(conv string) *baagentv1.GetMemorySettingsResponse {
		t.Helper()
		r, err := c.GetMemorySettings(t.Context(), &baagentv1.GetMemorySettingsRequest{Tenant: "acme", ConversationId: conv})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if s := settings(""); !s.GetSettings().GetPatternsEnabled() || !s.GetPatternsEffective() {
		t.Fatalf("defaults %v", s)
	}
	update := func(r *baagentv1.UpdateMemorySettingsRequest) {
		t.Helper()
		r.Tenant = "acme"
		if _, err := c.UpdateMemorySettings(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	update(&baagentv1.UpdateMemorySettingsRequest{ConversationId: "conv-off", ConversationPatterns: yes(false)})
	if s := settings("conv-off"); s.GetPatternsEffective() || !s.GetCaptureEffective() ||
		strings.Join(s.GetSettings().GetPatternsDisabledConversations(), ",") != "conv-off" {
		t.Fatalf("conversation off %v", s)
	}
	if m := match(t, c, "acme", goal, "conv-off"); m.GetEnabled() {
		t.Fatalf("match in a switched-off conversation %v", m)
	}
	tr := successTrace("run-off", goal)
	tr.ConversationId = "conv-off"
	if resp := record(t, c, "acme", tr); !resp.GetSkipped() {
		t.Fatalf("trace of a switched-off conversation %v", resp)
	}
	if m := match(t, c, "acme", goal, "conv-on"); !m.GetEnabled() {
		t.Fatalf("match elsewhere %v", m)
	}
	update(&baagentv1.UpdateMemorySettingsRequest{ConversationId: "conv-off", ConversationPatterns: yes(true)})
	update(&baagentv1.UpdateMemorySettingsRequest{PatternsEnabled: yes(false)})
	if s := settings("conv-off"); s.GetPatternsEffective() || s.GetSettings().GetPatternsEnabled() || len(s.GetSettings().GetPatternsDisabledConversations()) != 0 {
		t.Fatalf("tenant off %v", s)
	}
	if m := match(t, c, "acme", goal, ""); m.GetEnabled() || len(m.GetCandidates()) != 0 {
		t.Fatalf("match with patterns off %v", m)
	}
	if resp := record(t, c, "acme", successTrace("run-tenant-off", goal)); !resp.GetSkipped() {
		t.Fatalf("trace with patterns off %v", resp)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_pattern_traces_total", "outcome", "skipped"); v != 2 {
		t.Fatalf("skipped traces %v", v)
	}
	update(&baagentv1.UpdateMemorySettingsRequest{PatternsEnabled: yes(true)})
	if resp := record(t, c, "acme", successTrace("run-back-on", goal)); !resp.GetCreated() {
		t.Fatalf("trace with patterns back on %v", resp)
	}
}

// Personal data in a trace is never stored: not in the recorded trace,
// not in the pattern.
func TestRecordTraceScrubs(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	tr := successTrace("run-pii", "Report revenue for jane.doe@example.com's accounts")
	tr.Clarifications = []*baagentv1.TraceClarification{{Question: "Whose?", Answer: "Mail jane.doe@example.com"}}
	tr.Corrections = []*baagentv1.TraceCorrection{{PlanStep: 1, AgentError: "wrong table", HumanFix: "use token sk-live-abcdefghijklmnop1234 and jane.doe@example.com"}}
	resp := record(t, ts.c, "acme", tr)
	if !resp.GetCreated() {
		t.Fatalf("%v", resp)
	}
	stored, err := ts.store.GetTrace(t.Context(), "acme", "run-pii")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ts.store.GetPattern(t.Context(), "acme", resp.GetPatternId())
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"trace": stored.Trace, "pattern": p.Pattern} {
		if s := fmt.Sprintf("%+v", v); strings.Contains(s, "jane.doe") || strings.Contains(s, "example.com") {
			t.Errorf("%s holds the address: %s", what, s)
		}
	}
}

// The pruning loop deletes traces older than TraceRetention at start.
func TestTracePruning(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	record(t, ts.c, "acme", successTrace("run-old", "Report monthly revenue"))
	later := time.Now().Add(TraceRetention + time.Hour)
	ts.srv.now = func() time.Time { return later }
	testkit.Run(t, context.Background(), ts.srv.runTracePruning)
	testkit.Eventually(t, 10*time.Second, "old trace pruned", func() bool {
		_, err := ts.store.GetTrace(context.Background(), "acme", "run-old")
		// The count follows the deletion.
		return errors.Is(err, store.ErrNotFound) && testutil.ToFloat64(ts.srv.metrics.tracesPruned) == 1
	})
}

// The RPCs over PostgreSQL (skipped without it): learn, offer for reuse,
// grant read-only, mark useless.
func TestPatternsOnPostgres(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Store: openPostgres(t)}, false)
	c := ts.c
	const goal = "Report monthly revenue"
	id := learn(t, c, "acme", goal, 3)
	m := match(t, c, "acme", goal, "")
	if len(m.GetCandidates()) != 1 || m.GetCandidates()[0].GetPattern().GetId() != id || m.GetCandidates()[0].GetMode() != "reference" {
		t.Fatalf("match %v", m)
	}
	if _, err := c.GrantPattern(t.Context(), &baagentv1.GrantPatternRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"}); err != nil {
		t.Fatal(err)
	}
	if m := match(t, c, "beta", goal, ""); len(m.GetCandidates()) != 1 || !m.GetCandidates()[0].GetPattern().GetShared() {
		t.Fatalf("beta match %v", m)
	}
	_, err := c.UpdatePattern(t.Context(), &baagentv1.UpdatePatternRequest{Tenant: "beta", Id: id, Edit: &baagentv1.PatternEdit{Name: str("mine")}})
	wantStatus(t, err, codes.PermissionDenied, "beta update")
	if _, err := c.MarkPatternUseless(t.Context(), &baagentv1.MarkPatternUselessRequest{Tenant: "acme", Id: id}); err != nil {
		t.Fatal(err)
	}
	if resp := record(t, c, "acme", successTrace("run-pg-after", goal)); resp.GetPatternId() != "" {
		t.Fatalf("learned again after mark-useless: %v", resp)
	}
	_, err = c.ListPatterns(t.Context(), &baagentv1.ListPatternsRequest{Tenant: "acme", PageToken: "abc"})
	wantStatus(t, err, codes.InvalidArgument, "foreign page token")
}

// A run that declined the pattern it was offered for reuse names the
// pattern without a mode: recorded once, it changes no pattern, neither
// the declined one (whose signature it matches) nor a new one.
func TestRecordTraceOfADeclinedReuseChangesNothing(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Extractor: sampleExtractor()}, true)
	const goal = "Report the revenue by quarter"
	id := learn(t, ts.c, "acme", goal, 3)

	declined := successTrace("run-declined", goal)
	declined.PatternId = id
	resp := record(t, ts.c, "acme", declined)
	if resp.GetPatternId() != "" || resp.GetCreated() || resp.GetDuplicate() || resp.GetSkipped() {
		t.Fatalf("declined reuse: %v; want nothing learned", resp)
	}
	got, err := ts.c.GetPattern(t.Context(), &baagentv1.GetPatternRequest{Tenant: "acme", Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.GetPattern(); p.GetUsageCount() != 3 || p.GetSuccessCount() != 3 {
		t.Fatalf("declined reuse counted as a use: usage %d success %d", p.GetUsageCount(), p.GetSuccessCount())
	}
	list, err := ts.c.ListPatterns(t.Context(), &baagentv1.ListPatternsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetPatterns()); n != 1 {
		t.Fatalf("%d patterns after a declined reuse; want 1", n)
	}
	// Recorded all the same: the same run again is a duplicate.
	if again := record(t, ts.c, "acme", declined); !again.GetDuplicate() {
		t.Fatalf("second recording of the declined run: %v; want duplicate", again)
	}
}
