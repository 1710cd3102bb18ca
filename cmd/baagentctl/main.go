// Command baagentctl is the command-line client of the BA-Agent suite.
//
//	baagentctl [global flags] COMMAND [flags] [args]
//
// Global flags may also follow the command name. Every command prints JSON
// (the protobuf JSON mapping) with --json.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/internal/topology"
)

// command is one baagentctl subcommand. run receives the arguments after the
// command name; it returns errUsage (wrapped) for bad invocations.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

// commands is the command table; each service issue adds its own entry.
var commands = []command{
	{"health", "check every service's gRPC health; non-zero exit if any is not SERVING", runHealth},
	{"version", "print the client's version", runVersion},
	{"ask", "ask a question: start a run and stream it live; exit 0 when it completes", runAsk},
	{"runs", "list, show or cancel runs (runs list|get RUN_ID|cancel RUN_ID)", runRuns},
	{"input", "answer the question a run waits on (input RUN_ID ANSWER)", runInput},
	{"skills", "list skills, or show one at a disclosure level (skills list|show NAME)", runSkills},
	{"tools", "list tools, or invoke one (tools list|invoke NAME --args JSON)", runTools},
	{"tokens", "count tokens, show model info, encode and decode (tokens service)", runTokens},
}

// errUsage marks an invocation error (exit status 2); wrap it with what is
// wrong, e.g. fmt.Errorf("%w: missing RUN_ID", errUsage).
var errUsage = errors.New("usage")

// exitError carries a specific exit status with an already-printed failure.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// cli holds what every command shares: streams, output mode, and where the
// services are.
type cli struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string

	json    bool
	timeout time.Duration
	// addrs maps a service name (topology.Services) to its dial address.
	addrs map[string]string
}

func newCLI(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *cli {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, timeout: 10 * time.Second, addrs: map[string]string{}}
	for _, svc := range topology.Services {
		c.addrs[svc] = topology.DefaultDialAddr(svc)
		if v := getenv("BAAGENT_" + strings.ToUpper(svc) + "_ADDR"); v != "" {
			c.addrs[svc] = v
		}
	}
	if v := getenv("BAAGENT_ADDR"); v != "" {
		c.addrs[topology.Gateway] = v
	}
	return c
}

// addFlags registers the global flags on fs, so they are accepted both
// before and after the command name.
func (c *cli) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.json, "json", c.json, "print machine-readable JSON")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "deadline of each request")
	fs.Func("addr", "gateway address (env BAAGENT_ADDR; default "+topology.DefaultDialAddr(topology.Gateway)+")", func(v string) error {
		c.addrs[topology.Gateway] = v
		return nil
	})
	for _, svc := range topology.Services {
		if svc == topology.Gateway {
			continue
		}
		fs.Func(svc+"-addr", fmt.Sprintf("%s address (env BAAGENT_%s_ADDR; default %s)", svc, strings.ToUpper(svc), topology.DefaultDialAddr(svc)), func(v string) error {
			c.addrs[svc] = v
			return nil
		})
	}
}

// flagSet returns a FlagSet for a command that already knows the global
// flags and prints its usage to stderr.
func (c *cli) flagSet(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	c.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: baagentctl %s [flags] %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs. The flag package has already printed the
// problem and the usage when it fails, so the error only sets the exit
// status: 0 for -h, 2 for a bad flag.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitError{0}
		}
		return exitError{2}
	}
	return nil
}

// dial opens a client connection to service (a topology.Services name). The
// connection is lazy: errors surface on the first RPC.
func (c *cli) dial(service string) (*grpc.ClientConn, error) {
	addr, ok := c.addrs[service]
	if !ok {
		return nil, fmt.Errorf("unknown service %q", service)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s at %s: %w", service, addr, err)
	}
	return conn, nil
}

// printProto writes m as protobuf JSON with the .proto field names.
func (c *cli) printProto(m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: baagentctl [--addr HOST:PORT] [--json] [--timeout D] COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := append([]command(nil), commands...)
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	for _, cmd := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintln(w, "\nRun 'baagentctl COMMAND -h' for a command's flags.")
}

// run executes one invocation and returns the process exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	c := newCLI(stdin, stdout, stderr, getenv)
	fs := flag.NewFlagSet("baagentctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.addFlags(fs)
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		usage(stderr)
		return 2
	}
	name := fs.Arg(0)
	for _, cmd := range commands {
		if cmd.name != name {
			continue
		}
		err := cmd.run(ctx, c, fs.Args()[1:])
		var ee exitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.code
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "baagentctl %s: %v\n", name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "baagentctl %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "baagentctl: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
