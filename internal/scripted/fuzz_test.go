package scripted

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// FuzzChatRequest sends arbitrary bodies to the chat endpoint: the server
// must answer 200 or 4xx with a JSON error, never 5xx, never panic.
func FuzzChatRequest(f *testing.F) {
	srv, err := New(Options{Dir: "../../examples/scenarios", ChunkBytes: 7})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	f.Add([]byte(`{"model":"scripted","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Which product category had the highest revenue last quarter?"}]}`))
	f.Add([]byte(`{"model":"scripted","messages":[{"role":"user","content":"What was the average order value by region in 2026?"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"sql_query","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"Operation failed."}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"deep dive"}]},{"role":"assistant","content":"x"},{"role":"assistant","content":"y"}]}`))
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"zz","content":"x"}]}`))
	f.Add([]byte(`{"messages":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
		if rec.Code != http.StatusOK && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("error body is not JSON: %s", rec.Body.String())
		}
	})
}

// FuzzParseTable reads arbitrary tool output as a table: no panic, and
// every row helper agrees with parseTable.
func FuzzParseTable(f *testing.F) {
	for _, s := range []string{
		"| a | b |\n|---|---|\n| 1 \\| 2 | 3 |\n\n(1 row)",
		"caption\na,b\n1,2\n",
		"a\tb\n1\t2",
		`[{"x":1,"y":[1,2]},{"x":null}]`,
		`{"columns":["a"],"rows":[[1],[2]]}`,
		`{"data":[{"k":{"n":1}}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tb := parseTable(s)
		rows := tableRows(s)
		if len(rows) != len(tb.Rows) {
			t.Fatalf("rows %d != %d", len(rows), len(tb.Rows))
		}
		fr := firstRow(s)
		if len(tb.Rows) > 0 && !slices.Equal(fr, tb.Rows[0]) {
			t.Fatalf("firstRow %q != %q", fr, tb.Rows[0])
		}
		_ = jsonPath("$.rows[0].a", s)
		_ = column("a", s)
	})
}
