package app

import (
	"fmt"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/services/memory/capture"
)

// startMemoryCapture starts, with the memory service, the consumer that
// turns the finished runs the orchestrators queue into episodes
// (services/memory/capture). It calls the memory service through its
// client like any peer: in process in -target=all, else over -memory-addr
// (every memory replica shares the queue's one durable consumer).
func (a *App) startMemoryCapture() error {
	js, err := a.jetStream()
	if err != nil {
		return fmt.Errorf("memory capture: %w", err)
	}
	conn, err := a.peer(config.TargetMemory)
	if err != nil {
		return err
	}
	c, err := capture.New(capture.Options{
		JetStream: js, Memory: baagentv1.NewMemoryServiceClient(conn),
		Logger: a.log, Registerer: a.reg,
	})
	if err != nil {
		return fmt.Errorf("memory capture: %w", err)
	}
	a.background = append(a.background, c.Run)
	return nil
}
