// Command run-split runs the suite in microservices mode on this machine:
// NATS and each service as its own `baagent -target=<service>` process with
// the flags of k8s/overlays/dev, on free loopback ports, until Ctrl-C or
// SIGTERM, which stop every process in order. scripts/run-split.sh builds
// the binaries and runs it (`make run-split`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/test/split/splitrun"
)

func main() {
	repo := flag.String("repo", ".", "repository root (k8s/overlays/dev, examples/)")
	baagent := flag.String("baagent", "bin/baagent", "baagent binary")
	natsServer := flag.String("nats-server", "bin/nats-server", "nats-server binary")
	dir := flag.String("dir", "data/split", "directory for the processes' files and logs")
	quiet := flag.Bool("quiet", false, "do not copy the processes' logs to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(*dir, 0o750); err != nil {
		fatal(err)
	}
	opts := splitrun.Options{RepoRoot: *repo, Baagent: *baagent, NATSServer: *natsServer, Dir: *dir}
	if !*quiet {
		opts.Logs = os.Stderr
	}
	suite, err := splitrun.Start(ctx, opts)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("split mode: NATS %s, logs in %s\n", suite.NATSURL, *dir)
	for _, svc := range config.Services {
		fmt.Printf("  %-12s %s\n", svc, suite.Addr[svc])
	}
	fmt.Printf("  %-12s %s (HTTP)\n", "gateway", suite.HTTPAddr)
	fmt.Printf("try: bin/baagentctl --orchestrator-addr %s ask --nats-url %s \"Which product category had the highest revenue last quarter?\"\n",
		suite.Addr[config.TargetOrchestrator], suite.NATSURL)

	select {
	case <-ctx.Done():
	case name := <-suite.Exited():
		fmt.Fprintf(os.Stderr, "run-split: %s exited; stopping the rest\n", name)
	}
	if err := suite.Stop(30 * time.Second); err != nil {
		fatal(err)
	}
	fmt.Println("split mode stopped; every process exited 0")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "run-split:", err)
	os.Exit(1)
}
