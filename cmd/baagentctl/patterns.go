package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The pattern commands (docs/concepts/patterns.md), through the gateway
// for the API key's tenant.

// maxStepsFileBytes bounds a --steps-file and the document $EDITOR
// returns: twenty steps of a few KiB each.
const maxStepsFileBytes = 256 << 10

// uselessDays is how long a pattern marked useless keeps its signature
// from being learned again (MarkPatternUselessRequest, patterns.proto).
const uselessDays = 180

func patternsSpec() spec {
	return spec{use: "patterns", short: "List, inspect, edit, delete and share the tenant's interaction patterns",
		long: "patterns talks to the gateway (--addr, env BAAGENT_ADDR) for the API key's\ntenant (--api-key, env BAAGENT_API_KEY). An interaction pattern is a way of\ndoing one kind of task, learned from successful runs and offered to later\nruns of the same kind (docs/concepts/patterns.md).",
		subs: []spec{
			{use: "list", short: "List patterns, most recently updated first", run: patternsList,
				example: "  baagentctl patterns list\n  baagentctl patterns list --task-type report --state active --shared -o json"},
			{use: "show PATTERN_ID", short: "Show a pattern: signature, steps, tool chains, decisions, counters, gates", run: patternsShow,
				example: "  baagentctl patterns show pt_01HZX3\n  baagentctl patterns show pt_01HZX3 -o yaml"},
			{use: "edit PATTERN_ID", short: "Edit a pattern's name, description, steps or tool chain (flags, or $EDITOR)", run: patternsEdit,
				long:    "edit changes what the flags give; with none it opens $EDITOR (or $VISUAL, else vi)\non a YAML document of the editable fields and sends only what changed,\nwith the version it read: if the pattern changed meanwhile the edit is\nrefused and nothing is written.",
				example: "  baagentctl patterns edit pt_01HZX3 --name \"Regional revenue report\"\n  baagentctl patterns edit pt_01HZX3 --tool-chain sql_query,chart\n  baagentctl patterns edit pt_01HZX3 --steps-file steps.yaml\n  baagentctl patterns edit pt_01HZX3"},
			{use: "rm PATTERN_ID", short: "Delete a pattern (needs --yes); it may be learned again", run: patternsRm,
				example: "  baagentctl patterns rm pt_01HZX3 --yes"},
			{use: "mark-useless PATTERN_ID", short: "Delete a pattern and keep its kind of task from being learned for 180 days", run: patternsMarkUseless,
				example: "  baagentctl patterns mark-useless pt_01HZX3 --reason \"picks the wrong table\""},
			{use: "grant PATTERN_ID TENANT", short: "Share a pattern with another tenant, read-only", run: patternsGrant,
				example: "  baagentctl patterns grant pt_01HZX3 globex"},
			{use: "revoke PATTERN_ID TENANT", short: "Stop sharing a pattern with a tenant", run: patternsRevoke,
				example: "  baagentctl patterns revoke pt_01HZX3 globex"},
			{use: "grants [PATTERN_ID]", short: "List the tenant's grants (of one pattern, or all)", run: patternsGrants,
				example: "  baagentctl patterns grants\n  baagentctl patterns grants pt_01HZX3 -o json"},
		}}
}

func patternStateName(s baagentv1.PatternState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "PATTERN_STATE_"))
}

func parsePatternStateFlag(v string) (baagentv1.PatternState, error) {
	if v == "" {
		return baagentv1.PatternState_PATTERN_STATE_UNSPECIFIED, nil
	}
	n, ok := baagentv1.PatternState_value["PATTERN_STATE_"+strings.ToUpper(v)]
	if !ok || n == 0 {
		return 0, fmt.Errorf("%w: --state: want candidate, active, draft, untrusted or archived, got %q", errUsage, v)
	}
	return baagentv1.PatternState(n), nil
}

func patternsList(ctx context.Context, c *cli, args []string) error {
	var taskType, state, pageToken string
	var shared bool
	var pageSize int
	_, rf, format, err := c.memoryFlags("patterns list", "", args, 0, func(fs *pflag.FlagSet) {
		fs.StringVar(&taskType, "task-type", "", "only this task type (report, comparison, trend, ranking, breakdown, data_quality, lookup)")
		fs.StringVar(&state, "state", "", "only patterns in this state: candidate, active, draft, untrusted or archived")
		fs.BoolVar(&shared, "shared", false, "include patterns other tenants shared with this one")
		fs.IntVar(&pageSize, "page-size", 0, "patterns per page (default 50, at most 500)")
		fs.StringVar(&pageToken, "page-token", "", "page token printed by a previous list")
	})
	if err != nil {
		return err
	}
	st, err := parsePatternStateFlag(state)
	if err != nil {
		return err
	}
	req := &baagentv1.GatewayServiceListPatternsRequest{TaskType: taskType, State: st, IncludeShared: shared, PageSize: clampInt32(pageSize), PageToken: pageToken}
	return memoryCall(ctx, c, rf, format, "list patterns", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceListPatternsResponse, error) {
		return gw.ListPatterns(ctx, req)
	}, func(resp *baagentv1.GatewayServiceListPatternsResponse) error {
		if len(resp.GetPatterns()) == 0 {
			fmt.Fprintln(c.stdout, "no patterns")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATTERN_ID\tNAME\tSTATE\tUSES\tSUCCESS\tUPDATED")
		for _, p := range resp.GetPatterns() {
			name := shorten(p.GetName(), 50)
			if p.GetShared() {
				name += " (shared by " + p.GetTenant() + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", p.GetId(), name, patternStateName(p.GetState()), p.GetUsageCount(),
				successRate(p), localTime(p.GetUpdatedAt(), time.DateTime))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if t := resp.GetNextPageToken(); t != "" {
			fmt.Fprintf(c.stdout, "\nmore: baagentctl patterns list --page-token %s\n", t)
		}
		return nil
	})
}

// successRate is a pattern's success rate as a percentage, "-" before its
// first use.
func successRate(p *baagentv1.InteractionPattern) string {
	if p.GetUsageCount() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*p.GetSuccessRate())
}

func patternsShow(ctx context.Context, c *cli, args []string) error {
	fs, rf, format, err := c.memoryFlags("patterns show", "PATTERN_ID", args, 1, nil)
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	return memoryCall(ctx, c, rf, format, "get pattern", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGetPatternResponse, error) {
		return gw.GetPattern(ctx, &baagentv1.GatewayServiceGetPatternRequest{Id: id})
	}, func(resp *baagentv1.GatewayServiceGetPatternResponse) error {
		return c.printPattern(resp.GetPattern(), time.Now())
	})
}

// printPattern writes everything about a pattern, as text.
func (c *cli) printPattern(p *baagentv1.InteractionPattern, now time.Time) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("pattern", p.GetId())
	row("name", p.GetName())
	row("description", p.GetDescription())
	if p.GetShared() {
		row("shared by", p.GetTenant()+" (read-only)")
	}
	sig := p.GetTaskType()
	if ts := p.GetEntityTypes(); len(ts) > 0 {
		sig += " + " + strings.Join(ts, ", ")
	} else {
		sig += " (any entity types)"
	}
	row("signature", sig)
	if es := p.GetEntities(); len(es) > 0 {
		row("entities", shorten(strings.Join(es, ", "), 200))
	}
	row("state", patternStateName(p.GetState()))
	row("version", fmt.Sprint(p.GetVersion()))
	row("uses", fmt.Sprintf("%d (%d succeeded, %d failed, %d failures in a row)", p.GetUsageCount(), p.GetSuccessCount(), p.GetFailureCount(), p.GetConsecutiveFailures()))
	row("success rate", fmt.Sprintf("%s (effective %.0f%%)", successRate(p), 100*p.GetEffectiveSuccessRate()))
	if d := p.GetAvgDurationMs(); d > 0 {
		row("average run", (time.Duration(d) * time.Millisecond).Round(time.Second).String())
	}
	row("created", localTime(p.GetCreatedAt(), time.RFC3339))
	row("updated", localTime(p.GetUpdatedAt(), time.RFC3339))
	row("last queried", localTime(p.GetLastQueriedAt(), time.RFC3339))
	row("last used", localTime(p.GetLastUsedAt(), time.RFC3339))
	if err := tw.Flush(); err != nil {
		return err
	}
	if steps := p.GetSteps(); len(steps) > 0 {
		fmt.Fprintln(c.stdout, "\nsteps:")
		for i, s := range steps {
			fmt.Fprintf(c.stdout, "  %d. %s\n", i+1, s.GetDescription())
			if len(s.GetTools()) > 0 {
				fmt.Fprintf(c.stdout, "     tools: %s\n", strings.Join(s.GetTools(), ", "))
			}
			if s.GetExpectedOutput() != "" {
				fmt.Fprintf(c.stdout, "     expect: %s\n", s.GetExpectedOutput())
			}
			for _, corr := range s.GetCorrections() {
				fmt.Fprintf(c.stdout, "     correction: %s\n", corr)
			}
		}
	}
	if chains := p.GetToolChains(); len(chains) > 0 {
		fmt.Fprintln(c.stdout, "\ntool chains (best first):")
		for _, ch := range chains {
			fmt.Fprintf(c.stdout, "  %s\n", strings.Join(ch.GetTools(), " → "))
		}
	}
	if ds := p.GetDecisions(); len(ds) > 0 {
		fmt.Fprintln(c.stdout, "\ndecisions:")
		for _, d := range ds {
			fmt.Fprintf(c.stdout, "  %s\n", d.GetQuestion())
			if d.GetRecommended() != "" {
				fmt.Fprintf(c.stdout, "     recommended: %s\n", d.GetRecommended())
			}
			if len(d.GetChoices()) > 0 {
				keys := make([]string, 0, len(d.GetChoices()))
				for k := range d.GetChoices() {
					keys = append(keys, k)
				}
				slices.SortFunc(keys, func(a, b string) int {
					if n := d.GetChoices()[b] - d.GetChoices()[a]; n != 0 {
						return int(n)
					}
					return strings.Compare(a, b)
				})
				parts := make([]string, len(keys))
				for i, k := range keys {
					parts[i] = fmt.Sprintf("%s ×%d", k, d.GetChoices()[k])
				}
				fmt.Fprintf(c.stdout, "     chosen: %s\n", strings.Join(parts, ", "))
			}
		}
	}
	if sf := p.GetSuccessFactors(); sf != nil && (sf.GetClarificationsNeeded() > 0 || len(sf.GetCriticalDecisions()) > 0 || len(sf.GetCommonCorrections()) > 0) {
		fmt.Fprintln(c.stdout, "\nsuccess factors:")
		if n := sf.GetClarificationsNeeded(); n > 0 {
			fmt.Fprintf(c.stdout, "  clarifications needed: %d\n", n)
		}
		for _, q := range sf.GetCriticalDecisions() {
			fmt.Fprintf(c.stdout, "  critical decision: %s\n", q)
		}
		for _, corr := range sf.GetCommonCorrections() {
			fmt.Fprintf(c.stdout, "  common correction: %s\n", corr)
		}
	}
	fmt.Fprintln(c.stdout, "\ngates:")
	for _, g := range patternGates(p, now) {
		fmt.Fprintf(c.stdout, "  %s\n", g)
	}
	return nil
}

// patternGates is the quality gates of docs/concepts/patterns.md as a
// checklist for one pattern: the admission gates an active pattern passes
// and the demotions it must avoid.
func patternGates(p *baagentv1.InteractionPattern, now time.Time) []string {
	mark := func(ok bool) string {
		if ok {
			return "✓"
		}
		return "✗"
	}
	rate := p.GetEffectiveSuccessRate()
	queried := p.GetLastQueriedAt() != nil && now.Sub(p.GetLastQueriedAt().AsTime()) <= patterns.QueryWindow
	return []string{
		fmt.Sprintf("%s at least %d successes (%d)", mark(p.GetSuccessCount() >= patterns.MinSuccesses), patterns.MinSuccesses, p.GetSuccessCount()),
		fmt.Sprintf("%s effective success rate at least %.0f%% (%.0f%%)", mark(rate >= patterns.MinSuccessRate), 100*patterns.MinSuccessRate, 100*rate),
		fmt.Sprintf("%s queried within %d days", mark(queried), int(patterns.QueryWindow/(24*time.Hour))),
		fmt.Sprintf("%s at most %d failures in a row (%d)", mark(p.GetConsecutiveFailures() <= patterns.UntrustedAfterFailures), patterns.UntrustedAfterFailures, p.GetConsecutiveFailures()),
		fmt.Sprintf("%s used within %d days", mark(!archivedBy(p, now)), int(patterns.ArchiveAfter/(24*time.Hour))),
	}
}

// archivedBy reports a pattern neither used nor edited for ArchiveAfter.
func archivedBy(p *baagentv1.InteractionPattern, now time.Time) bool {
	var last time.Time
	for _, ts := range []*timestamppb.Timestamp{p.GetLastUsedAt(), p.GetUpdatedAt(), p.GetCreatedAt()} {
		if t := ts.AsTime(); ts != nil && t.After(last) {
			last = t
		}
	}
	return !last.IsZero() && now.Sub(last) > patterns.ArchiveAfter
}

// stepDoc is a step as --steps-file and the editor document write it.
type stepDoc struct {
	Description    string   `yaml:"description" json:"description"`
	Tools          []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	ExpectedOutput string   `yaml:"expected_output,omitempty" json:"expected_output,omitempty"`
	Corrections    []string `yaml:"corrections,omitempty" json:"corrections,omitempty"`
}

// editDoc is the editable part of a pattern, the document $EDITOR opens.
type editDoc struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	ToolChain   []string  `yaml:"tool_chain,flow"`
	Steps       []stepDoc `yaml:"steps"`
}

func stepDocs(steps []*baagentv1.PatternStep) []stepDoc {
	out := make([]stepDoc, len(steps))
	for i, s := range steps {
		out[i] = stepDoc{Description: s.GetDescription(), Tools: s.GetTools(), ExpectedOutput: s.GetExpectedOutput(), Corrections: s.GetCorrections()}
	}
	return out
}

func stepProtos(docs []stepDoc) []*baagentv1.PatternStep {
	out := make([]*baagentv1.PatternStep, len(docs))
	for i, d := range docs {
		out[i] = &baagentv1.PatternStep{Description: strings.TrimSpace(d.Description), Tools: d.Tools, ExpectedOutput: strings.TrimSpace(d.ExpectedOutput), Corrections: d.Corrections}
	}
	return out
}

func editDocOf(p *baagentv1.InteractionPattern) editDoc {
	d := editDoc{Name: p.GetName(), Description: p.GetDescription(), Steps: stepDocs(p.GetSteps())}
	if chains := p.GetToolChains(); len(chains) > 0 {
		d.ToolChain = chains[0].GetTools()
	}
	return d
}

// parseStepsDoc reads a list of steps written in YAML or JSON (JSON is
// YAML); an unknown key is an error, so that a typo is not dropped.
func parseStepsDoc(data []byte) ([]stepDoc, error) {
	var steps []stepDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&steps); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no steps: want a list of {description, tools, expected_output, corrections}")
		}
		return nil, fmt.Errorf("want a list of {description, tools, expected_output, corrections}: %w", err)
	}
	if len(steps) == 0 {
		return nil, errors.New("no steps: a pattern keeps at least one step")
	}
	return steps, nil
}

// parseEditDoc reads the document the editor returns.
func parseEditDoc(data []byte) (editDoc, error) {
	var d editDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		if errors.Is(err, io.EOF) {
			return d, errors.New("the document is empty")
		}
		return d, err
	}
	return d, nil
}

// diffEdit is the edit that turns was into now: only what changed.
func diffEdit(was, now editDoc) *baagentv1.PatternEdit {
	ed := &baagentv1.PatternEdit{}
	if n := strings.TrimSpace(now.Name); n != was.Name {
		ed.Name = &n
	}
	if d := strings.TrimSpace(now.Description); d != strings.TrimSpace(was.Description) {
		ed.Description = &d
	}
	if !slices.Equal(now.ToolChain, was.ToolChain) {
		ed.ToolChain = &baagentv1.ToolChain{Tools: now.ToolChain}
	}
	if !slices.EqualFunc(now.Steps, was.Steps, func(a, b stepDoc) bool {
		return strings.TrimSpace(a.Description) == b.Description && slices.Equal(a.Tools, b.Tools) &&
			strings.TrimSpace(a.ExpectedOutput) == b.ExpectedOutput && slices.Equal(a.Corrections, b.Corrections)
	}) {
		ed.ReplaceSteps, ed.Steps = true, stepProtos(now.Steps)
	}
	return ed
}

func emptyEdit(ed *baagentv1.PatternEdit) bool {
	return ed.Name == nil && ed.Description == nil && ed.ToolChain == nil && !ed.GetReplaceSteps()
}

func patternsEdit(ctx context.Context, c *cli, args []string) error {
	var name, description, toolChain, stepsFile string
	fs, rf, format, err := c.memoryFlags("patterns edit", "PATTERN_ID", args, 1, func(fs *pflag.FlagSet) {
		fs.StringVar(&name, "name", "", "new name")
		fs.StringVar(&description, "description", "", "new description")
		fs.StringVar(&toolChain, "tool-chain", "", "new best tool chain, comma-separated (sql_query,chart)")
		fs.StringVar(&stepsFile, "steps-file", "", "replace the steps with the list in this JSON or YAML file (- : standard input)")
	})
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	ed := &baagentv1.PatternEdit{}
	if fs.Changed("name") {
		ed.Name = &name
	}
	if fs.Changed("description") {
		ed.Description = &description
	}
	if fs.Changed("tool-chain") {
		var tools []string
		for _, t := range strings.Split(toolChain, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tools = append(tools, t)
			}
		}
		if len(tools) == 0 {
			return fmt.Errorf("%w: --tool-chain: name at least one tool", errUsage)
		}
		ed.ToolChain = &baagentv1.ToolChain{Tools: tools}
	}
	if stepsFile != "" {
		path := stepsFile
		if path == "-" {
			path = ""
		}
		text, err := c.readInput(path, maxStepsFileBytes)
		if err != nil {
			return err
		}
		steps, err := parseStepsDoc([]byte(text))
		if err != nil {
			return fmt.Errorf("%w: --steps-file: %w", errUsage, err)
		}
		ed.ReplaceSteps, ed.Steps = true, stepProtos(steps)
	}

	var version int64
	if emptyEdit(ed) {
		// No flags: edit the document in $EDITOR. The editor runs without
		// the calls' timeout (a person is typing); each call has its own.
		p, err := c.readPatternForEdit(ctx, rf, id)
		if err != nil {
			return err
		}
		if ed, err = c.editInEditor(ctx, p); err != nil {
			return err
		}
		if ed == nil {
			fmt.Fprintf(c.stdout, "pattern %s unchanged\n", id)
			return nil
		}
		version = p.GetVersion()
	}
	callCtx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.UpdatePattern(callCtx, &baagentv1.GatewayServiceUpdatePatternRequest{Id: id, Edit: ed, ExpectedVersion: version})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition && version != 0 {
			return fmt.Errorf("pattern %s changed since it was opened (version %d): nothing was written; run edit again (%s)", id, version, status.Convert(err).Message())
		}
		return c.rpcError("edit pattern", err)
	}
	return c.printAs(format, resp, func() error {
		fmt.Fprintf(c.stdout, "pattern %s edited (version %d)\n", id, resp.GetPattern().GetVersion())
		return nil
	})
}

// readPatternForEdit reads the pattern edit opens, refusing one another
// tenant shared (read-only).
func (c *cli) readPatternForEdit(ctx context.Context, rf runFlags, id string) (*baagentv1.InteractionPattern, error) {
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return nil, err
	}
	defer release()
	got, err := gw.GetPattern(ctx, &baagentv1.GatewayServiceGetPatternRequest{Id: id})
	if err != nil {
		return nil, c.rpcError("get pattern", err)
	}
	p := got.GetPattern()
	if p.GetShared() {
		return nil, fmt.Errorf("pattern %s is shared by %s: read-only here", id, p.GetTenant())
	}
	return p, nil
}

// editorHeader explains the document $EDITOR opens.
const editorHeader = `# Edit the pattern and save; close without changes to leave it as it is.
# Lines starting with # are ignored. tool_chain is the best tool chain,
# steps the critical steps in order (description required; tools,
# expected_output and corrections optional).
`

// editInEditor opens the editable fields of p in the user's editor and
// returns the edit of what changed, nil when nothing did.
func (c *cli) editInEditor(ctx context.Context, p *baagentv1.InteractionPattern) (*baagentv1.PatternEdit, error) {
	was := editDocOf(p)
	body, err := yaml.Marshal(was)
	if err != nil {
		return nil, fmt.Errorf("encode pattern: %w", err)
	}
	dir, err := os.MkdirTemp("", "baagentctl-pattern-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, p.GetId()+".yaml")
	doc := fmt.Sprintf("# pattern %s, version %d\n%s\n%s", p.GetId(), p.GetVersion(), editorHeader, body)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		return nil, err
	}
	editor := c.getenv("VISUAL")
	if editor == "" {
		editor = c.getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	// Through the shell, so that EDITOR may carry arguments ("code --wait").
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", editor+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("editor %q: %w", editor, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) > maxStepsFileBytes {
		return nil, fmt.Errorf("the edited document is larger than %d bytes", maxStepsFileBytes)
	}
	now, err := parseEditDoc(data)
	if err != nil {
		return nil, fmt.Errorf("%w: the edited document: %w (nothing was written)", errUsage, err)
	}
	ed := diffEdit(was, now)
	if emptyEdit(ed) {
		return nil, nil
	}
	return ed, nil
}

func patternsRm(ctx context.Context, c *cli, args []string) error {
	id, rf, format, err := c.confirmArg("patterns rm", "PATTERN_ID", "pattern", args)
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "delete pattern", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceDeletePatternResponse, error) {
		return gw.DeletePattern(ctx, &baagentv1.GatewayServiceDeletePatternRequest{Id: id})
	}, func(*baagentv1.GatewayServiceDeletePatternResponse) error {
		fmt.Fprintf(c.stdout, "pattern %s deleted\n", id)
		return nil
	})
}

func patternsMarkUseless(ctx context.Context, c *cli, args []string) error {
	var reason string
	fs, rf, format, err := c.memoryFlags("patterns mark-useless", "PATTERN_ID", args, 1, func(fs *pflag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why it does not help (kept in the logs)")
	})
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	return memoryCall(ctx, c, rf, format, "mark pattern useless", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceMarkPatternUselessResponse, error) {
		return gw.MarkPatternUseless(ctx, &baagentv1.GatewayServiceMarkPatternUselessRequest{Id: id, Reason: reason})
	}, func(*baagentv1.GatewayServiceMarkPatternUselessResponse) error {
		fmt.Fprintf(c.stdout, "pattern %s deleted; its kind of task is not learned again for %d days\n", id, uselessDays)
		return nil
	})
}

// grantArgs parses grant and revoke: a pattern and a tenant.
func (c *cli) grantArgs(name string, args []string) (string, string, runFlags, string, error) {
	fs, rf, format, err := c.memoryFlags(name, "PATTERN_ID TENANT", args, 2, nil)
	if err != nil {
		return "", "", rf, "", err
	}
	return fs.Arg(0), fs.Arg(1), rf, format, nil
}

func patternsGrant(ctx context.Context, c *cli, args []string) error {
	id, tenant, rf, format, err := c.grantArgs("patterns grant", args)
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "grant pattern", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGrantPatternResponse, error) {
		return gw.GrantPattern(ctx, &baagentv1.GatewayServiceGrantPatternRequest{Id: id, GranteeTenant: tenant})
	}, func(resp *baagentv1.GatewayServiceGrantPatternResponse) error {
		fmt.Fprintf(c.stdout, "pattern %s shared with %s (read-only)\n", id, resp.GetGrant().GetGranteeTenant())
		return nil
	})
}

func patternsRevoke(ctx context.Context, c *cli, args []string) error {
	id, tenant, rf, format, err := c.grantArgs("patterns revoke", args)
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "revoke pattern grant", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceRevokePatternGrantResponse, error) {
		return gw.RevokePatternGrant(ctx, &baagentv1.GatewayServiceRevokePatternGrantRequest{Id: id, GranteeTenant: tenant})
	}, func(*baagentv1.GatewayServiceRevokePatternGrantResponse) error {
		fmt.Fprintf(c.stdout, "pattern %s no longer shared with %s\n", id, tenant)
		return nil
	})
}

func patternsGrants(ctx context.Context, c *cli, args []string) error {
	fs, rf, format, err := c.memoryFlags("patterns grants", "PATTERN_ID", args, -1, nil)
	if err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(1))
	}
	id := fs.Arg(0)
	return memoryCall(ctx, c, rf, format, "list pattern grants", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceListPatternGrantsResponse, error) {
		return gw.ListPatternGrants(ctx, &baagentv1.GatewayServiceListPatternGrantsRequest{Id: id})
	}, func(resp *baagentv1.GatewayServiceListPatternGrantsResponse) error {
		if len(resp.GetGrants()) == 0 {
			fmt.Fprintln(c.stdout, "no grants")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATTERN_ID\tTENANT\tGRANTED")
		for _, g := range resp.GetGrants() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.GetPatternId(), g.GetGranteeTenant(), localTime(g.GetCreatedAt(), time.DateTime))
		}
		return tw.Flush()
	})
}
