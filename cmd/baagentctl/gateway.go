package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/topology"
)

// The run commands (ask, runs, input) talk to the gateway's public
// gRPC API only. The gateway maps the API key to the tenant; without a key
// it serves loopback clients as the tenant `default` when no keys are
// configured.

// runFlags are the flags shared by the run commands.
type runFlags struct {
	apiKey string
}

func (c *cli) addRunFlags(fs *pflag.FlagSet, rf *runFlags) {
	rf.apiKey = c.getenv("BAAGENT_API_KEY")
	fs.StringVar(&rf.apiKey, "api-key", rf.apiKey, "gateway API key, sent as \"authorization: Bearer <key>\" (env BAAGENT_API_KEY; prefer the environment variable)")
	// The default comes from the environment; help must not print the key.
	fs.Lookup("api-key").DefValue = ""
}

// gatewayClient is the gateway's API with the caller's credentials.
type gatewayClient struct {
	baagentv1.GatewayServiceClient
	apiKey string
}

// auth returns ctx carrying the API key, if any, as outgoing metadata.
func (g *gatewayClient) auth(ctx context.Context) context.Context {
	if g.apiKey == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.apiKey)
}

// gateway dials the gateway; call the returned func to close it.
func (c *cli) gateway(rf runFlags) (*gatewayClient, func(), error) {
	conn, err := c.dial(topology.Gateway)
	if err != nil {
		return nil, nil, err
	}
	return &gatewayClient{GatewayServiceClient: baagentv1.NewGatewayServiceClient(conn), apiKey: rf.apiKey}, func() { _ = conn.Close() }, nil
}

// gatewayCall dials the gateway for one command's calls and returns ctx
// bounded by --timeout and carrying the API key; release closes both.
func (c *cli) gatewayCall(ctx context.Context, rf runFlags) (context.Context, *gatewayClient, func(), error) {
	gw, done, err := c.gateway(rf)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	ctx = gw.auth(ctx)
	release := func() {
		cancel()
		done()
	}
	return ctx, gw, release, nil
}

// rpcError describes a failed gateway call.
func (c *cli) rpcError(what string, err error) error {
	st := status.Convert(err)
	return fmt.Errorf("%s at %s: %s (%s)", what, c.addrs[topology.Gateway], st.Message(), st.Code())
}
