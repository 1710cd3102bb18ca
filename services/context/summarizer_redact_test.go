package contextsvc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An endpoint that quotes the key in its error must not get the key into
// the summarizer's error, which is logged (found by test/reliability).
func TestOpenAISummarizerErrorsNeverQuoteTheKey(t *testing.T) {
	t.Parallel()

	const key = "sk-live-abcdef0123456789SECRET"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	t.Cleanup(srv.Close)
	s, err := NewOpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.URL + "/v1", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Summarize(context.Background(), SummaryRequest{Model: "gpt-4o", System: "s", Prompt: "p", MaxTokens: 10})
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("Summarize error = %v: want the provider's message with the key redacted", err)
	}
}
