package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/topology"
)

// defaultTokensInputBytes bounds what `tokens encode` reads:
// the tokens service's default text limit (16 MiB). A larger input would be
// refused by the service anyway; reading it whole first would only use memory.
const defaultTokensInputBytes = 16 << 20

// tokensCall dials the tokens service and runs call with the request deadline.
func (c *cli) tokensCall(ctx context.Context, call func(context.Context, baagentv1.TokensServiceClient) error) error {
	conn, err := c.dial(topology.Tokens)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := call(ctx, baagentv1.NewTokensServiceClient(conn)); err != nil {
		st := status.Convert(err)
		return fmt.Errorf("tokens service at %s: %s: %s", c.addrs[topology.Tokens], st.Code(), st.Message())
	}
	return nil
}

// readInput reads the file at path, or standard input when path is empty,
// refusing more than limit bytes.
func (c *cli) readInput(path string, limit int64) (string, error) {
	r, name := c.stdin, "standard input"
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r, name = f, path
	}
	if r == nil {
		return "", nil
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return "", fmt.Errorf("%s is larger than %d bytes (raise --max-bytes up to the service's limit)", name, limit)
	}
	// Protobuf refuses to send a string that is not UTF-8; say where it breaks.
	if at := firstInvalidUTF8(data); at >= 0 {
		return "", fmt.Errorf("%s is not valid UTF-8 text (first invalid byte at offset %d)", name, at)
	}
	return string(data), nil
}

// inputFlags are the flags of the subcommands that read text.
type inputFlags struct {
	file     string
	maxBytes int64
	special  bool
}

func (f *inputFlags) add(c *cli, name, argsUsage string) *pflag.FlagSet {
	return f.addWithLimit(c, name, argsUsage, defaultTokensInputBytes)
}

// addWithLimit is add with another default for --max-bytes.
func (f *inputFlags) addWithLimit(c *cli, name, argsUsage string, maxBytes int64) *pflag.FlagSet {
	fs := c.flagSet("tokens "+name, argsUsage)
	fs.StringVar(&f.file, "file", "", "read the text from this file instead of standard input")
	fs.Int64Var(&f.maxBytes, "max-bytes", maxBytes, "largest input read, in bytes")
	fs.BoolVar(&f.special, "allow-special", false, "treat special-token text such as <|endoftext|> as the special token")
	return fs
}

func runTokensCount(ctx context.Context, c *cli, args []string) error {
	var in inputFlags
	var model string
	fs := in.addWithLimit(c, "count", "--model M [--file F]", defaultCountInputBytes)
	fs.StringVar(&model, "model", "", "model name (required), e.g. gpt-4o or claude-sonnet-4-5")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if model == "" {
		return fmt.Errorf("%w: --model is required", errUsage)
	}
	r, name := c.stdin, "standard input"
	if in.file != "" {
		f, err := os.Open(in.file)
		if err != nil {
			return err
		}
		defer f.Close()
		r, name = f, in.file
	}
	if r == nil {
		r = strings.NewReader("")
	}
	var resp *baagentv1.CountTokensResponse
	var localErr error
	err := c.tokensCall(ctx, func(ctx context.Context, tc baagentv1.TokensServiceClient) (err error) {
		resp, localErr, err = streamCount(ctx, tc, r, name, in.maxBytes,
			&baagentv1.CountTokensStreamRequest{Model: model, AllowSpecialTokens: in.special})
		return err
	})
	if localErr != nil {
		return localErr
	}
	if err != nil {
		return err
	}
	if c.json {
		return c.printProto(resp)
	}
	_, err = fmt.Fprintln(c.stdout, resp.GetCount())
	return err
}

// countChunkBytes is how much text each CountTokensStream message carries:
// well under the gRPC message limit, big enough that per-message costs
// vanish.
const countChunkBytes = 512 << 10

// defaultCountInputBytes bounds what `tokens count` reads: the tokens
// service's CountTokensStream limit (1 GiB).
const defaultCountInputBytes = 1 << 30

// streamCount sends r, named name in errors, to CountTokensStream in chunks
// of whole characters, refusing more than limit bytes and text that is not
// UTF-8. first carries the model and flags; the chunks follow it. A problem
// with the input is returned as localErr (the call is then abandoned), one
// of the service as err.
func streamCount(ctx context.Context, tc baagentv1.TokensServiceClient, r io.Reader, name string, limit int64,
	first *baagentv1.CountTokensStreamRequest) (resp *baagentv1.CountTokensResponse, localErr, err error) {
	st, err := tc.CountTokensStream(ctx)
	if err != nil {
		return nil, nil, err
	}
	var buf []byte
	msg, held, sent := first, 0, int64(0)
	for {
		// A new buffer per message: a sent message must not change
		// (stats handlers may read it later).
		next := make([]byte, countChunkBytes)
		copy(next, buf[len(buf)-held:])
		buf = next
		n, rerr := io.ReadFull(r, buf[held:])
		n += held
		end := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !end {
			return nil, fmt.Errorf("read %s: %w", name, rerr), nil
		}
		if sent+int64(n) > limit {
			return nil, fmt.Errorf("%s is larger than %d bytes (raise --max-bytes up to the service's limit)", name, limit), nil
		}
		// Send whole characters; a character cut by the buffer's end
		// goes with the next chunk.
		held = 0
		if !end {
			held = incompleteTail(buf[:n])
		}
		chunk := buf[:n-held]
		if at := firstInvalidUTF8(chunk); at >= 0 {
			// Protobuf would carry the bytes, but a file that is not
			// text is more likely a mistake than something to count.
			return nil, fmt.Errorf("%s is not valid UTF-8 text (first invalid byte at offset %d)", name, sent+int64(at)), nil
		}
		if len(chunk) > 0 || msg == first {
			msg.Text = chunk
			if err := st.Send(msg); err != nil {
				break // the service answered early: CloseAndRecv has its status
			}
			msg = &baagentv1.CountTokensStreamRequest{}
		}
		sent += int64(len(chunk))
		if end {
			break
		}
		buf = buf[:n]
	}
	resp, err = st.CloseAndRecv()
	return resp, nil, err
}

// incompleteTail is the length of the character data ends in when it is
// the start of a valid character still missing bytes, else 0.
func incompleteTail(data []byte) int {
	for k := 1; k <= min(utf8.UTFMax-1, len(data)); k++ {
		if c := data[len(data)-k]; c&0xC0 != 0x80 { // the last character's first byte
			if utf8.FullRune(data[len(data)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}

func runTokensInfo(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("tokens info", "MODEL")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one MODEL", errUsage)
	}
	var resp *baagentv1.GetModelInfoResponse
	err := c.tokensCall(ctx, func(ctx context.Context, tc baagentv1.TokensServiceClient) (err error) {
		resp, err = tc.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: fs.Arg(0)})
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printProto(resp.GetInfo())
	}
	info, md := resp.GetInfo(), resp.GetInfo().GetMetadata()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"model", info.GetModel()},
		{"family", familyLabel(info.GetModelFamily())},
		{"encoding", info.GetEncodingName()},
		{"safety margin", strconv.FormatFloat(info.GetSafetyMargin(), 'g', -1, 64)},
		{"estimate", strconv.FormatBool(info.GetIsEstimate())},
		{"matched by", matchLabel(info.GetMatchedBy(), info.GetMatchedPattern())},
		{"exact counting", fmt.Sprintf("%v (client available: %v)", info.GetUseExactCounting(), info.GetHasApiClient())},
		{"context length", strconv.FormatInt(md.GetContextLength(), 10)},
		{"max output", strconv.FormatInt(md.GetMaxOutputTokens(), 10)},
		{"input $/1M", price(md.InputCostPer_1M)},
		{"output $/1M", price(md.OutputCostPer_1M)},
		{"cached input $/1M", cachedPrice(md)},
		{"priced as", pricedAs(md)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

func runTokensModels(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("tokens models", "")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	var resp *baagentv1.ListModelsResponse
	err := c.tokensCall(ctx, func(ctx context.Context, tc baagentv1.TokensServiceClient) (err error) {
		resp, err = tc.ListModels(ctx, &baagentv1.ListModelsRequest{})
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printProto(resp)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tFAMILY\tENCODING\tMARGIN\tESTIMATE\tCONTEXT\t$/1M IN\tCACHED\tOUT\tPRICE AS OF")
	for _, m := range resp.GetModels() {
		md := m.GetMetadata()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%g\t%v\t%d\t%s\n", m.GetModel(), familyLabel(m.GetModelFamily()), m.GetEncodingName(),
			m.GetSafetyMargin(), m.GetIsEstimate(), md.GetContextLength(), priceColumns(md))
	}
	fmt.Fprintf(tw, "\nencodings: %s\n", strings.Join(resp.GetEncodings(), ", "))
	return tw.Flush()
}

// encoderFlags are --model and --encoding, one of which is required.
type encoderFlags struct{ model, encoding string }

func (e *encoderFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&e.model, "model", "", "model name whose encoding to use")
	fs.StringVar(&e.encoding, "encoding", "", "encoding name: o200k_base, cl100k_base, p50k_base or r50k_base")
}

func (e *encoderFlags) check() error {
	if (e.model == "") == (e.encoding == "") {
		return fmt.Errorf("%w: set exactly one of --model and --encoding", errUsage)
	}
	return nil
}

func runTokensEncode(ctx context.Context, c *cli, args []string) error {
	var in inputFlags
	var enc encoderFlags
	fs := in.add(c, "encode", "(--model M | --encoding E) [--file F]")
	enc.add(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := enc.check(); err != nil {
		return err
	}
	text, err := c.readInput(in.file, in.maxBytes)
	if err != nil {
		return err
	}
	req := &baagentv1.EncodeRequest{Text: text, AllowSpecialTokens: in.special}
	if enc.model != "" {
		req.Encoder = &baagentv1.EncodeRequest_Model{Model: enc.model}
	} else {
		req.Encoder = &baagentv1.EncodeRequest_EncodingName{EncodingName: enc.encoding}
	}
	var resp *baagentv1.EncodeResponse
	err = c.tokensCall(ctx, func(ctx context.Context, tc baagentv1.TokensServiceClient) error {
		resp, err = tc.Encode(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printProto(resp)
	}
	ids := make([]string, len(resp.GetTokens()))
	for i, id := range resp.GetTokens() {
		ids[i] = strconv.FormatUint(uint64(id), 10)
	}
	_, err = fmt.Fprintln(c.stdout, strings.Join(ids, " "))
	return err
}

func runTokensDecode(ctx context.Context, c *cli, args []string) error {
	var enc encoderFlags
	fs := c.flagSet("tokens decode", "(--model M | --encoding E) ID...")
	enc.add(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := enc.check(); err != nil {
		return err
	}
	req := &baagentv1.DecodeRequest{Tokens: make([]uint32, 0, fs.NArg())}
	for _, arg := range fs.Args() {
		for _, field := range strings.FieldsFunc(arg, func(r rune) bool { return r == ',' || r == ' ' }) {
			id, err := strconv.ParseUint(field, 10, 32)
			if err != nil {
				return fmt.Errorf("%w: token id %q is not a number from 0 to %d", errUsage, field, uint32(1<<32-1))
			}
			req.Tokens = append(req.Tokens, uint32(id))
		}
	}
	if enc.model != "" {
		req.Encoder = &baagentv1.DecodeRequest_Model{Model: enc.model}
	} else {
		req.Encoder = &baagentv1.DecodeRequest_EncodingName{EncodingName: enc.encoding}
	}
	var resp *baagentv1.DecodeResponse
	err := c.tokensCall(ctx, func(ctx context.Context, tc baagentv1.TokensServiceClient) (err error) {
		resp, err = tc.Decode(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printProto(resp)
	}
	_, err = fmt.Fprintln(c.stdout, resp.GetText())
	return err
}

// firstInvalidUTF8 is the offset of the first byte of data that is not part
// of valid UTF-8, or -1.
func firstInvalidUTF8(data []byte) int {
	if utf8.Valid(data) {
		return -1
	}
	for at := 0; at < len(data); {
		r, size := utf8.DecodeRune(data[at:])
		if r == utf8.RuneError && size == 1 {
			return at
		}
		at += size
	}
	return -1
}

func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// familyLabel is a family as token_encoders.yaml spells it ("claude").
func familyLabel(f baagentv1.ModelFamily) string {
	return strings.ToLower(strings.TrimPrefix(f.String(), "MODEL_FAMILY_"))
}

func matchLabel(m baagentv1.ModelMatch, key string) string {
	label := strings.ToLower(strings.TrimPrefix(m.String(), "MODEL_MATCH_"))
	if key != "" {
		label += " " + key
	}
	return label
}

func price(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}
