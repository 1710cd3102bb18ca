package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The conversations commands (docs/concepts/conversations.md), through the
// gateway for the API key's tenant.

var errNoConversation = fmt.Errorf("want exactly one CONVERSATION_ID argument")

func conversationsList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("conversations list", "")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	pageSize := fs.Int("page-size", 0, "conversations per page (default 50, at most 500)")
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
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.ListConversations(ctx, &baagentv1.GatewayServiceListConversationsRequest{PageSize: int32(*pageSize), PageToken: *pageToken}) //nolint:gosec // checked by the gateway
	if err != nil {
		return c.rpcError("list conversations", err)
	}
	return c.printAs(format, resp, func() error {
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONVERSATION_ID\tSTATE\tRUNS\tLAST_ACTIVITY\tLAST_RUN\tTITLE")
		for _, cv := range resp.GetConversations() {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", cv.GetConversationId(), conversationStateName(cv.GetState()), cv.GetRunCount(),
				localTime(cv.GetLastActivityAt(), time.DateTime), cv.GetLastRunId(), shorten(cv.GetTitle(), 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if t := resp.GetNextPageToken(); t != "" {
			fmt.Fprintf(c.stdout, "\nmore: baagentctl conversations list --page-token %s\n", t)
		}
		return nil
	})
}

// conversationArg parses the flags of a command taking one conversation id.
func (c *cli) conversationArg(name string, args []string) (string, runFlags, error) {
	fs := c.flagSet(name, "CONVERSATION_ID")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	if err := c.parse(fs, args); err != nil {
		return "", rf, err
	}
	if fs.NArg() != 1 {
		return "", rf, fmt.Errorf("%w: %w", errUsage, errNoConversation)
	}
	return fs.Arg(0), rf, nil
}

func conversationsShow(ctx context.Context, c *cli, args []string) error {
	id, rf, err := c.conversationArg("conversations show", args)
	if err != nil || c.declaring {
		return err
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.GetConversation(ctx, &baagentv1.GatewayServiceGetConversationRequest{ConversationId: id})
	if err != nil {
		return c.rpcError("get conversation", err)
	}
	if c.json {
		return c.printProto(resp.GetConversation())
	}
	c.printConversation(resp.GetConversation())
	return nil
}

func (c *cli) printConversation(cv *baagentv1.Conversation) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("conversation", cv.GetConversationId())
	row("state", conversationStateName(cv.GetState()))
	row("title", cv.GetTitle())
	row("runs", fmt.Sprint(cv.GetRunCount()))
	row("last run", cv.GetLastRunId())
	row("created", localTime(cv.GetCreatedAt(), time.RFC3339))
	row("last activity", localTime(cv.GetLastActivityAt(), time.RFC3339))
	row("ended", localTime(cv.GetEndedAt(), time.RFC3339))
	_ = tw.Flush()
}

func conversationsHistory(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("conversations history", "CONVERSATION_ID")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	pageSize := fs.Int("page-size", 0, "messages per page (default 100, at most 1000)")
	pageToken := fs.String("page-token", "", "page token printed by a previous history")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: %w", errUsage, errNoConversation)
	}
	id := fs.Arg(0)
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.GetConversationMessages(ctx, &baagentv1.GatewayServiceGetConversationMessagesRequest{ConversationId: id, PageSize: int32(*pageSize), PageToken: *pageToken}) //nolint:gosec // checked by the gateway
	if err != nil {
		return c.rpcError("read conversation history", err)
	}
	if c.json {
		return c.printProto(resp)
	}
	for _, m := range resp.GetMessages() {
		role := strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_"))
		switch {
		case len(m.GetToolCalls()) > 0:
			var names []string
			for _, tc := range m.GetToolCalls() {
				names = append(names, tc.GetName())
			}
			fmt.Fprintf(c.stdout, "[%s] %s\n  calls: %s\n", role, shorten(m.GetContent(), 400), strings.Join(names, ", "))
		case m.GetToolCallId() != "":
			fmt.Fprintf(c.stdout, "[%s %s] %s\n", role, m.GetToolCallId(), shorten(m.GetContent(), 400))
		default:
			fmt.Fprintf(c.stdout, "[%s] %s\n", role, m.GetContent())
		}
	}
	fmt.Fprintf(c.stdout, "\n%d of %d messages\n", len(resp.GetMessages()), resp.GetTotalCount())
	if t := resp.GetNextPageToken(); t != "" {
		fmt.Fprintf(c.stdout, "more: baagentctl conversations history %s --page-token %s\n", id, t)
	}
	return nil
}

func conversationsEnd(ctx context.Context, c *cli, args []string) error {
	id, rf, err := c.conversationArg("conversations end", args)
	if err != nil || c.declaring {
		return err
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.EndConversation(ctx, &baagentv1.GatewayServiceEndConversationRequest{ConversationId: id})
	if err != nil {
		return c.rpcError("end conversation", err)
	}
	if c.json {
		return c.printProto(resp)
	}
	fmt.Fprintf(c.stdout, "conversation %s ended: %d artifacts deleted, %s freed; its history is kept\n",
		id, resp.GetArtifactsDeleted(), byteSize(resp.GetBytesFreed()))
	return nil
}

func conversationsRm(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("conversations rm", "CONVERSATION_ID")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	yes := fs.Bool("yes", false, "confirm: delete the conversation and everything stored for it, for good")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: %w", errUsage, errNoConversation)
	}
	id := fs.Arg(0)
	if !*yes {
		return fmt.Errorf("%w: deleting conversation %s removes its history, runs, events, files and artifacts for good; add --yes to confirm", errUsage, id)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.DeleteConversation(ctx, &baagentv1.GatewayServiceDeleteConversationRequest{ConversationId: id})
	if err != nil {
		return c.rpcError("delete conversation", err)
	}
	if c.json {
		return c.printProto(resp)
	}
	fmt.Fprintf(c.stdout, "conversation %s deleted: %d runs, %d events, %d messages, %d artifacts, %s freed\n",
		id, resp.GetRunsDeleted(), resp.GetEventsDeleted(), resp.GetMessagesDeleted(), resp.GetArtifactsDeleted(), byteSize(resp.GetBytesFreed()))
	return nil
}

func conversationStateName(s baagentv1.ConversationState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "CONVERSATION_STATE_"))
}

func localTime(ts *timestamppb.Timestamp, layout string) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().Local().Format(layout)
}

// byteSize is n in B, KiB or MiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
