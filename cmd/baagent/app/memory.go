package app

import (
	"context"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// buildMemory builds the memory service. Until its server is wired in,
// every MemoryService call answers Unimplemented, so that the peers that
// depend on it (toolrunner, orchestrator, gateway) can already dial it.
func (a *App) buildMemory(context.Context) (registrar, error) {
	a.log.Warn("memory service not built into this binary yet: its calls answer Unimplemented")
	return unimplementedMemory{}, nil
}

type unimplementedMemory struct {
	baagentv1.UnimplementedMemoryServiceServer
}

func (m unimplementedMemory) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterMemoryServiceServer(gs, m)
}
