package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"strings"
	"text/tabwriter"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Managing a tenant's skills through the gateway's public API: the tenant
// is the API key's, as for runs. (skills list and show read the skills
// service directly, as an operator.)

// skillScopes maps --scope to the contract's filter.
var skillScopes = map[string]baagentv1.SkillScopeFilter{
	"":        baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED,
	"system":  baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM,
	"tenant":  baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_TENANT,
	"project": baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT,
	"all":     baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL,
}

// skillScope parses --scope; a project listing needs --project.
func skillScope(scope, project string) (baagentv1.SkillScopeFilter, error) {
	f, ok := skillScopes[scope]
	if !ok {
		return 0, fmt.Errorf("%w: --scope must be system, tenant, project or all (default: the effective skills)", errUsage)
	}
	if f == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT && project == "" {
		return 0, fmt.Errorf("%w: --scope project needs --project", errUsage)
	}
	return f, nil
}

// printSkillTable writes skills as a table with their layer, where their
// files live, their revision and whether they are disabled or overridden.
func printSkillTable(w io.Writer, skills []*baagentv1.SkillMetadata) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLAYER\tSOURCE\tREVISION\tDISABLED\tOVERRIDDEN\tVERSION\tTOOLS\tDESCRIPTION")
	for _, s := range skills {
		tools := "any"
		if len(s.GetAllowedTools()) > 0 {
			tools = strings.Join(s.GetAllowedTools(), ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetName(), layerName(s.GetScope()), sourceName(s.GetSource()),
			dash(s.GetRevision()), yesNo(s.GetIsDisabled()), yesNo(s.GetIsOverridden()), dash(s.GetVersion()), tools, oneLine(s.GetDescription(), 72))
	}
	return tw.Flush()
}

func sourceName(s baagentv1.SkillSource) string {
	switch s {
	case baagentv1.SkillSource_SKILL_SOURCE_FILES:
		return "files"
	case baagentv1.SkillSource_SKILL_SOURCE_STORE:
		return "store"
	}
	return "-"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// skillWriteFlags are the flags of the commands that change a skill.
type skillWriteFlags struct {
	rf      runFlags
	project *string
}

func (c *cli) skillWriteFlags(fs *pflag.FlagSet) *skillWriteFlags {
	f := &skillWriteFlags{}
	c.addRunFlags(fs, &f.rf)
	f.project = fs.String("project", "", "project within the API key's tenant (default: the tenant layer)")
	return f
}

// layerText names where a write goes, for messages.
func (f *skillWriteFlags) layerText() string {
	if *f.project != "" {
		return "project " + *f.project
	}
	return "the tenant"
}

func runSkillsPush(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("skills push", "DIR|FILE")
	wf := c.skillWriteFlags(fs)
	ifMatch := fs.String("if-match", "", "replace only if the stored skill is at this revision")
	create := fs.Bool("create", false, "create only: fail if the skill already exists")
	maxBytes := fs.Int64("max-bytes", defaultMaxSkillBytes, "largest upload (the gateway's -gateway-max-skill-bytes)")
	rest, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: want exactly one skill folder or file", errUsage)
	}
	if *create && *ifMatch != "" {
		return fmt.Errorf("%w: --create and --if-match exclude each other", errUsage)
	}
	p, err := packSkill(rest[0], *maxBytes)
	if err != nil {
		return err
	}
	return c.pushSkill(ctx, wf, p, *ifMatch, *create, "")
}

// pushSkill sends a packed skill and reports it; verb overrides the
// created/replaced wording.
func (c *cli) pushSkill(ctx context.Context, wf *skillWriteFlags, p *packedSkill, ifMatch string, create bool, verb string) error {
	ctx, gw, release, err := c.gatewayCall(ctx, wf.rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.PutSkill(ctx, &baagentv1.GatewayServicePutSkillRequest{
		Project: *wf.project, Name: p.name, Content: p.content, Format: p.format, IfMatch: ifMatch, IfNoneMatch: create,
	})
	if err != nil {
		return c.rpcError("push skill "+p.name, err)
	}
	if c.json {
		return c.printProto(resp)
	}
	if verb == "" {
		verb = "created"
		if resp.GetReplaced() {
			verb = "replaced"
		}
	}
	what := fmt.Sprintf("%d bytes", len(p.content))
	if p.files > 0 {
		what = fmt.Sprintf("%d files, %d bytes packed", p.files, len(p.content))
	}
	fmt.Fprintf(c.stdout, "%s skill %s for %s: revision %s (%s)\n", verb, p.name, wf.layerText(), dash(resp.GetSkill().GetRevision()), what)
	for _, w := range resp.GetSkill().GetWarnings() {
		fmt.Fprintf(c.stdout, "warning: %s\n", w)
	}
	return nil
}

func runSkillsRm(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("skills rm", "NAME")
	wf := c.skillWriteFlags(fs)
	ifMatch := fs.String("if-match", "", "delete only if the stored skill is at this revision")
	rest, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: want exactly one skill NAME", errUsage)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, wf.rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.DeleteSkill(ctx, &baagentv1.GatewayServiceDeleteSkillRequest{Project: *wf.project, Name: rest[0], IfMatch: *ifMatch})
	if err != nil {
		return c.rpcError("delete skill "+rest[0], err)
	}
	if c.json {
		return c.printProto(resp)
	}
	_, err = fmt.Fprintf(c.stdout, "deleted skill %s of %s (revision %s)\n", rest[0], wf.layerText(), dash(resp.GetRevision()))
	return err
}

func runSkillsState(ctx context.Context, c *cli, args []string, disabled bool) error {
	verb := map[bool]string{true: "disable", false: "enable"}[disabled]
	fs := c.flagSet("skills "+verb, "NAME")
	wf := c.skillWriteFlags(fs)
	rest, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: want exactly one system skill NAME", errUsage)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, wf.rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.SetSystemSkillState(ctx, &baagentv1.GatewayServiceSetSystemSkillStateRequest{Project: *wf.project, Name: rest[0], Disabled: disabled})
	if err != nil {
		return c.rpcError(verb+" skill "+rest[0], err)
	}
	if c.json {
		return c.printProto(resp)
	}
	_, err = fmt.Fprintf(c.stdout, "%sd system skill %s for %s\n", verb, rest[0], wf.layerText())
	return err
}

// runSkillsOverride pushes a tenant (or project) skill named like a system
// skill, which then hides it. It checks first that the system skill
// exists, so a typo does not silently create a new skill.
func runSkillsOverride(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("skills override", "NAME DIR|FILE")
	wf := c.skillWriteFlags(fs)
	ifMatch := fs.String("if-match", "", "replace only if the stored override is at this revision")
	maxBytes := fs.Int64("max-bytes", defaultMaxSkillBytes, "largest upload (the gateway's -gateway-max-skill-bytes)")
	rest, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		return fmt.Errorf("%w: want the system skill NAME and the folder or file overriding it", errUsage)
	}
	name := rest[0]
	p, err := packSkill(rest[1], *maxBytes)
	if err != nil {
		return err
	}
	if p.name != name {
		return fmt.Errorf("%s is skill %q, not %q: an override must have the system skill's name", rest[1], p.name, name)
	}
	if err := c.requireSystemSkill(ctx, wf, name); err != nil {
		return err
	}
	return c.pushSkill(ctx, wf, p, *ifMatch, false, "overrode system")
}

// errNoSystemSkill is returned when an override names no system skill.
var errNoSystemSkill = errors.New("no such system skill")

func (c *cli) requireSystemSkill(ctx context.Context, wf *skillWriteFlags, name string) error {
	ctx, gw, release, err := c.gatewayCall(ctx, wf.rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.ListSkills(ctx, &baagentv1.GatewayServiceListSkillsRequest{Project: *wf.project, Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM})
	if err != nil {
		return c.rpcError("list system skills", err)
	}
	for _, s := range resp.GetSkills() {
		if s.GetName() == name {
			return nil
		}
	}
	return fmt.Errorf("%w %q to override (skills list --scope system lists them); push it as a new skill instead", errNoSystemSkill, name)
}
