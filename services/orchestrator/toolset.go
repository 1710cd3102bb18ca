package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/allowlist"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/workplan"
)

// toolset is what the model is offered in a step.
type toolset struct {
	schemas []*baagentv1.ToolSchema              // sent to the model, the skill meta-tool included
	defs    map[string]*baagentv1.ToolDefinition // toolrunner tools by name
	names   []string                             // sorted names of defs
	// allow is passed to Invoke so the toolrunner enforces the same
	// restriction; nil when nothing restricts the run.
	allow *baagentv1.ToolAllowList
	skill bool     // whether the skill meta-tool is offered
	read  bool     // whether skill_read is offered (a skill is active)
	task  bool     // whether the task tool (sub-agents) is offered
	ask   []string // the ask tools offered
	plan  []string // the planning tools offered (plan, update_plan)
	// fingerprint identifies schemas for the context service, which then
	// needs them only once (BuildWindowRequest.tools_fingerprint).
	fingerprint string
}

// fingerprintOf is the hex SHA-256 of the schemas' deterministic
// encoding; empty for no schemas.
func fingerprintOf(schemas []*baagentv1.ToolSchema) string {
	if len(schemas) == 0 {
		return ""
	}
	h := sha256.New()
	for _, sc := range schemas {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(sc)
		if err != nil {
			return "" // sent in full every time instead
		}
		h.Write(strconv.AppendInt(nil, int64(len(b)), 10))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// listTools asks the toolrunner for the tools the active context modifier
// allows and keeps those that pass every allow list in force (the run's
// and each active skill's).
func (r *run) listTools(ctx context.Context, withSkill bool) (*toolset, error) {
	// Listed at the start of every execution (and when the skill stack
	// changes): a sub-agent whose delegating run has ended stops here.
	if err := r.checkParent(ctx); err != nil {
		return nil, err
	}
	lists := r.skills.AllowLists(r.spec.GetAllowedTools())
	var innermost *baagentv1.ToolAllowList
	if len(lists) > 0 {
		innermost = lists[len(lists)-1]
	}
	resp, err := r.s.opts.ToolRunner.ListTools(ctx, &baagentv1.ListToolsRequest{Tenant: r.rec.GetTenant(), AllowedTools: innermost})
	if err != nil {
		return nil, peerError(ctx, "toolrunner", "ListTools", err)
	}
	withSkill = withSkill && r.offersSkills()
	ts := &toolset{defs: map[string]*baagentv1.ToolDefinition{}, skill: withSkill, task: r.offersTask(lists)}
	for _, d := range resp.GetTools() {
		name := d.GetSchema().GetName()
		if name == "" || isBuiltin(name) || !allowlist.AllowsAll(lists, name) || ts.defs[name] != nil {
			continue
		}
		ts.defs[name] = d
		ts.names = append(ts.names, name)
		ts.schemas = append(ts.schemas, d.GetSchema())
	}
	slices.Sort(ts.names)
	if len(lists) > 0 {
		ts.allow = &baagentv1.ToolAllowList{Names: slices.Clone(ts.names)}
	}
	if withSkill {
		ts.schemas = append(ts.schemas, skillToolSchema())
	}
	// skill_read belongs to the skills the model activated: offered
	// whenever one is active, whatever the allow lists say, since it
	// reads only those skills' own folders.
	if ts.read = r.offersSkills() && r.skills.Depth() > 0; ts.read {
		ts.schemas = append(ts.schemas, skillReadToolSchema())
	}
	if ts.task {
		ts.schemas = append(ts.schemas, taskToolSchema(r.s.agents.All()))
	}
	// The ask tools pass only the run's own allow list: a skill's
	// allowed-tools never take away the model's way to ask the user (a
	// skill that listed only its data tools left runs unable to ask).
	var own []*baagentv1.ToolAllowList
	if spec := r.spec.GetAllowedTools(); len(spec) > 0 {
		own = []*baagentv1.ToolAllowList{{Names: spec}}
	}
	for _, sc := range hitl.AskToolSchemas() {
		if allowlist.AllowsAll(own, sc.GetName()) {
			ts.schemas = append(ts.schemas, sc)
			ts.ask = append(ts.ask, sc.GetName())
		}
	}
	ts.fingerprint = fingerprintOf(ts.schemas)
	return ts, nil
}

// isBuiltin reports whether name is a tool the orchestrator answers itself.
func isBuiltin(name string) bool {
	return name == SkillToolName || name == SkillReadToolName || name == AskClarificationTool || name == AskDecisionTool || name == TaskToolName ||
		name == workplan.PlanTool || name == workplan.UpdateTool
}
