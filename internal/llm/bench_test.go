package llm

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkStreamAssembly is the client's share of a streamed call without
// the network: SSE framing, chunk decoding, delta delivery and tool-call
// assembly of a two-call answer (10 chunks with usage).
func BenchmarkStreamAssembly(b *testing.B) {
	body := []byte(strings.Join(parallelToolCallStream, ""))
	c, err := New(Config{BaseURL: "http://bench.invalid/v1", Model: "m", HTTPClient: &http.Client{Transport: bodyTransport{body}}})
	if err != nil {
		b.Fatal(err)
	}
	req := userRequest("q")
	ctx := context.Background()
	deltas := 0
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		resp, err := c.Chat(ctx, req, func(Delta) error { deltas++; return nil })
		if err != nil || len(resp.Message.ToolCalls) != 2 {
			b.Fatal(err)
		}
	}
}
