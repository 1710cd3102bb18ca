package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Exports: `runs export` and `conversations export` write a run's or a
// conversation's export (docs/concepts/export.md) to standard output or a
// file, as the gateway streams it.

// conversationsExportSpec is `conversations export`.
func conversationsExportSpec() spec {
	return spec{use: "export CONVERSATION_ID", short: "Export a conversation's runs, oldest first, as a Claude or OpenAI transcript or JSON Lines of events", run: conversationsExport,
		long: "Export writes every run of the conversation, oldest first, as one document:\n" + exportFormatsHelp,
		example: "  baagentctl conversations export conv-1 --format openai -o conv-1.json\n" +
			"  baagentctl conversations export conv-1 --format events | jq -c 'select(.type == \"act\")'"}
}

// runsExportSpec is `runs export`.
func runsExportSpec() spec {
	return spec{use: "export RUN_ID", short: "Export a run as a Claude or OpenAI transcript or JSON Lines of events", run: runsExport,
		long: "Export writes the run's stored events as one document:\n" + exportFormatsHelp,
		example: "  baagentctl runs export run-123 --format claude -o run-123.json\n" +
			"  baagentctl runs export run-123 --format events > run-123.jsonl"}
}

const exportFormatsHelp = "  claude  a JSON array of messages of Claude content blocks (text, thinking,\n" +
	"          tool_use with the model's call id, tool_result with tool_use_id)\n" +
	"  openai  a JSON array of Chat Completions messages (user, assistant with\n" +
	"          tool_calls, tool with tool_call_id)\n" +
	"  events  the events, one JSON object per line, as the event streams send them\n" +
	"A run in progress is exported as far as it has got. With -o the file is\n" +
	"written whole or not at all. Large exports may need a longer --timeout."

func runsExport(ctx context.Context, c *cli, args []string) error {
	return c.export(ctx, "runs export", "RUN_ID", args, func(ctx context.Context, gw *gatewayClient, id string, f baagentv1.ExportFormat) (exportStream, error) {
		s, err := gw.ExportRun(ctx, &baagentv1.ExportRunRequest{RunId: id, Format: f})
		return runExportStream{s}, err
	})
}

func conversationsExport(ctx context.Context, c *cli, args []string) error {
	return c.export(ctx, "conversations export", "CONVERSATION_ID", args, func(ctx context.Context, gw *gatewayClient, id string, f baagentv1.ExportFormat) (exportStream, error) {
		s, err := gw.ExportConversation(ctx, &baagentv1.ExportConversationRequest{ConversationId: id, Format: f})
		return conversationExportStream{s}, err
	})
}

// exportStream is either export RPC's stream: the next chunk's data.
type exportStream interface {
	next() ([]byte, error)
}

type runExportStream struct {
	grpc.ServerStreamingClient[baagentv1.ExportRunResponse]
}

func (s runExportStream) next() ([]byte, error) {
	m, err := s.Recv()
	return m.GetData(), err
}

type conversationExportStream struct {
	grpc.ServerStreamingClient[baagentv1.ExportConversationResponse]
}

func (s conversationExportStream) next() ([]byte, error) {
	m, err := s.Recv()
	return m.GetData(), err
}

// parseExportFormat reads --format: claude, openai or events.
func parseExportFormat(v string) (baagentv1.ExportFormat, bool) {
	if v == "" || v != strings.ToLower(v) {
		return 0, false
	}
	n, ok := baagentv1.ExportFormat_value["EXPORT_FORMAT_"+strings.ToUpper(v)]
	return baagentv1.ExportFormat(n), ok && n != 0
}

func (c *cli) export(ctx context.Context, name, arg string, args []string, open func(context.Context, *gatewayClient, string, baagentv1.ExportFormat) (exportStream, error)) error {
	fs := c.flagSet(name, arg)
	var rf runFlags
	c.addRunFlags(fs, &rf)
	formatFlag := fs.String("format", "", "export format: claude, openai or events (required)")
	outFlag := fs.StringP("output", "o", "-", "file to write (- is standard output); written whole or not at all")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one %s argument", errUsage, arg)
	}
	f, ok := parseExportFormat(*formatFlag)
	if !ok {
		return fmt.Errorf("%w: --format must be claude, openai or events, not %q", errUsage, *formatFlag)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	stream, err := open(ctx, gw, fs.Arg(0), f)
	if err != nil {
		return c.rpcError(name, err)
	}
	if *outFlag == "-" {
		return c.copyExport(name, stream, c.stdout)
	}
	return c.exportToFile(name, stream, *outFlag)
}

// copyExport writes the stream's chunks to w.
func (c *cli) copyExport(name string, stream exportStream, w io.Writer) error {
	for {
		data, err := stream.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.rpcError(name, err)
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("%s: write: %w", name, err)
		}
	}
}

// exportToFile writes the export to a temporary file beside path and
// renames it into place once the whole document has arrived, so a failed
// export leaves no partial file (and an existing file untouched).
func (c *cli) exportToFile(name string, stream exportStream, path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := c.copyExport(name, stream, tmp); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
