package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/topology"
)

// skillsScope registers --tenant and --project.
func (c *cli) skillsScope(fs *pflag.FlagSet) (tenant, project *string) {
	def := c.getenv("BAAGENT_TENANT")
	if def == "" {
		def = "default"
	}
	tenant = fs.String("tenant", def, "tenant whose skills to read (env BAAGENT_TENANT)")
	project = fs.String("project", "", "project within the tenant (adds its project skills)")
	return tenant, project
}

// parsePositional parses args with fs and returns the positional arguments.
func (c *cli) parsePositional(fs *pflag.FlagSet, args []string) ([]string, error) {
	if err := c.parse(fs, args); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

func (c *cli) skillsClient() (baagentv1.SkillsServiceClient, func(), error) {
	conn, err := c.dial(topology.Skills)
	if err != nil {
		return nil, nil, err
	}
	return baagentv1.NewSkillsServiceClient(conn), func() { _ = conn.Close() }, nil
}

// rpcError turns a gRPC error into `Code: message` for the user.
func rpcError(service string, err error) error {
	st := status.Convert(err)
	return fmt.Errorf("%s: %s: %s", service, st.Code(), st.Message())
}

func runSkillsList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("skills list", "")
	tenant, project := c.skillsScope(fs)
	invalid := fs.Bool("invalid", false, "also list skills that failed validation, with the reason")
	scopeFlag := fs.String("scope", "", "layers to list: system, tenant, project or all, disabled and overridden skills included (default: the effective skills)")
	output := outputFlag(fs)
	rest, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	format, err := c.outputFormat(fs, *output)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, rest[0])
	}
	scope, err := skillScope(*scopeFlag, *project)
	if err != nil {
		return err
	}
	client, done, err := c.skillsClient()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := client.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: *tenant, Project: *project, IncludeInvalid: *invalid, Scope: scope})
	if err != nil {
		return rpcError("skills", err)
	}
	return c.printAs(format, resp, func() error { return c.printSkillsList(resp) })
}

// printSkillsList writes the skills table, their warnings and the skills
// that failed validation.
func (c *cli) printSkillsList(resp *baagentv1.ListSkillsResponse) error {
	if err := printSkillTable(c.stdout, resp.GetSkills()); err != nil {
		return err
	}
	printSkillWarnings(c, resp.GetSkills())
	if len(resp.GetInvalid()) > 0 {
		fmt.Fprintf(c.stdout, "\n%d not loaded:\n", len(resp.GetInvalid()))
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FOLDER\tLAYER\tREASON")
		for _, e := range resp.GetInvalid() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.GetFolder(), layerName(e.GetScope()), oneLine(e.GetReason(), 200))
		}
		return tw.Flush()
	}
	return nil
}

// skillLevels maps --level to the contract's levels.
var skillLevels = map[int]baagentv1.SkillLoadLevel{
	1: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_METADATA,
	2: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS,
	3: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES,
}

func runSkillsShow(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("skills show", "NAME")
	tenant, project := c.skillsScope(fs)
	level := fs.Int("level", 2, "disclosure level: 1 metadata, 2 instructions, 3 resources as well")
	resource := fs.String("resource", "", "print this resource file of the skill (path relative to its folder) instead")
	rest, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: want exactly one skill NAME", errUsage)
	}
	lvl, ok := skillLevels[*level]
	if !ok {
		return fmt.Errorf("%w: --level must be 1, 2 or 3", errUsage)
	}
	client, done, err := c.skillsClient()
	if err != nil {
		return err
	}
	defer done()
	if *resource != "" {
		return c.showResource(ctx, client, &baagentv1.ReadSkillResourceRequest{Tenant: *tenant, Project: *project, SkillName: rest[0], Path: *resource})
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := client.GetSkill(rctx, &baagentv1.GetSkillRequest{Tenant: *tenant, Project: *project, Name: rest[0], Level: lvl})
	if err != nil {
		return rpcError("skills", err)
	}
	if c.json {
		return c.printProto(resp)
	}
	m := resp.GetMetadata()
	fields := [][2]string{
		{"name", m.GetName()},
		{"layer", layerName(m.GetScope())},
		{"version", m.GetVersion()},
		{"description", oneLine(m.GetDescription(), 1<<10)},
		{"license", m.GetLicense()},
		{"compatibility", m.GetCompatibility()},
		{"allowed-tools", strings.Join(m.GetAllowedTools(), " ")},
		{"model", m.GetModel()},
		{"triggers", strings.Join(m.GetTriggers(), ", ")},
		{"resources", strings.Join(m.GetResources(), " ")},
	}
	if m.GetDisableModelInvocation() {
		fields = append(fields, [2]string{"disable-model-invocation", "true"})
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 1, ' ', 0)
	for _, f := range fields {
		if f[1] != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resp.GetBody() != "" {
		fmt.Fprintf(c.stdout, "\n%s\n", resp.GetBody())
	}
	for _, r := range resp.GetResources() {
		note := fmt.Sprintf("%d bytes", r.GetSizeBytes())
		switch {
		case r.GetContent() == "" && r.GetSizeBytes() > 0:
			note += ", binary or not shown"
		case r.GetTruncated():
			note += ", cut; read it whole with --resource " + r.GetPath()
		}
		fmt.Fprintf(c.stdout, "\n==> %s (%s) <==\n%s\n", r.GetPath(), note, r.GetContent())
	}
	return nil
}

// showResource prints a whole resource file, reading it page by page.
func (c *cli) showResource(ctx context.Context, client baagentv1.SkillsServiceClient, req *baagentv1.ReadSkillResourceRequest) error {
	var (
		content strings.Builder
		last    *baagentv1.ReadSkillResourceResponse
	)
	for {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		resp, err := client.ReadSkillResource(rctx, req)
		cancel()
		if err != nil {
			return rpcError("skills", err)
		}
		content.WriteString(resp.GetContent())
		last = resp
		if resp.GetNextOffset() >= resp.GetSizeBytes() || resp.GetNextOffset() <= req.GetOffset() {
			break
		}
		req.Offset = resp.GetNextOffset()
	}
	if c.json {
		return c.printProto(&baagentv1.ReadSkillResourceResponse{Content: content.String(), SizeBytes: last.GetSizeBytes(), NextOffset: last.GetNextOffset()})
	}
	_, err := fmt.Fprint(c.stdout, content.String())
	return err
}

func layerName(s baagentv1.SkillScope) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SKILL_SCOPE_"))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine collapses whitespace and cuts s to max characters for a table.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
