// Command run-split runs the suite in microservices mode on this machine:
// NATS and each service as its own `baagent -target=<service>` process with
// the flags of k8s/overlays/dev, on loopback, until Ctrl-C or SIGTERM, which
// stop every process in order. The listeners take the ports of `make run`
// when they are free (a taken one moves alone to a free port and is
// reported); -ports=random (or RUN_SPLIT_PORTS=random) gives each a free
// port. Once the suite is healthy it prints commands that reach it as
// printed, with the dev overlay's API key. scripts/run-split.sh builds the
// binaries and runs it (`make run-split`).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/test/split/splitrun"
)

// Port modes of -ports.
const (
	portsDefault = "default"
	portsRandom  = "random"
)

func main() {
	repo := flag.String("repo", ".", "repository root (k8s/overlays/dev, examples/)")
	baagent := flag.String("baagent", "bin/baagent", "baagent binary")
	natsServer := flag.String("nats-server", "bin/nats-server", "nats-server binary")
	ctl := flag.String("baagentctl", "./bin/baagentctl", "baagentctl as the printed commands call it")
	dir := flag.String("dir", "data/split", "directory for the processes' files and logs")
	quiet := flag.Bool("quiet", false, "do not copy the processes' logs to stderr")
	ports := flag.String("ports", envOr("RUN_SPLIT_PORTS", portsDefault), "default: the ports of `make run` where free; random: a free port for every listener (env RUN_SPLIT_PORTS)")
	flag.Parse()
	if *ports != portsDefault && *ports != portsRandom {
		fmt.Fprintf(os.Stderr, "run-split: -ports (RUN_SPLIT_PORTS) is %q; want %s or %s\n", *ports, portsDefault, portsRandom)
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "run-split: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(*dir, 0o750); err != nil {
		fatal(err)
	}
	opts := splitrun.Options{RepoRoot: *repo, Baagent: *baagent, NATSServer: *natsServer, Dir: *dir, DefaultPorts: *ports == portsDefault}
	if !*quiet {
		opts.Logs = os.Stderr
	}
	suite, err := splitrun.Start(ctx, opts)
	if err != nil {
		fatal(err)
	}
	if err := report(os.Stdout, suite, *dir, *ctl); err != nil {
		_ = suite.Stop(30 * time.Second)
		fatal(err)
	}

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

// report prints where everything listens, the ports that moved, the API key
// and the commands to try. The commands are the lines between the "try"
// line and the next blank line, each indented by two spaces, so that a
// program can run them too (test/split does).
func report(w io.Writer, s *splitrun.Suite, dir, ctl string) error {
	key, tenant, err := s.APIKey()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "split mode is up; logs in %s\n", dir)
	for _, svc := range config.Services {
		fmt.Fprintf(w, "  %-12s gRPC %-16s metrics 127.0.0.1:%d\n", svc, s.Addr[svc], s.Ports[splitrun.MetricsListener(svc)])
	}
	fmt.Fprintf(w, "  %-12s HTTP %s (API, SSE, WebSocket, dashboard)\n", "gateway", s.HTTPAddr)
	fmt.Fprintf(w, "  %-12s %s, monitoring 127.0.0.1:%d\n", "nats", s.NATSURL, s.Ports[splitrun.ListenerNATSMonitor])
	for _, m := range s.Moved {
		fmt.Fprintf(w, "moved: %s\n", m)
	}
	fmt.Fprintf(w, "API key (tenant %s, dev overlay only): %s\n", tenant, key)
	fmt.Fprintf(w, "dashboard: http://%s/\n", s.HTTPAddr)
	fmt.Fprintln(w, "try (each line works as printed, from the repository root):")
	for _, c := range tryCommands(ctl, s.Ports, key) {
		fmt.Fprintln(w, "  "+c)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ctrl-C stops every process.")
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "run-split:", err)
	os.Exit(1)
}
