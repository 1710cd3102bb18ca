package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/topology"
)

func runToolsList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("tools list", "")
	tenant := fs.String("tenant", "default", "tenant")
	allowed := fs.String("allowed", "", "comma-separated allowed tools or globs (a skill's allowed-tools); empty: all")
	output := outputFlag(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	format, err := c.outputFormat(fs, *output)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	req := &baagentv1.ListToolsRequest{Tenant: *tenant}
	if *allowed != "" {
		req.AllowedTools = &baagentv1.ToolAllowList{Names: strings.Split(*allowed, ",")}
	}
	client, done, err := c.toolRunner()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := client.ListTools(ctx, req)
	if err != nil {
		return fmt.Errorf("%s", status.Convert(err).Message())
	}
	return c.printAs(format, resp, func() error { return c.printToolsTable(resp) })
}

// printToolsTable writes one line per tool.
func (c *cli) printToolsTable(resp *baagentv1.ListToolsResponse) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tPERMISSION\tREAD-ONLY\tDESCRIPTION")
	for _, t := range resp.GetTools() {
		perm := strings.ToLower(strings.TrimPrefix(t.GetPermission().String(), "TOOL_PERMISSION_"))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", t.GetSchema().GetName(), t.GetSource(), perm, t.GetReadOnly(), firstSentence(t.GetSchema().GetDescription()))
	}
	return tw.Flush()
}

func runToolsInvoke(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("tools invoke", "NAME --args JSON")
	argsJSON := fs.String("args", "{}", "the tool's arguments as a JSON object")
	conversation := fs.String("conversation", "cli", "conversation whose workspace the tool works in")
	tenant := fs.String("tenant", "default", "tenant")
	level := fs.String("output-level", "", "brief, standard or full (default: the decision chain)")
	approve := fs.Bool("approve", false, "approve a tool whose permission is ask")
	callID := fs.String("tool-call-id", "", "tool_call_id to send (default: a new cli_<random> id)")
	caller := fs.String("caller", "cli", "caller_id")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: missing tool NAME", errUsage)
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(1))
	}
	name := fs.Arg(0)
	var params map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &params); err != nil {
		return fmt.Errorf("%w: --args must be a JSON object: %v", errUsage, err)
	}
	st, err := structpb.NewStruct(params)
	if err != nil {
		return fmt.Errorf("%w: --args: %v", errUsage, err)
	}
	req := &baagentv1.ToolInvocationRequest{
		ToolCallId: *callID, ToolName: name, Parameters: st, CallerId: *caller,
		Tenant: *tenant, ConversationId: *conversation, Approved: *approve,
	}
	if req.ToolCallId == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		req.ToolCallId = "cli_" + hex.EncodeToString(b[:])
	}
	if *level != "" {
		v, ok := baagentv1.OutputLevel_value["OUTPUT_LEVEL_"+strings.ToUpper(*level)]
		if !ok || v == 0 {
			return fmt.Errorf("%w: --output-level must be brief, standard or full", errUsage)
		}
		req.OutputLevel = baagentv1.OutputLevel(v)
	}
	client, done, err := c.toolRunner()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := client.Invoke(ctx, &baagentv1.InvokeRequest{Request: req})
	if err != nil {
		return fmt.Errorf("%s", status.Convert(err).Message())
	}
	res := resp.GetResult()
	if c.json {
		if err := c.printProto(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.stdout, res.GetObservation())
	}
	if !res.GetSuccess() {
		return exitError{1}
	}
	return nil
}

// toolRunner dials the toolrunner; done closes the connection.
func (c *cli) toolRunner() (baagentv1.ToolRunnerServiceClient, func(), error) {
	conn, err := c.dial(topology.ToolRunner)
	if err != nil {
		return nil, nil, err
	}
	return baagentv1.NewToolRunnerServiceClient(conn), func() { conn.Close() }, nil
}

// firstSentence shortens a description for the table.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
