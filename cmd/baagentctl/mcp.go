package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func mcpSpec() spec {
	return spec{use: "mcp", short: "Authorize, inspect or revoke the tenant's OAuth access to hosted MCP servers",
		long: "MCP servers configured with auth: oauth (GitHub, Linear, Atlassian…) need each\ntenant's consent. authorize prints the URL to open in a browser; the\ngateway's callback completes it. These go through the gateway (--addr,\nenv BAAGENT_ADDR) for the API key's tenant (--api-key, env BAAGENT_API_KEY).",
		subs: []spec{
			{use: "authorize SERVER", short: "Start the OAuth authorization of an MCP server and print the URL to open", run: runMCPAuthorize,
				example: "  baagentctl mcp authorize linear\n  baagentctl mcp authorize linear --json"},
			{use: "status SERVER", short: "Show whether the tenant holds a token for an MCP server", run: runMCPStatus,
				example: "  baagentctl mcp status linear"},
			{use: "revoke SERVER", short: "Revoke the tenant's token for an MCP server", run: runMCPRevoke,
				example: "  baagentctl mcp revoke linear"},
		}}
}

// mcpCommand parses `mcp <name> SERVER` and makes one gateway call.
func (c *cli) mcpCommand(ctx context.Context, name string, args []string, call func(context.Context, *gatewayClient, string) error) error {
	fs := c.flagSet("mcp "+name, "SERVER")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: mcp %s takes one SERVER", errUsage, name)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	return call(ctx, gw, fs.Arg(0))
}

func runMCPAuthorize(ctx context.Context, c *cli, args []string) error {
	return c.mcpCommand(ctx, "authorize", args, func(ctx context.Context, gw *gatewayClient, server string) error {
		resp, err := gw.StartMcpAuthorization(ctx, &baagentv1.GatewayServiceStartMcpAuthorizationRequest{Server: server})
		if err != nil {
			return c.rpcError("authorize "+server, err)
		}
		if c.json {
			return c.printProto(resp)
		}
		fmt.Fprintf(c.stdout, "Open this URL in a browser to authorize %s (valid until %s):\n\n  %s\n",
			server, resp.GetExpiresAt().AsTime().Local().Format(time.Kitchen), resp.GetAuthorizationUrl())
		return nil
	})
}

func runMCPStatus(ctx context.Context, c *cli, args []string) error {
	return c.mcpCommand(ctx, "status", args, func(ctx context.Context, gw *gatewayClient, server string) error {
		resp, err := gw.GetMcpAuthorization(ctx, &baagentv1.GatewayServiceGetMcpAuthorizationRequest{Server: server})
		if err != nil {
			return c.rpcError("status of "+server, err)
		}
		if c.json {
			return c.printProto(resp)
		}
		a := resp.GetAuthorization()
		if !a.GetAuthorized() {
			fmt.Fprintf(c.stdout, "%s: not authorized (run: baagentctl mcp authorize %s)\n", server, server)
			return nil
		}
		fmt.Fprintf(c.stdout, "%s: authorized", server)
		if a.GetExpiresAt() != nil {
			fmt.Fprintf(c.stdout, ", access token expires %s", a.GetExpiresAt().AsTime().Local().Format(time.RFC3339))
		}
		if a.GetRefreshable() {
			fmt.Fprint(c.stdout, " (refreshed automatically)")
		}
		if len(a.GetScopes()) > 0 {
			fmt.Fprintf(c.stdout, ", scopes %s", strings.Join(a.GetScopes(), " "))
		}
		fmt.Fprintln(c.stdout)
		return nil
	})
}

func runMCPRevoke(ctx context.Context, c *cli, args []string) error {
	return c.mcpCommand(ctx, "revoke", args, func(ctx context.Context, gw *gatewayClient, server string) error {
		resp, err := gw.RevokeMcpAuthorization(ctx, &baagentv1.GatewayServiceRevokeMcpAuthorizationRequest{Server: server})
		if err != nil {
			return c.rpcError("revoke "+server, err)
		}
		if c.json {
			return c.printProto(resp)
		}
		if resp.GetRevoked() {
			fmt.Fprintf(c.stdout, "%s: authorization revoked\n", server)
		} else {
			fmt.Fprintf(c.stdout, "%s: there was no authorization\n", server)
		}
		return nil
	})
}
