package topology

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestEveryServiceHasADistinctDefaultPort(t *testing.T) {
	t.Parallel()
	seen := map[int]string{}
	for _, s := range Services {
		if !IsService(s) {
			t.Errorf("IsService(%q) = false", s)
		}
		p := DefaultPorts[s]
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s share port %d", s, other, p)
		}
		seen[p] = s
	}
	if IsService(All) || IsService("") {
		t.Error("all and the empty name are not services")
	}
	if got := DefaultDialAddr(Tokens); got != "localhost:7705" {
		t.Errorf("DefaultDialAddr(tokens) = %q", got)
	}
	if got := DefaultDialAddr(Memory); got != "localhost:7706" {
		t.Errorf("DefaultDialAddr(memory) = %q", got)
	}
}

func TestGRPCServicesAreTheGeneratedNames(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		Gateway:      baagentv1.GatewayService_ServiceDesc.ServiceName,
		Orchestrator: baagentv1.OrchestratorService_ServiceDesc.ServiceName,
		ToolRunner:   baagentv1.ToolRunnerService_ServiceDesc.ServiceName,
		Skills:       baagentv1.SkillsService_ServiceDesc.ServiceName,
		Context:      baagentv1.ContextService_ServiceDesc.ServiceName,
		Tokens:       baagentv1.TokensService_ServiceDesc.ServiceName,
		Memory:       baagentv1.MemoryService_ServiceDesc.ServiceName,
	}
	if len(GRPCServices) != len(Services) {
		t.Errorf("GRPCServices has %d entries, want one per service (%d)", len(GRPCServices), len(Services))
	}
	for svc, name := range want {
		if GRPCServices[svc] != name {
			t.Errorf("GRPCServices[%s] = %q, generated %q", svc, GRPCServices[svc], name)
		}
	}
}
