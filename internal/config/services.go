package config

import "fmt"

// Service names accepted by -target (besides TargetAll), in start order:
// the services others depend on come first.
const (
	TargetAll          = "all"
	TargetTokens       = "tokens"
	TargetContext      = "context"
	TargetSkills       = "skills"
	TargetToolRunner   = "toolrunner"
	TargetOrchestrator = "orchestrator"
	TargetGateway      = "gateway"
)

// Services lists every service in start order.
var Services = []string{TargetTokens, TargetContext, TargetSkills, TargetToolRunner, TargetOrchestrator, TargetGateway}

// DefaultPorts are the services' default gRPC ports (docs/architecture.md).
var DefaultPorts = map[string]int{
	TargetGateway:      7700,
	TargetOrchestrator: 7701,
	TargetToolRunner:   7702,
	TargetSkills:       7703,
	TargetContext:      7704,
	TargetTokens:       7705,
}

// DefaultGatewayHTTPPort serves the gateway's HTTP/JSON, SSE, WebSocket and
// dashboard.
const DefaultGatewayHTTPPort = 7780

// DefaultMetricsPort serves Prometheus /metrics (on loopback in
// -target=all, like every other default listener there).
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
