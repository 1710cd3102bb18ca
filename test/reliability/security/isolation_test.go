package security

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/test/reliability/harness"
)

const (
	keyAcme   = "acme-key-6f1c0d2e9b8a7f65"
	keyGlobex = "globex-key-1a2b3c4d5e6f7a8b"
)

func twoTenants(t *testing.T) (*harness.Suite, *tenantClient, *tenantClient) {
	t.Helper()
	s := harness.Start(t, harness.Args(t, "-api-keys="+keyAcme+"=acme,"+keyGlobex+"=globex"), nil)
	return s, gateway(t, s, keyAcme), gateway(t, s, keyGlobex)
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if status.Code(err) != want {
		t.Errorf("%s: %v, want %s", what, err, want)
	}
}

// TestRunsAreInvisibleToOtherTenants: another tenant's run is NotFound
// (never PermissionDenied, which would confirm it exists) on every run RPC
// and on the event stream, and never listed.
func TestRunsAreInvisibleToOtherTenants(t *testing.T) {
	s, acme, globex := twoTenants(t)
	run, events := acme.runToEnd(t, &baagentv1.RunSpec{Input: question, ConversationId: "conv-shared-name"})
	if len(events) == 0 || events[len(events)-1].GetType() != "complete" {
		t.Fatalf("acme's run did not complete: %d events", len(events))
	}
	id := run.GetRunId()
	ctx := globex.ctx(t)

	_, err := globex.gw.GetRun(ctx, &baagentv1.GetRunRequest{RunId: id})
	wantCode(t, "GetRun of another tenant's run", err, codes.NotFound)
	_, err = globex.gw.CancelRun(ctx, &baagentv1.CancelRunRequest{RunId: id})
	wantCode(t, "CancelRun of another tenant's run", err, codes.NotFound)
	_, err = globex.gw.SubmitInput(ctx, &baagentv1.SubmitInputRequest{RunId: id, Input: &baagentv1.RunInput{InputId: "input_1", Answer: "yes"}})
	wantCode(t, "SubmitInput to another tenant's run", err, codes.NotFound)
	stream, err := globex.gw.StreamRunEvents(ctx, &baagentv1.StreamRunEventsRequest{RunId: id})
	if err == nil {
		var resp *baagentv1.StreamRunEventsResponse
		resp, err = stream.Recv()
		if err == nil {
			t.Fatalf("globex received an event of acme's run: %v", resp)
		}
	}
	wantCode(t, "StreamRunEvents of another tenant's run", err, codes.NotFound)

	for _, conv := range []string{"", "conv-shared-name"} {
		list, err := globex.gw.ListRuns(ctx, &baagentv1.ListRunsRequest{ConversationId: conv})
		if err != nil {
			t.Fatalf("globex ListRuns(%q): %v", conv, err)
		}
		for _, r := range list.GetRuns() {
			if r.GetRunId() == id {
				t.Errorf("globex ListRuns(%q) lists acme's run", conv)
			}
		}
	}
	// acme still sees its own run: the NotFound above is isolation, not loss.
	if got, err := acme.gw.GetRun(acme.ctx(t), &baagentv1.GetRunRequest{RunId: id}); err != nil || got.GetRun().GetRunId() != id {
		t.Fatalf("acme GetRun of its own run: %v %v", got, err)
	}

	// The same conversation id in another tenant is another conversation:
	// the history service keys it by tenant.
	history := baagentv1.NewContextServiceClient(dialInternal(t, s, config.TargetContext))
	own, err := history.GetHistory(ctx, &baagentv1.GetHistoryRequest{Tenant: "acme", ConversationId: "conv-shared-name"})
	if err != nil || len(own.GetMessages()) == 0 {
		t.Fatalf("acme's history of its conversation: %d messages, %v", len(own.GetMessages()), err)
	}
	other, err := history.GetHistory(ctx, &baagentv1.GetHistoryRequest{Tenant: "globex", ConversationId: "conv-shared-name"})
	if status.Code(err) != codes.NotFound && (err != nil || len(other.GetMessages()) != 0) {
		t.Errorf("globex's history of acme's conversation id: %d messages, %v", len(other.GetMessages()), err)
	}
}

// TestSkillLayersAreTenantScoped: a tenant's own skill and its override of
// a system skill are visible to that tenant only.
func TestSkillLayersAreTenantScoped(t *testing.T) {
	s, acme, globex := twoTenants(t)
	names := func(c *tenantClient) map[string]bool {
		resp, err := c.gw.ListSkills(c.ctx(t), &baagentv1.GatewayServiceListSkillsRequest{})
		if err != nil {
			t.Fatalf("ListSkills: %v", err)
		}
		out := map[string]bool{}
		for _, m := range resp.GetSkills() {
			out[m.GetName()] = true
		}
		return out
	}
	if !names(acme)["data-governance-check"] {
		t.Fatal("acme does not see its own skill data-governance-check")
	}
	if names(globex)["data-governance-check"] {
		t.Error("globex lists acme's skill data-governance-check")
	}
	_, err := globex.gw.GetSkill(globex.ctx(t), &baagentv1.GatewayServiceGetSkillRequest{Name: "data-governance-check", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS})
	wantCode(t, "globex GetSkill of acme's skill", err, codes.NotFound)

	// acme's executive-summary overrides the system one; globex gets the system one.
	body := func(c *tenantClient) string {
		resp, err := c.gw.GetSkill(c.ctx(t), &baagentv1.GatewayServiceGetSkillRequest{Name: "executive-summary", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS})
		if err != nil {
			t.Fatalf("GetSkill executive-summary: %v", err)
		}
		return resp.GetBody()
	}
	if a, g := body(acme), body(globex); a == g {
		t.Error("acme's executive-summary override is what globex sees too")
	}

	// Resources: acme's reference file is not readable as globex, also not
	// through traversal from a system skill.
	skills := baagentv1.NewSkillsServiceClient(dialInternal(t, s, config.TargetSkills))
	ctx := globex.ctx(t)
	if _, err := skills.ReadSkillResource(acme.ctx(t), &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "data-governance-check", Path: "references/thresholds.md"}); err != nil {
		t.Fatalf("acme reads its own skill resource: %v", err)
	}
	_, err = skills.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "globex", SkillName: "data-governance-check", Path: "references/thresholds.md"})
	wantCode(t, "globex ReadSkillResource of acme's skill", err, codes.NotFound)
	for _, p := range []string{
		"../../tenants/acme/data-governance-check/references/thresholds.md",
		"../tenants/acme/data-governance-check/references/thresholds.md",
		"/etc/passwd", "references/../../../../etc/passwd", "references/./../SKILL.md/..",
	} {
		resp, err := skills.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "globex", SkillName: "sales-analysis", Path: p})
		if err == nil {
			t.Errorf("ReadSkillResource(sales-analysis, %q) served %d bytes", p, len(resp.String()))
			continue
		}
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.NotFound {
			t.Errorf("ReadSkillResource(%q): %v, want InvalidArgument or NotFound", p, err)
		}
	}
}

// TestToolWorkspacesAndArtifactsAreTenantScoped: a file one tenant writes
// in a conversation, and the artifacts of its results, are not reachable
// by another tenant using the same conversation id, nor by path tricks.
func TestToolWorkspacesAndArtifactsAreTenantScoped(t *testing.T) {
	s, acme, globex := twoTenants(t)
	const conv = "conv-tools"
	const secret = "acme-confidential-7781"
	calls := 0
	level := baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD
	invoke := func(c *tenantClient, tool string, args map[string]any) *baagentv1.ToolExecutionResult {
		t.Helper()
		calls++
		p, err := structpb.NewStruct(args)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.gw.InvokeTool(c.ctx(t), &baagentv1.InvokeToolRequest{ToolName: tool, Parameters: p, ConversationId: conv, OutputLevel: level, ToolCallId: fmt.Sprintf("call_%d", calls)})
		if err != nil {
			t.Fatalf("InvokeTool %s %v: %v", tool, args, err)
		}
		return resp.GetResult()
	}
	if r := invoke(acme, "file_write", map[string]any{"path": "notes/secret.txt", "content": secret}); !r.GetSuccess() {
		t.Fatalf("acme file_write: %s", r.GetObservation())
	}
	if r := invoke(acme, "file_read", map[string]any{"path": "notes/secret.txt"}); !strings.Contains(r.GetObservation(), secret) {
		t.Fatalf("acme cannot read back its file: %s", r.GetObservation())
	}
	for _, p := range []string{
		"notes/secret.txt", "../acme/" + conv + "/notes/secret.txt", "../../acme/" + conv + "/notes/secret.txt",
		"../../../acme/" + conv + "/notes/secret.txt", "/notes/secret.txt", "notes/../../" + conv + "/notes/secret.txt",
	} {
		r := invoke(globex, "file_read", map[string]any{"path": p})
		if r.GetSuccess() || strings.Contains(r.GetObservation(), secret) {
			t.Errorf("globex file_read(%q) in acme's conversation id: success=%v %q", p, r.GetSuccess(), r.GetObservation())
		}
	}

	// An artifact of acme's: a large result is stored and referenced by id.
	level = baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	big := invoke(acme, "file_read", map[string]any{"path": "orders.csv"})
	artifact := big.GetArtifactId()
	if artifact == "" {
		t.Fatalf("reading orders.csv stored no artifact (%d bytes): cannot test artifact isolation", big.GetDataSizeBytes())
	}
	if r := invoke(acme, "artifact_read", map[string]any{"artifact_id": artifact}); !r.GetSuccess() {
		t.Fatalf("acme artifact_read of its own artifact: %s", r.GetObservation())
	}
	if r := invoke(globex, "artifact_read", map[string]any{"artifact_id": artifact}); r.GetSuccess() {
		t.Errorf("globex artifact_read of acme's artifact succeeded: %.200s", r.GetObservation())
	}
	runner := baagentv1.NewToolRunnerServiceClient(dialInternal(t, s, config.TargetToolRunner))
	if _, err := runner.ReadArtifact(globex.ctx(t), &baagentv1.ReadArtifactRequest{Tenant: "acme", ConversationId: conv, ArtifactId: artifact}); err != nil {
		t.Fatalf("ReadArtifact as acme: %v", err)
	}
	_, err := runner.ReadArtifact(globex.ctx(t), &baagentv1.ReadArtifactRequest{Tenant: "globex", ConversationId: conv, ArtifactId: artifact})
	wantCode(t, "ReadArtifact of acme's artifact as globex", err, codes.NotFound)
	for _, id := range []string{"../acme/" + artifact, artifact + "/..", "artifact_../../x"} {
		_, err := runner.ReadArtifact(globex.ctx(t), &baagentv1.ReadArtifactRequest{Tenant: "globex", ConversationId: conv, ArtifactId: id})
		wantCode(t, "ReadArtifact("+id+")", err, codes.InvalidArgument)
	}
	for _, conv := range []string{"../acme", "..", "a/b", "."} {
		_, err := runner.ReadArtifact(globex.ctx(t), &baagentv1.ReadArtifactRequest{Tenant: "globex", ConversationId: conv, ArtifactId: artifact})
		wantCode(t, "ReadArtifact(conversation "+conv+")", err, codes.InvalidArgument)
	}
}
