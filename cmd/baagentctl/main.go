// Command baagentctl is the command-line client of the BA-Agent suite.
//
//	baagentctl COMMAND [SUBCOMMAND] [flags] [args]
//
// Flags may come anywhere after the program name, before or after the
// arguments (`ask "question" --json`), as in every cobra CLI. Every command
// prints JSON (the protobuf JSON mapping) with --json; the list commands also
// take -o json|yaml|table. The command tree, help and shell completion are in
// commands.go; exit statuses are documented in docs/cli.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/internal/topology"
)

// Exit statuses (docs/cli.md).
const (
	exitOK      = 0 // success; a run asked about completed
	exitFailure = 1 // a request failed, a service is not serving, a run failed
	exitUsage   = 2 // bad invocation: unknown command or flag, missing argument
	// exitCancelled (3, ask.go): the run asked about was cancelled.
)

// errUsage marks an invocation error (exit status 2); wrap it with what is
// wrong, e.g. fmt.Errorf("%w: missing RUN_ID", errUsage).
var errUsage = errors.New("usage")

// errDeclared is what parse returns while the command tree is being built:
// the command function has registered its flags and must stop there.
var errDeclared = errors.New("flags declared")

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

	// declaring is set while the command tree is built: flagSet returns
	// declTarget (the cobra command's own flags) and parse stops the command
	// function with errDeclared. Afterwards leafFlags is the running
	// command's flags as cobra parsed them.
	declaring  bool
	declTarget *pflag.FlagSet
	leafFlags  *pflag.FlagSet
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

// addFlags registers the global flags on fs (the root command's persistent
// flags, so every command accepts them anywhere).
func (c *cli) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.json, "json", c.json, "print machine-readable JSON")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "deadline of each request")
	fs.Func("addr", "gateway `HOST:PORT` (env BAAGENT_ADDR; default "+topology.DefaultDialAddr(topology.Gateway)+")", func(v string) error {
		c.addrs[topology.Gateway] = v
		return nil
	})
	for _, svc := range topology.Services {
		if svc == topology.Gateway {
			continue
		}
		fs.Func(svc+"-addr", fmt.Sprintf("%s `HOST:PORT` (env BAAGENT_%s_ADDR; default %s)", svc, strings.ToUpper(svc), topology.DefaultDialAddr(svc)), func(v string) error {
			c.addrs[svc] = v
			return nil
		})
	}
}

// flagSet returns the flag set a command function registers its own flags
// on: the cobra command's while the tree is built (so help and completion
// know them), a fresh one when the command runs.
func (c *cli) flagSet(name, _ string) *pflag.FlagSet {
	if c.declaring {
		return c.declTarget
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse gives a command function its flag values and positional arguments.
// cobra has already parsed the command line (flags anywhere); parse copies
// the flags set there into the function's own set and leaves args (the
// positional arguments) as fs.Args().
func (c *cli) parse(fs *pflag.FlagSet, args []string) error {
	if c.declaring {
		return errDeclared
	}
	var err error
	if c.leafFlags != nil {
		c.leafFlags.Visit(func(f *pflag.Flag) {
			if err == nil && fs.Lookup(f.Name) != nil {
				err = fs.Set(f.Name, f.Value.String())
			}
		})
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := fs.Parse(append([]string{"--"}, args...)); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
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

// run executes one invocation and returns the process exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	c := newCLI(stdin, stdout, stderr, getenv)
	root := c.rootCommand()
	root.SetArgs(normaliseFlags(root, args))
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return exitUsage
	}
	ran := false
	root.PersistentPreRun = func(*cobraCommand, []string) { ran = true }
	leaf, err := root.ExecuteContextC(ctx)
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case !ran || errors.Is(err, errUsage):
		// cobra's own errors (unknown command or flag, bad value) come
		// before any command ran: they are usage errors too.
		fmt.Fprintf(stderr, "%s: %v\n", leaf.CommandPath(), err)
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", leaf.CommandPath())
		return exitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", leaf.CommandPath(), err)
		return exitFailure
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
