// Package topology names the services and where a client finds them by
// default. It is a leaf (standard library only), so that clients such as
// baagentctl can use it without linking any server code.
package topology

import "fmt"

// Service names accepted by -target (besides All), in start order: the
// services others depend on come first.
const (
	All          = "all"
	Tokens       = "tokens"
	Context      = "context"
	Skills       = "skills"
	Memory       = "memory"
	ToolRunner   = "toolrunner"
	Orchestrator = "orchestrator"
	Gateway      = "gateway"
)

// Services lists every service in start order.
var Services = []string{Tokens, Context, Skills, Memory, ToolRunner, Orchestrator, Gateway}

// DefaultPorts are the services' default gRPC ports (see
// docs/operations/configuration.md).
var DefaultPorts = map[string]int{
	Gateway:      7700,
	Orchestrator: 7701,
	ToolRunner:   7702,
	Skills:       7703,
	Context:      7704,
	Tokens:       7705,
	Memory:       7706,
}

// GRPCServices maps each service to the gRPC service it serves, which is
// also the name its health is reported under (readiness probes, baagentctl
// health). The names are the generated descriptors' (a test checks), spelled
// out here to keep this package a leaf.
var GRPCServices = map[string]string{
	Gateway:      "baagent.v1.GatewayService",
	Orchestrator: "baagent.v1.OrchestratorService",
	ToolRunner:   "baagent.v1.ToolRunnerService",
	Skills:       "baagent.v1.SkillsService",
	Context:      "baagent.v1.ContextService",
	Tokens:       "baagent.v1.TokensService",
	Memory:       "baagent.v1.MemoryService",
}

// DefaultGatewayHTTPPort serves the gateway's HTTP/JSON, SSE, WebSocket and
// dashboard.
const DefaultGatewayHTTPPort = 7780

// DefaultMetricsPort serves Prometheus /metrics.
const DefaultMetricsPort = 9090

// DefaultDialAddr is where a client on the same machine finds service by
// default, e.g. "localhost:7705" for tokens.
func DefaultDialAddr(service string) string {
	return fmt.Sprintf("localhost:%d", DefaultPorts[service])
}

// IsService reports whether name is one of Services.
func IsService(name string) bool {
	_, ok := DefaultPorts[name]
	return ok
}
