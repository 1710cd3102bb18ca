package config

import "github.com/baagent/baagent/internal/topology"

// Service names accepted by -target; see package topology, which clients
// use without linking the configuration of the servers.
const (
	TargetAll          = topology.All
	TargetTokens       = topology.Tokens
	TargetContext      = topology.Context
	TargetSkills       = topology.Skills
	TargetMemory       = topology.Memory
	TargetToolRunner   = topology.ToolRunner
	TargetOrchestrator = topology.Orchestrator
	TargetGateway      = topology.Gateway

	DefaultGatewayHTTPPort = topology.DefaultGatewayHTTPPort
	DefaultMetricsPort     = topology.DefaultMetricsPort
)

// Services, DefaultPorts, DefaultDialAddr and IsService are topology's.
var (
	Services        = topology.Services
	DefaultPorts    = topology.DefaultPorts
	DefaultDialAddr = topology.DefaultDialAddr
	IsService       = topology.IsService
)
