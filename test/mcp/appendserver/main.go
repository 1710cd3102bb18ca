// Command appendserver is an MCP server over stdio with one tool that has a
// side effect, for tests of exactly-once tool effects (test/reliability/
// faults): `append_line` appends its `line` argument plus "\n" to a file
// fixed by the server's configuration, so that a test can count how many
// times each call took effect.
//
// The tool is annotated readOnlyHint=false, idempotentHint=false,
// destructiveHint=false (additive), so the toolrunner treats it as a call
// with side effects. A call first records that it began (one JSON line
// {"line","pid","ppid"} in -started-file, synced: ppid is the toolrunner
// that runs this server), waits -delay, then appends the line (O_APPEND,
// fsync) and answers "appended". Once begun, a call is not abandoned when
// its caller cancels it, as with a request already sent to an external
// system: the effect happens even if nobody waits for the answer.
//
//	appendserver -file /tmp/out.txt [-started-file /tmp/started.jsonl] [-delay 400ms]
//
// Each flag can also be given in the environment: APPEND_FILE,
// APPEND_STARTED_FILE, APPEND_DELAY (a flag wins).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type appendArgs struct {
	Line string `json:"line" jsonschema:"the text to append as one line (no newline in it)"`
}

type server struct {
	file, started string
	delay         time.Duration
	mu            sync.Mutex // serialises writes to the started file
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("appendserver: ")
	s, err := configure(os.Args[1:], os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "appendserver", Version: "1.0.0"}, nil)
	no := false
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "append_line",
		Description: "Append one line of text to the server's file. Not idempotent: every call appends.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: &no},
	}, s.appendLine)
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// configure reads the flags, with the environment as their defaults.
func configure(args []string, getenv func(string) string) (*server, error) {
	fs := flag.NewFlagSet("appendserver", flag.ContinueOnError)
	s := &server{}
	fs.StringVar(&s.file, "file", getenv("APPEND_FILE"), "file each call appends its line to (APPEND_FILE)")
	fs.StringVar(&s.started, "started-file", getenv("APPEND_STARTED_FILE"), "file recording each call as it begins, one JSON line (APPEND_STARTED_FILE; empty: none)")
	delay := "400ms"
	if d := getenv("APPEND_DELAY"); d != "" {
		delay = d
	}
	fs.StringVar(&delay, "delay", delay, "how long a call waits between beginning and appending (APPEND_DELAY)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if s.file == "" {
		return nil, fmt.Errorf("-file (or APPEND_FILE) is required")
	}
	d, err := time.ParseDuration(delay)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("-delay: want a duration >= 0, got %q", delay)
	}
	s.delay = d
	return s, nil
}

// appendLine is the tool. It deliberately ignores ctx once the call has
// begun (see the package comment).
func (s *server) appendLine(_ context.Context, _ *mcp.CallToolRequest, in appendArgs) (*mcp.CallToolResult, any, error) {
	if strings.ContainsAny(in.Line, "\r\n") {
		return errorResult("line must not contain a newline"), nil, nil
	}
	if s.started != "" {
		rec, _ := json.Marshal(map[string]any{"line": in.Line, "pid": os.Getpid(), "ppid": os.Getppid()})
		s.mu.Lock()
		err := appendSynced(s.started, append(rec, '\n'))
		s.mu.Unlock()
		if err != nil {
			return errorResult("record the start: " + err.Error()), nil, nil
		}
	}
	time.Sleep(s.delay)
	if err := appendSynced(s.file, []byte(in.Line+"\n")); err != nil {
		return errorResult("append: " + err.Error()), nil, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "appended"}}}, nil, nil
}

// appendSynced appends b to the file at path in one write and syncs it.
func appendSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
