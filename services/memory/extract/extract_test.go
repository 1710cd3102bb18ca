package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/scripted"
)

// scriptedBase serves the shipped scenarios and gazetteer on loopback.
func scriptedBase(t testing.TB) string {
	t.Helper()
	srv, err := scripted.New(scripted.Options{Dir: filepath.Join("..", "..", "..", "examples", "scenarios")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	base, done, err := srv.StartLoopback(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scripted model: %v", err)
		}
	})
	return base
}

const episode = `Question: Which product category had the highest revenue in Q3 2026?
Answer: Hardware had the highest revenue in Q3 2026, led by Rack Server S20 and NAS Storage 32TB; most of it came from Enterprise customers in the West region.
Observation: SELECT category, SUM(quantity * unit_price) FROM orders JOIN products USING (product_id) GROUP BY category`

func TestExtractWithTheScriptedModel(t *testing.T) {
	x, err := NewOpenAI(Config{BaseURL: scriptedBase(t), Model: scripted.ModelName, Reflexion: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Extract(context.Background(), episode)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, e := range res.Entities {
		types[e.Name] = e.Type
		if e.Summary == "" {
			t.Errorf("%s has no summary", e.Name)
		}
	}
	for name, typ := range map[string]string{"Hardware": "ProductCategory", "revenue": "Metric", "Q3 2026": "TimePeriod", "Rack Server S20": "Product", "NAS Storage 32TB": "Product", "Enterprise": "Concept", "West": "Location", "orders": "Table", "products": "Table"} {
		if types[name] != typ {
			t.Errorf("%s: %q, want %q", name, types[name], typ)
		}
	}
	var facts []string
	for _, r := range res.Relations {
		facts = append(facts, r.Source+" "+r.Type+" "+r.Target)
		if types[r.Source] == "" || types[r.Target] == "" || r.Confidence <= 0 || r.Confidence > 1 {
			t.Errorf("invalid relation %+v", r)
		}
	}
	all := strings.Join(facts, "\n")
	for _, want := range []string{"Rack Server S20 IN_CATEGORY Hardware", "revenue MEASURED_FOR Q3 2026", "Enterprise HAS_CUSTOMERS_IN West", "revenue COMPUTED_FROM orders"} {
		if !strings.Contains(all, want) {
			t.Errorf("relation %q missing:\n%s", want, all)
		}
	}
	// Two passes: the extraction and the reflexion (which finds nothing new).
	if res.Usage.Calls != 2 || res.Usage.PromptTokens == 0 || res.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v", res.Usage)
	}
	if x.Model() != "scripted" {
		t.Errorf("model %s", x.Model())
	}
}

func TestExtractEmptyContentCallsNoModel(t *testing.T) {
	x, _ := NewOpenAI(Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"})
	res, err := x.Extract(context.Background(), "  \n")
	if err != nil || len(res.Entities) != 0 || res.Usage.Calls != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

// fakeModel answers chat completions with a status and body per call.
type fakeModel struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	bodies  []map[string]any
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	if n >= len(f.answers) {
		http.Error(w, "unexpected call", http.StatusTeapot)
		return
	}
	f.answers[n](w)
}

func completion(content, finish string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": finish}},
			"usage":   map[string]int{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
		})
	}
}

func status(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"status %d","type":"server_error","param":null,"code":null}}`, code)
	}
}

func fake(t *testing.T, answers ...func(http.ResponseWriter)) (*OpenAI, *fakeModel) {
	t.Helper()
	f := &fakeModel{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	x, err := NewOpenAI(Config{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "gpt-test", Reflexion: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return x, f
}

const goodAnswer = `{"entities":[{"name":"Hardware","type":"ProductCategory","summary":"s","attributes":[]},{"name":"Q3 2026","type":"TimePeriod","summary":"q","attributes":[]}],"relations":[{"source":"Hardware","target":"Q3 2026","type":"LED_IN","fact":"f","confidence":0.8}]}`

func TestExtractErrorsAreTyped(t *testing.T) {
	cases := []struct {
		name      string
		answers   []func(http.ResponseWriter)
		retryable bool
	}{
		{"rate limited", []func(http.ResponseWriter){status(429)}, true},
		{"overloaded", []func(http.ResponseWriter){status(503)}, true},
		{"unauthorized", []func(http.ResponseWriter){status(401)}, true},
		{"bad request", []func(http.ResponseWriter){status(400)}, false},
		{"not json", []func(http.ResponseWriter){completion("Sure! Here are the entities: Hardware.", "stop")}, false},
		{"cut", []func(http.ResponseWriter){completion(`{"entities":[`, "length")}, false},
		{"filtered", []func(http.ResponseWriter){completion("", "content_filter")}, false},
		{"garbage body", []func(http.ResponseWriter){func(w http.ResponseWriter) { fmt.Fprint(w, "<html>") }}, false},
		{"reflexion unavailable", []func(http.ResponseWriter){completion(goodAnswer, "stop"), status(502)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, _ := fake(t, c.answers...)
			_, err := x.Extract(context.Background(), "Hardware revenue in Q3 2026")
			var e *Error
			if !errors.As(err, &e) || IsRetryable(err) != c.retryable {
				t.Fatalf("err = %v, want retryable=%v", err, c.retryable)
			}
		})
	}
}

func TestExtractUnreachableModelIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	x, _ := NewOpenAI(Config{BaseURL: url + "/v1", Model: "m"})
	_, err := x.Extract(context.Background(), "text")
	if !IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestExtractSendsStrictSchemaAndMergesReflexion(t *testing.T) {
	more := `{"entities":[{"name":"West","type":"Location","summary":"region","attributes":[{"key":"kind","value":"sales region"}]},{"name":"hardware","type":"ProductCategory","summary":"dup","attributes":[]}],"relations":[{"source":"west","target":"Hardware","type":"sells most","fact":"West sells most Hardware.","confidence":3}]}`
	x, f := fake(t, completion(goodAnswer, "stop"), completion(more, "stop"))
	res, err := x.Extract(context.Background(), "Hardware revenue in the West in Q3 2026")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entities) != 3 || res.Entities[2].Name != "West" || res.Entities[2].Attributes["kind"] != "sales region" {
		t.Errorf("entities %+v", res.Entities)
	}
	if len(res.Relations) != 2 || res.Relations[1] != (Relation{Source: "West", Target: "Hardware", Type: "SELLS_MOST", Fact: "West sells most Hardware.", Confidence: 1}) {
		t.Errorf("relations %+v", res.Relations)
	}
	if res.Usage != (Usage{Calls: 2, PromptTokens: 200, CompletionTokens: 40}) {
		t.Errorf("usage %+v", res.Usage)
	}
	rf := f.bodies[0]["response_format"].(map[string]any)
	js := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != SchemaExtraction || js["strict"] != true || f.bodies[0]["model"] != "gpt-test" {
		t.Errorf("first request %v", f.bodies[0])
	}
	second := f.bodies[1]
	if second["response_format"].(map[string]any)["json_schema"].(map[string]any)["name"] != SchemaReflexion {
		t.Errorf("second request is not the reflexion")
	}
	msgs := second["messages"].([]any)
	user := msgs[1].(map[string]any)["content"].(string)
	if !strings.Contains(user, "Already extracted:\n- Hardware (ProductCategory)\n- Q3 2026 (TimePeriod)") {
		t.Errorf("reflexion prompt:\n%s", user)
	}
}

func TestUnusableReflexionKeepsTheFirstPass(t *testing.T) {
	x, _ := fake(t, completion(goodAnswer, "stop"), completion("no idea", "stop"))
	res, err := x.Extract(context.Background(), "Hardware in Q3 2026")
	if err != nil || len(res.Entities) != 2 || len(res.Relations) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestParseValidates(t *testing.T) {
	long := strings.Repeat("x", 5000)
	var ents, rels []string
	for i := range 60 {
		ents = append(ents, fmt.Sprintf(`{"name":"E%d","type":"Concept","summary":"","attributes":[]}`, i))
		rels = append(rels, fmt.Sprintf(`{"source":"E%d","target":"E%d","type":"NEXT","fact":"f","confidence":0.5}`, i, i+1))
	}
	res, err := Parse(`{"entities":[` + strings.Join(ents, ",") + `],"relations":[` + strings.Join(rels, ",") + `]}`)
	if err != nil || len(res.Entities) != MaxEntities || len(res.Relations) != MaxRelations {
		t.Fatalf("caps: %d entities %d relations (%v)", len(res.Entities), len(res.Relations), err)
	}
	res, err = Parse("```json\n" + `{"entities":[
		{"name":"  Acme  ","type":"organization","summary":"` + long + `","attributes":[{"key":"k","value":"v"},{"key":"","value":"x"}]},
		{"name":"acme","type":"Organization","summary":"again","attributes":[{"key":"k2","value":"v2"}]},
		{"name":"Acme","type":"Robot","summary":"other type","attributes":[]},
		{"name":"","type":"Person","summary":"nameless","attributes":[]}],
	"relations":[
		{"source":"ACME","target":"ghost","type":"X","fact":"f","confidence":1},
		{"source":"Acme","target":"acme","type":"SELF","fact":"f","confidence":1},
		{"source":"Acme","target":"Acme ","type":"x","fact":"f","confidence":1}]}` + "\n```")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entities) != 2 || res.Entities[0].Type != "Organization" || res.Entities[1].Type != "Other" {
		t.Fatalf("entities %+v", res.Entities)
	}
	if n := len([]rune(res.Entities[0].Summary)); n != 1000 || res.Entities[0].Attributes["k2"] != "v2" || len(res.Entities[0].Attributes) != 2 {
		t.Errorf("first entity: summary %d runes, attributes %v", n, res.Entities[0].Attributes)
	}
	if len(res.Relations) != 0 {
		t.Errorf("relations naming unknown or the same entity kept: %+v", res.Relations)
	}
	for _, bad := range []string{"", "null", "[]", `{"other":1}`, "{", `{"entities":"x"}`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestRelationTypeAndConfidence(t *testing.T) {
	for in, want := range map[string]string{"in category": "IN_CATEGORY", "inCategory": "IN_CATEGORY", "HAS_COLUMN": "HAS_COLUMN", "": "RELATED_TO", "--": "RELATED_TO", "3d printed": "RELATED_TO", "located-in": "LOCATED_IN", "été": "T"} {
		if got := relationType(in); got != want {
			t.Errorf("relationType(%q) = %q, want %q", in, got, want)
		}
	}
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		in   *float64
		want float64
	}{{nil, 0.5}, {f(-1), 0.01}, {f(0), 0.01}, {f(0.7), 0.7}, {f(9), 1}} {
		if got := clampConfidence(c.in); got != c.want {
			t.Errorf("clamp(%v) = %v", c.in, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(goodAnswer)
	f.Add(`{"entities":[{"name":"a","type":"x","summary":"","attributes":[{"key":"k","value":"v"}]}],"relations":[{"source":"a","target":"a","type":"","fact":"","confidence":null}]}`)
	f.Add("```json\n{\"entities\":[]}\n```")
	f.Fuzz(func(t *testing.T, s string) {
		res, err := Parse(s)
		if err != nil {
			return
		}
		if len(res.Entities) > MaxEntities || len(res.Relations) > MaxRelations {
			t.Fatalf("caps exceeded")
		}
		seen := map[string]bool{}
		names := map[string]bool{}
		for _, e := range res.Entities {
			k := e.Type + "\x00" + strings.ToLower(e.Name)
			if e.Name == "" || seen[k] || entityTypeByLower[strings.ToLower(e.Type)] != e.Type {
				t.Fatalf("invalid entity %+v", e)
			}
			seen[k] = true
			names[e.Name] = true
		}
		for _, r := range res.Relations {
			if !names[r.Source] || !names[r.Target] || r.Confidence <= 0 || r.Confidence > 1 || r.Type == "" {
				t.Fatalf("invalid relation %+v", r)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	var ents, rels []string
	for i := range 50 {
		ents = append(ents, fmt.Sprintf(`{"name":"Entity %d","type":"Product","summary":"A product of the sample data with a summary of some length.","attributes":[{"key":"list_price_usd","value":"349.00"}]}`, i))
	}
	for i := range 30 {
		rels = append(rels, fmt.Sprintf(`{"source":"Entity %d","target":"Entity %d","type":"in category","fact":"Entity %d is in the same category.","confidence":0.9}`, i, i+1, i))
	}
	s := `{"entities":[` + strings.Join(ents, ",") + `],"relations":[` + strings.Join(rels, ",") + `]}`
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractScripted(b *testing.B) {
	x, err := NewOpenAI(Config{BaseURL: scriptedBase(b), Model: scripted.ModelName})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Extract(context.Background(), episode); err != nil {
			b.Fatal(err)
		}
	}
}

// A reasoning model refuses max_tokens; the extractor switches to
// max_completion_tokens once and stays with it.
func TestExtractSwitchesToMaxCompletionTokens(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		_, hasOld := body["max_tokens"]
		_, hasNew := body["max_completion_tokens"]
		mu.Lock()
		seen = append(seen, fmt.Sprintf("old=%v new=%v", hasOld, hasNew))
		mu.Unlock()
		if hasOld {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`)
			return
		}
		completion(goodAnswer, "stop")(w)
	}))
	defer srv.Close()
	x, _ := NewOpenAI(Config{BaseURL: srv.URL + "/v1", Model: "o-test"})
	for range 2 {
		if _, err := x.Extract(context.Background(), "Hardware in Q3 2026"); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(seen, ",") != "old=true new=false,old=false new=true,old=false new=true" {
		t.Errorf("requests: %v", seen)
	}
}
