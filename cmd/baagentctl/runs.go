package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/baagent/baagent/core/convmetrics"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func runsList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("runs list", "")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	conversation := fs.String("conversation", "", "only runs of this conversation")
	states := fs.String("state", "", "only runs in these states, comma-separated (queued, running, waiting_input, completed, failed, cancelled)")
	pageSize := fs.Int("page-size", 0, "runs per page (default 50, at most 500)")
	pageToken := fs.String("page-token", "", "page token printed by a previous list")
	output := outputFlag(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	format, err := c.outputFormat(fs, *output)
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	req := &baagentv1.ListRunsRequest{ConversationId: *conversation, PageSize: int32(*pageSize), PageToken: *pageToken}
	for _, s := range strings.Split(*states, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		v, ok := baagentv1.RunState_value["RUN_STATE_"+strings.ToUpper(s)]
		if !ok || v == 0 {
			return fmt.Errorf("%w: unknown state %q", errUsage, s)
		}
		req.States = append(req.States, baagentv1.RunState(v))
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.ListRuns(ctx, req)
	if err != nil {
		return c.rpcError("list runs", err)
	}
	return c.printAs(format, resp, func() error { return c.printRunsTable(resp) })
}

// printRunsTable writes one line per run and the command for the next page.
func (c *cli) printRunsTable(resp *baagentv1.ListRunsResponse) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN_ID\tSTATE\tSTEPS\tMODEL\tCREATED\tCONVERSATION\tINPUT")
	for _, r := range resp.GetRuns() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.GetRunId(), stateName(r.GetState()), r.GetStep(), r.GetModel(),
			r.GetCreatedAt().AsTime().Local().Format(time.DateTime), r.GetConversationId(), shorten(r.GetInput(), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if t := resp.GetNextPageToken(); t != "" {
		fmt.Fprintf(c.stdout, "\nmore: baagentctl runs list --page-token %s\n", t)
	}
	return nil
}

func runsGet(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("runs get", "RUN_ID")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: %w", errUsage, errNoRun)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.GetRun(ctx, &baagentv1.GetRunRequest{RunId: fs.Arg(0)})
	if err != nil {
		return c.rpcError("get run", err)
	}
	if c.json {
		return c.printProto(resp.GetRun())
	}
	c.printRun(resp.GetRun())
	return nil
}

func runsCancel(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("runs cancel", "RUN_ID")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	reason := fs.String("reason", "", "reason recorded in the cancelled event")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: %w", errUsage, errNoRun)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.CancelRun(ctx, &baagentv1.CancelRunRequest{RunId: fs.Arg(0), Reason: *reason})
	if err != nil {
		return c.rpcError("cancel run", err)
	}
	if c.json {
		return c.printProto(resp.GetRun())
	}
	fmt.Fprintf(c.stdout, "run %s is %s\n", resp.GetRun().GetRunId(), stateName(resp.GetRun().GetState()))
	return nil
}

// printRun shows a run record and its metrics report
// (ConversationMetrics as orchestrator.MetricsReport renders it).
func (c *cli) printRun(r *baagentv1.Run) {
	w := c.stdout
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	ts := func(t interface{ AsTime() time.Time }, ok bool) string {
		if !ok {
			return ""
		}
		return t.AsTime().Local().Format(time.RFC3339)
	}
	model := r.GetModel()
	if r.GetScriptedModel() {
		model += " (scripted model)"
	}
	row("run", r.GetRunId())
	row("state", stateName(r.GetState()))
	row("conversation", r.GetConversationId())
	row("project", r.GetProject())
	row("parent run", r.GetParentRunId())
	row("trace", r.GetTraceId())
	row("model", model)
	row("steps", fmt.Sprintf("%d of at most %d", r.GetStep(), r.GetMaxSteps()))
	row("events", fmt.Sprint(r.GetLastSeq()))
	row("created", ts(r.GetCreatedAt(), r.GetCreatedAt() != nil))
	row("started", ts(r.GetStartedAt(), r.GetStartedAt() != nil))
	row("finished", ts(r.GetFinishedAt(), r.GetFinishedAt() != nil))
	row("input", shorten(r.GetInput(), 200))
	row("complexity", complexityLine(r.GetQueryComplexity(), r.GetComplexitySignals()))
	if p := r.GetPlan(); p != nil {
		row("plan", fmt.Sprintf("%d steps, revision %d", p.GetTotalSteps(), p.GetRevision()))
	}
	if e := r.GetError(); e != nil {
		row("error", e.GetMessage()+" ("+e.GetCode()+")")
	}
	_ = tw.Flush()
	if p := r.GetPlan(); p != nil {
		fmt.Fprintln(w, "\nplan:")
		writeChecklist(w, p, "  ")
	}
	if a := r.GetFinalAnswer(); a != "" {
		fmt.Fprintf(w, "\nanswer:\n%s\n", a)
	}
	if m := r.GetMetrics(); m != nil {
		fmt.Fprintf(w, "\n%s", convmetrics.Report(m))
	}
}

func stateName(s baagentv1.RunState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "RUN_STATE_"))
}
