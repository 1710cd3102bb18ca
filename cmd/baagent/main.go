// Command baagent runs the BA-Agent services: all of them in one process
// with an embedded NATS (-target=all, the default), or one per process
// (-target=gateway|orchestrator|toolrunner|skills|context|tokens).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// run starts the configured services and blocks until ctx is cancelled (on
// SIGINT or SIGTERM) and they have shut down. Logs go to logOut as JSON.
func run(ctx context.Context, args []string, getenv func(string) string, logOut io.Writer) int {
	cfg, err := app.LoadConfig(args, getenv, logOut)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(logOut, "baagent: %v\n", err)
		return 2
	}
	log, err := logging.New(logOut, cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(logOut, "baagent: setting log-level: %v\n", err)
		return 2
	}
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		log.Error("baagent failed to start", "err", err.Error())
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("baagent failed", "err", err.Error())
		return 1
	}
	return 0
}
