package llm

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func spanAttrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// A traced model call is a "chat <model>" client span with the GenAI
// attributes, the retried attempts as events and, below it, one HTTP span
// per attempt whose traceparent reaches the endpoint; a failed call records
// its error kind and status.
func TestChatSpans(t *testing.T) {
	t.Parallel()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	errBody := []string{`{"error":{"message":"The server had an error processing your request.","type":"server_error"}}`}
	f, srv := newFakeEndpoint(t, reply{status: 500, lines: errBody}, reply{lines: parallelToolCallStream},
		reply{status: 401, lines: []string{`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}})
	c, _ := testClient(t, srv, func(c *Config) { c.TracerProvider = tp })

	ctx, parent := tp.Tracer("test").Start(context.Background(), "step")
	if _, err := c.Chat(ctx, userRequest("q"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat(ctx, userRequest("q"), nil); err == nil {
		t.Fatal("the 401 did not fail")
	}
	parent.End()
	if f.requests() != 3 {
		t.Fatalf("%d requests", f.requests())
	}
	var chats []tracetest.SpanStub
	http := map[string]int{}
	for _, s := range exp.GetSpans() {
		switch {
		case s.Name == "chat gpt-4o":
			chats = append(chats, s)
		case s.Name != "step":
			http[s.Parent.SpanID().String()]++
		}
	}
	if len(chats) != 2 {
		t.Fatalf("%d chat spans", len(chats))
	}
	ok, failed := chats[0], chats[1]
	a := spanAttrs(ok)
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": "321",
		"gen_ai.usage.output_tokens": "45", "gen_ai.response.finish_reasons": `["tool_calls"]`, "baagent.llm.attempts": "2",
	} {
		if a[k] != want {
			t.Errorf("%s = %q, want %q (all: %v)", k, a[k], want, a)
		}
	}
	if ok.Parent.SpanID() != parent.SpanContext().SpanID() || ok.Status.Code == codes.Error || len(ok.Events) != 1 || ok.Events[0].Name != "retry" {
		t.Errorf("successful call: parent %v status %v events %v", ok.Parent.SpanID(), ok.Status, ok.Events)
	}
	if http[ok.SpanContext.SpanID().String()] != 2 {
		t.Errorf("%d HTTP spans under the retried call, want 2", http[ok.SpanContext.SpanID().String()])
	}
	if failed.Status.Code != codes.Error || spanAttrs(failed)["error.type"] != KindAuth.String() {
		t.Errorf("failed call: status %v attributes %v", failed.Status, spanAttrs(failed))
	}
	f.mu.Lock()
	got := f.headers[0].Get("Traceparent")
	f.mu.Unlock()
	if got == "" {
		t.Error("the endpoint got no traceparent")
	}
}
