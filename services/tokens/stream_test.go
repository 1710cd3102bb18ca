package tokens

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/tokens/encoding"
)

// mixedText is n bytes or more of prose, code, JSON, CJK and numbers.
func mixedText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Line %d: the quick brown fox's 12345 jumps; ", i)
		b.WriteString(`{"key": [1, 2.5, "中文，测试"], "ok": true}` + "\n")
		b.WriteString("func f(x int) error {\n\treturn nil // don't\n}\n\n")
		b.WriteString("我们正在构建一个支持多租户的智能体平台。 e\u0301t\u00e9   \r\n")
	}
	return b.String()
}

// sendStream sends text to CountTokensStream in chunks of chunk bytes (the
// cuts fall anywhere, inside characters too); the first message carries
// model and allow.
func sendStream(t *testing.T, c baagentv1.TokensServiceClient, model string, allow bool, text []byte, chunk int) (*baagentv1.CountTokensResponse, error) {
	t.Helper()
	st, err := c.CountTokensStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first := &baagentv1.CountTokensStreamRequest{Model: model, AllowSpecialTokens: allow}
	if err := st.Send(first); err != nil {
		t.Fatal(err)
	}
	for len(text) > 0 {
		n := min(chunk, len(text))
		if err := st.Send(&baagentv1.CountTokensStreamRequest{Text: text[:n]}); err != nil {
			break // the server has answered (an error); CloseAndRecv reports it
		}
		text = text[n:]
	}
	return st.CloseAndRecv()
}

// TestCountTokensStreamRPC streams texts in awkward chunks and compares
// with CountTokens on the whole text.
func TestCountTokensStreamRPC(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	c := serve(t, newTestServer(t, Options{Registerer: reg}))
	big := mixedText(3 << 20)
	special := strings.Repeat("a<|endoftext|>b <|endofprompt|> ", 20_000)
	for _, tc := range []struct {
		model string
		text  string
		allow bool
		chunk int
	}{
		{"gpt-4o", big, false, 512 << 10},
		{"gpt-4o", big, false, 7777}, // splits UTF-8 characters
		{"gpt-4", big[:200_000], false, 3},
		{"claude-sonnet-4-5", big, false, 1 << 20},
		{"davinci-002", big, false, 100_003},
		{"gpt-4o", special, true, 1001},
		{"gpt-4", special, false, 1001},
		{"gpt-4o", "", false, 1},
		{"gpt-4o", "The quick brown fox jumps over the lazy dog.", false, 5},
	} {
		want, err := c.CountTokens(t.Context(), &baagentv1.CountTokensRequest{Model: tc.model, Text: tc.text, AllowSpecialTokens: tc.allow})
		if err != nil {
			t.Fatal(err)
		}
		got, err := sendStream(t, c, tc.model, tc.allow, []byte(tc.text), tc.chunk)
		if err != nil {
			t.Fatalf("%s chunk %d: %v", tc.model, tc.chunk, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s %d bytes in chunks of %d (allow %v):\n stream %v\n  unary %v", tc.model, len(tc.text), tc.chunk, tc.allow, got, want)
		}
	}
	if n := counterValue(t, reg, "baagent_tokens_count_stream_bytes_total"); n < 3<<20 {
		t.Errorf("count_stream_bytes_total = %v", n)
	}
	if n := counterValue(t, reg, "baagent_tokens_parallel_counts_total"); n < 5 {
		t.Errorf("parallel_counts_total = %v, want the large unary counts", n)
	}
}

// TestCountTokensStreamInvalidUTF8: bytes that are not UTF-8 count as the
// engine counts them, one U+FFFD per maximal invalid subsequence, however
// the chunks fall.
func TestCountTokensStreamInvalidUTF8(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, Options{})
	c := serve(t, s)
	text := strings.ReplaceAll(mixedText(400_000), "o", "o\xff\xe4\xb8")
	_, enc, err := s.resolve("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := enc.Count(text, false)
	fixed, _ := enc.Count(encoding.ToValidUTF8(text), false)
	if want != fixed {
		t.Fatalf("serial count %d of the raw bytes, %d of the replaced text", want, fixed)
	}
	for _, chunk := range []int{1 << 20, 4097, 65536} {
		got, err := sendStream(t, c, "gpt-4o", false, []byte(text), chunk)
		if err != nil || got.GetRawCount() != int64(want) {
			t.Errorf("chunks of %d: count %v, %v; want %d", chunk, got.GetRawCount(), err, want)
		}
	}
}

// TestCountTokensStreamErrors: no model, another model later, too much
// text, no cut point, each naming the field; the results are counted.
func TestCountTokensStreamErrors(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	c := serve(t, newTestServer(t, Options{Registerer: reg, MaxTextBytes: 1 << 20, MaxStreamBytes: 3 << 20}))

	// No message at all, and a first message without a model.
	st, err := c.CountTokensStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.CloseAndRecv()
	vt.WantInvalid(t, err, "model")
	_, err = sendStream(t, c, "", false, []byte("text"), 4)
	vt.WantInvalid(t, err, "model")
	_, err = sendStream(t, c, "bad model name with spaces\x00", false, []byte("text"), 4)
	vt.WantInvalid(t, err, "model")

	// Another model in a later message.
	st, err = c.CountTokensStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&baagentv1.CountTokensStreamRequest{Model: "gpt-4o", Text: []byte("a b")})
	_ = st.Send(&baagentv1.CountTokensStreamRequest{Model: "gpt-4", Text: []byte("c")})
	_, err = st.CloseAndRecv()
	vt.WantInvalid(t, err, "model")

	// More than MaxStreamBytes.
	_, err = sendStream(t, c, "gpt-4o", false, []byte(mixedText(4<<20)), 256<<10)
	vt.WantInvalid(t, err, "text")

	// A stretch longer than MaxTextBytes with no cut point.
	_, err = sendStream(t, c, "gpt-4o", false, []byte(strings.Repeat("7", 2<<20)), 256<<10)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "text: ") {
		t.Errorf("2 MiB of digits: %v, want ResourceExhausted naming text", err)
	}

	// Exactly MaxStreamBytes is accepted.
	if _, err := sendStream(t, c, "gpt-4o", false, []byte(mixedText(3 << 20)[:3<<20]), 1<<20); err != nil {
		t.Errorf("3 MiB stream: %v", err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "baagent_tokens_count_streams_total" {
			for _, m := range mf.GetMetric() {
				results[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if results["invalid"] != 5 || results["no_cut"] != 1 || results["ok"] != 1 {
		t.Errorf("count_streams_total = %v, want invalid 5, no_cut 1, ok 1", results)
	}
}

// TestCountTokensParallel: above the threshold CountTokens cuts the text
// and counts the parts concurrently, with the serial engine's count.
func TestCountTokensParallel(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, Options{ParallelThreshold: 1 << 10, CountWorkers: 3})
	text := mixedText(500_000)
	for _, model := range []string{"gpt-4o", "gpt-4", "davinci-002"} {
		for _, allow := range []bool{false, true} {
			_, enc, err := s.resolve(model)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := enc.Count(text, allow)
			resp, err := s.CountTokens(t.Context(), &baagentv1.CountTokensRequest{Model: model, Text: text, AllowSpecialTokens: allow})
			if err != nil || resp.GetRawCount() != int64(want) {
				t.Errorf("%s allow=%v: %v, %v; serial %d", model, allow, resp.GetRawCount(), err, want)
			}
		}
	}
	if n := testutil.ToFloat64(s.metrics.parallelCounts); n != 6 {
		t.Errorf("parallel_counts_total = %v, want 6", n)
	}
}
