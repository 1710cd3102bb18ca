package gateway

import (
	"net/http"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// discardWriter is a ResponseWriter that keeps nothing (the cost measured
// is the chunk's rendering, not a socket).
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// benchEntry is a text_delta as the hub hands it over.
func benchEntry(b *testing.B) *hub.Entry {
	ev := &baagentv1.Event{RunId: "run_01a2428_0123456789abcdef", ConversationId: "conv-1", Tenant: "acme", Seq: 42, Cursor: "42", Type: "text_delta",
		Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "Revenue grew 12% quarter over quarter, "}}}
	data, err := hub.JSONOptions.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	return &hub.Entry{Seq: 42, Type: "text_delta", Cursor: "42", Event: ev, JSON: data}
}

// The per-event, per-client cost of the chat interfaces: one OpenAI chunk
// or one UI message delta plus its data-baagent part.
func BenchmarkChatChunk(b *testing.B) {
	e := benchEntry(b)
	out := func() *chatSSE { return newChatSSE(&discardWriter{h: http.Header{}}, DefaultWriteTimeout) }
	b.Run("openai", func(b *testing.B) {
		o := &openAIStreamer{out: out(), base: openAICompletion{ID: "chatcmpl-run", Created: 1, Model: "gpt-4o"}, extra: baagentExtra{RunID: "run", ConversationID: "conv-1"}}
		b.ReportAllocs()
		for b.Loop() {
			if err := o.event(e, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("aisdk", func(b *testing.B) {
		a := &aisdkStreamer{out: out()}
		b.ReportAllocs()
		for b.Loop() {
			if err := a.event(e, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
