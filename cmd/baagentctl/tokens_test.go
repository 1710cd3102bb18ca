package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/tokens"
)

// startTokens serves the tokens service on a loopback port and returns the
// flag that points baagentctl at it.
func startTokens(t testing.TB) string {
	t.Helper()
	svc, err := tokens.New(tokens.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(16 << 20)) // the services' limit (internal/grpcserver)
	svc.Register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return "--tokens-addr=" + lis.Addr().String()
}

// ctlStdin runs baagentctl with stdin as its standard input.
func ctlStdin(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = run(ctx, args, strings.NewReader(stdin), &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

const fox = "The quick brown fox jumps over the lazy dog." // 10 tokens in o200k_base and cl100k_base

func TestTokensCount(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	// Standard input, exact OpenAI count.
	if code, out, errOut := ctlStdin(t, fox, addr, "tokens", "count", "--model", "gpt-4o"); code != 0 || out != "10\n" {
		t.Fatalf("count gpt-4o: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A file, with Claude's margin: ceil(10 x 1.15) = 12.
	file := filepath.Join(t.TempDir(), "fox.txt")
	if err := os.WriteFile(file, []byte(fox), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := ctlStdin(t, "ignored", addr, "tokens", "count", "--model=claude-sonnet-4-5", "--file", file); code != 0 || out != "12\n" {
		t.Fatalf("count claude --file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Special-token text is text unless allowed: 7 tokens, or 1.
	if code, out, _ := ctlStdin(t, "<|endoftext|>", addr, "tokens", "count", "--model", "gpt-4"); code != 0 || out != "7\n" {
		t.Errorf("count special text: exit %d, %q, want 7", code, out)
	}
	if code, out, _ := ctlStdin(t, "<|endoftext|>", addr, "tokens", "count", "--model", "gpt-4", "--allow-special"); code != 0 || out != "1\n" {
		t.Errorf("count --allow-special: exit %d, %q, want 1", code, out)
	}
}

func TestTokensCountJSON(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	// --json before the subcommand and after it both work.
	for _, args := range [][]string{
		{addr, "tokens", "count", "--json", "--model", "claude-sonnet-4-5"},
		{addr, "tokens", "--json", "count", "--model", "claude-sonnet-4-5"},
		{"--json", addr, "tokens", "count", "--model", "claude-sonnet-4-5"},
	} {
		code, out, errOut := ctlStdin(t, fox, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		var got struct {
			Count        string  `json:"count"` // int64 is a string in protobuf JSON
			RawCount     string  `json:"raw_count"`
			EncodingName string  `json:"encoding_name"`
			SafetyMargin float64 `json:"safety_margin"`
			IsEstimate   bool    `json:"is_estimate"`
			ModelFamily  string  `json:"model_family"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, out)
		}
		if got.Count != "12" || got.RawCount != "10" || got.EncodingName != "cl100k_base" || got.SafetyMargin != 1.15 || !got.IsEstimate || got.ModelFamily != "MODEL_FAMILY_CLAUDE" {
			t.Errorf("%v: %+v", args, got)
		}
	}
}

func TestTokensCountErrors(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("a\xffb"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"no model", fox, []string{"tokens", "count"}, 2, "--model is required"},
		{"stray argument", fox, []string{"tokens", "count", "--model", "gpt-4o", "extra"}, 2, `unexpected argument "extra"`},
		{"bad flag", fox, []string{"tokens", "count", "--frobnicate"}, 2, "frobnicate"},
		{"missing file", "", []string{"tokens", "count", "--model", "gpt-4o", "--file", filepath.Join(dir, "none.txt")}, 1, "none.txt"},
		{"invalid UTF-8", "", []string{"tokens", "count", "--model", "gpt-4o", "--file", bad}, 1, "not valid UTF-8 text (first invalid byte at offset 1)"},
		{"too large", "0123456789", []string{"tokens", "count", "--model", "gpt-4o", "--max-bytes", "5"}, 1, "larger than 5 bytes"},
		{"no subcommand", "", []string{"tokens"}, 2, "Available Commands:"},
		{"unknown subcommand", "", []string{"tokens", "tally"}, 2, `unknown command "tally"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := ctlStdin(t, c.stdin, append([]string{addr}, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.stderr) || out != "" {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q (want it to contain %q)", code, c.code, out, errOut, c.stderr)
			}
		})
	}
	if code, _, _ := ctlStdin(t, "", addr, "tokens", "count", "-h"); code != 0 {
		t.Errorf("count -h: exit %d, want 0", code)
	}
}

// TestTokensCountStreams counts files of several chunks, with characters
// cut by the chunk boundaries, and checks the counts against the service's
// CountTokens of the whole text; an invalid byte far into the file is
// reported at its offset.
func TestTokensCountStreams(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	dir := t.TempDir()
	// 中 is three bytes: 1 + 3k never divides countChunkBytes, so chunk
	// ends fall inside characters.
	text := "x" + strings.Repeat("中文，测试 words and 12345; ", 120_000)
	file := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := tokens.New(tokens.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	want, err := svc.CountTokens(t.Context(), &baagentv1.CountTokensRequest{Model: "gpt-4o", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := ctlStdin(t, "", addr, "tokens", "count", "--model", "gpt-4o", "--file", file)
	if code != 0 || out != fmt.Sprintf("%d\n", want.GetCount()) {
		t.Fatalf("count %d bytes: exit %d, stdout %q (want %d), stderr %q", len(text), code, out, want.GetCount(), errOut)
	}
	// Standard input streams too.
	if code, out, _ := ctlStdin(t, text, addr, "tokens", "count", "--model", "gpt-4o"); code != 0 || out != fmt.Sprintf("%d\n", want.GetCount()) {
		t.Errorf("count from stdin: exit %d, stdout %q", code, out)
	}
	// An invalid byte in the third chunk.
	bad := []byte(text)
	at := 2*countChunkBytes + 1000
	for bad[at]&0xC0 == 0x80 {
		at++
	}
	bad[at] = 0xFF
	badFile := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(badFile, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr := fmt.Sprintf("not valid UTF-8 text (first invalid byte at offset %d)", at)
	if code, out, errOut := ctlStdin(t, "", addr, "tokens", "count", "--model", "gpt-4o", "--file", badFile); code != 1 || out != "" || !strings.Contains(errOut, wantErr) {
		t.Errorf("invalid byte at %d: exit %d, stdout %q, stderr %q", at, code, out, errOut)
	}
	// --max-bytes below the file's size, above one chunk.
	if code, _, errOut := ctlStdin(t, "", addr, "tokens", "count", "--model", "gpt-4o", "--file", file, "--max-bytes", "1000000"); code != 1 || !strings.Contains(errOut, "larger than 1000000 bytes") {
		t.Errorf("--max-bytes 1000000: exit %d, stderr %q", code, errOut)
	}
}

func TestIncompleteTail(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		data string
		want int
	}{
		{"", 0}, {"abc", 0}, {"ab\xe4", 1}, {"ab\xe4\xb8", 2}, {"ab中", 0}, {"\xf0\x9f\x98", 3}, {"a\xff", 0}, {"\xb8\xb8\xb8", 0}, {"a\xf0\x9f\x98\x80", 0},
	} {
		if got := incompleteTail([]byte(tc.data)); got != tc.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", tc.data, got, tc.want)
		}
	}
}

func TestTokensUnreachable(t *testing.T) {
	t.Parallel()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	code, out, errOut := ctlStdin(t, fox, "--timeout=2s", "--tokens-addr="+dead, "tokens", "count", "--model", "gpt-4o")
	if code != 1 || out != "" || !strings.Contains(errOut, dead) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the address named", code, out, errOut)
	}
}

func TestTokensInfoAndModels(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	// GetModelInfo("glm-4-plus"), a model known only by its family.
	code, out, errOut := ctlStdin(t, "", addr, "tokens", "info", "glm-4-plus")
	if code != 0 {
		t.Fatalf("info: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"glm-4-plus", "glm", "cl100k_base", "1.25", "pattern glm-*", "false (client available: false)"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = ctlStdin(t, "", addr, "--json", "tokens", "info", "glm-4-plus")
	var info map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info["model_family"] != "MODEL_FAMILY_GLM" || info["safety_margin"] != 1.25 {
		t.Errorf("info --json: exit %d, %s", code, out)
	}
	if code, _, errOut := ctlStdin(t, "", addr, "tokens", "info"); code != 2 || !strings.Contains(errOut, "MODEL") {
		t.Errorf("info without MODEL: exit %d, %q", code, errOut)
	}

	code, out, _ = ctlStdin(t, "", addr, "tokens", "models")
	if code != 0 || !strings.Contains(out, "claude-*") || !strings.Contains(out, "o200k_base, cl100k_base, p50k_base, r50k_base") {
		t.Errorf("models: exit %d\n%s", code, out)
	}
	code, out, _ = ctlStdin(t, "", addr, "tokens", "models", "--json")
	var list struct {
		Models    []map[string]any `json:"models"`
		Encodings []string         `json:"encodings"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Models) < 10 || len(list.Encodings) != 4 {
		t.Errorf("models --json: exit %d, %d models, %v", code, len(list.Models), list.Encodings)
	}
}

func TestTokensEncodeDecode(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	// Reference ids of the sentence (services/tokens/encoding/vectors_test.go).
	const ids = "791 4062 14198 39935 35308 927 279 16053 5679 13"
	code, out, errOut := ctlStdin(t, fox, addr, "tokens", "encode", "--encoding", "cl100k_base")
	if code != 0 || out != ids+"\n" {
		t.Fatalf("encode: exit %d, %q, %s", code, out, errOut)
	}
	code, out, errOut = ctlStdin(t, "", append([]string{addr, "tokens", "decode", "--model", "gpt-4"}, strings.Fields(ids)...)...)
	if code != 0 || out != fox+"\n" {
		t.Fatalf("decode: exit %d, %q, %s", code, out, errOut)
	}
	// Comma-separated ids, JSON output.
	code, out, _ = ctlStdin(t, "", addr, "--json", "tokens", "decode", "--encoding", "cl100k_base", "15339,1917")
	var dec struct {
		Text      string `json:"text"`
		ValidUTF8 bool   `json:"valid_utf8"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &dec) != nil || dec.Text != "hello world" || !dec.ValidUTF8 {
		t.Errorf("decode --json: exit %d, %s", code, out)
	}
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"tokens", "encode"}, 2, "exactly one of --model and --encoding"},
		{[]string{"tokens", "decode", "--model", "gpt-4", "--encoding", "cl100k_base", "1"}, 2, "exactly one"},
		{[]string{"tokens", "decode", "--encoding", "cl100k_base", "x1"}, 2, `token id "x1"`},
		{[]string{"tokens", "decode", "--encoding", "cl100k_base", "100256"}, 1, "InvalidArgument"},
		{[]string{"tokens", "encode", "--encoding", "gpt2"}, 1, "encoding_name"},
	} {
		if code, _, errOut := ctlStdin(t, "x", append([]string{addr}, c.args...)...); code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, errOut, c.stderr)
		}
	}
}
