package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/internal/topology"
)

// healthResult is one row of `baagentctl health`.
type healthResult struct {
	Service string `json:"service"`
	Addr    string `json:"addr"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
}

func runHealth(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("health", "[SERVICE...]")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	services := fs.Args()
	if len(services) == 0 {
		services = topology.Services
	}
	for _, svc := range services {
		if !topology.IsService(svc) {
			return fmt.Errorf("%w: unknown service %q (want one of %s)", errUsage, svc, strings.Join(topology.Services, ", "))
		}
	}

	results := make([]healthResult, len(services))
	var wg sync.WaitGroup
	for i, svc := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.checkHealth(ctx, svc)
		}()
	}
	wg.Wait()

	if c.json {
		if err := json.NewEncoder(c.stdout).Encode(results); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVICE\tADDRESS\tSTATUS\tERROR")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Service, r.Addr, r.Status, r.Error)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if slices.ContainsFunc(results, func(r healthResult) bool { return r.Status != healthpb.HealthCheckResponse_SERVING.String() }) {
		return exitError{1}
	}
	return nil
}

func (c *cli) checkHealth(ctx context.Context, svc string) healthResult {
	r := healthResult{Service: svc, Addr: c.addrs[svc], Status: "UNREACHABLE"}
	conn, err := c.dial(svc)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// The service's own health, not just the server's as a whole.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: topology.GRPCServices[svc]})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			r.Status = "NOT_REGISTERED"
		}
		r.Error = status.Convert(err).Message()
		return r
	}
	r.Status = resp.GetStatus().String()
	return r
}
