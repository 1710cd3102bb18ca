package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/scripted/scriptedtest"
)

const scenariosDir = "../../examples/scenarios"

// wordCounter counts whitespace-separated words: a deterministic stand-in
// for an encoder (the tokens service's engines are tested in their own
// packages), enough to check how usage is assembled.
type wordCounter struct{}

func (wordCounter) Name() string { return "words" }

func (wordCounter) Count(text string, _ bool) (int, error) { return len(strings.Fields(text)), nil }

func counter(testing.TB) scripted.TokenCounter { return wordCounter{} }

// start serves the shipped scenarios on loopback and returns a model client
// for them; both stop with the test.
func start(t testing.TB, opts scripted.Options) (*llm.Client, string) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = scenariosDir
	}
	srv, err := scripted.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return scriptedtest.Serve(t, srv)
}

// fakeTool answers tool calls the way the real tools would over the sample
// data, so that the scenarios can be played without the toolrunner.
func fakeTool(call llm.ToolCall) string {
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return fmt.Sprintf("Operation failed.\n\nError Type: VALIDATION_ERROR\nError Code: INVALID_ARGUMENTS\nError Message: arguments are not valid JSON: %v\n\nTool Call ID: %s", err, call.ID)
	}
	q, _ := args["query"].(string)
	switch {
	case call.Name == "skill":
		return fmt.Sprintf("Skill %q activated.", args["name"])
	case call.Name == "glob":
		return "customers.csv\norders.csv\nproducts.csv"
	case call.Name == "file_read":
		return "order_id,order_date,customer_id,product_id,quantity,unit_price,region\n1,2025-01-03,17,4,2,199.0,North"
	case call.Name == "sql_query" && strings.Contains(q, "order_total"):
		return "Operation failed.\n\nError Type: EXECUTION_ERROR\nError Code: SQL_ERROR\nError Message: no such column: order_total\n\nTool Call ID: " + call.ID
	case call.Name == "sql_query" && strings.Contains(q, "p.category AS category"):
		// The toolrunner's sql_query format (STANDARD level).
		return "| category | revenue | orders |\n|---|---|---|\n| Hardware | 412345.67 | 1203 |\n| Software | 298765.43 | 987 |\n| Services | 120456.78 | 455 |\n\n(3 rows)"
	case call.Name == "sql_query" && strings.Contains(q, "avg_order_value"):
		return "region,avg_order_value,orders\nWest,512.3,880\nNorth,498.1,870"
	case call.Name == "sql_query" && strings.Contains(q, "growth_pct"):
		return `[{"region":"East","q2_revenue":100.5,"q3_revenue":120.25,"change":19.75,"growth_pct":19.7}]`
	case call.Name == "sql_query":
		return "row_count\n3000"
	}
	return fmt.Sprintf("Operation failed.\n\nError Type: VALIDATION_ERROR\nError Code: UNKNOWN_TOOL\nError Message: no tool named %q\n\nTool Call ID: %s", call.Name, call.ID)
}

// play runs a ReAct loop against the client with fake tools and returns the
// final answer and every tool call made.
func play(t *testing.T, c *llm.Client, question string, stream bool) (string, []llm.ToolCall) {
	t.Helper()
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "You are a business analyst."}, {Role: llm.RoleUser, Content: question}}
	var calls []llm.ToolCall
	for step := 0; step < 30; step++ {
		var resp *llm.Response
		var err error
		if stream {
			var streamed strings.Builder
			resp, err = c.Chat(context.Background(), llm.Request{Messages: msgs}, func(d llm.Delta) error { streamed.WriteString(d.Text); return nil })
			if err == nil && streamed.String() != resp.Message.Content {
				t.Fatalf("streamed text %q != content %q", streamed.String(), resp.Message.Content)
			}
		} else {
			resp, err = c.Complete(context.Background(), llm.Request{Messages: msgs})
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if resp.Model != scripted.ModelName || !resp.UsageReported || resp.Usage.PromptTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
			t.Fatalf("step %d: model %q usage %+v reported %v", step, resp.Model, resp.Usage, resp.UsageReported)
		}
		msgs = append(msgs, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			if resp.FinishReason != llm.FinishStop {
				t.Fatalf("final answer with finish %q", resp.FinishReason)
			}
			return resp.Message.Content, calls
		}
		if resp.FinishReason != llm.FinishToolCalls {
			t.Fatalf("tool calls with finish %q", resp.FinishReason)
		}
		for _, tc := range resp.Message.ToolCalls {
			calls = append(calls, tc)
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: fakeTool(tc)})
		}
	}
	t.Fatal("no final answer after 30 steps")
	return "", nil
}

func TestRevenueScenarioQuotesTheResult(t *testing.T) {
	c, _ := start(t, scripted.Options{Counter: counter(t)})
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			answer, calls := play(t, c, "Which product category had the highest revenue last quarter?", stream)
			if len(calls) != 1 || calls[0].Name != "sql_query" || calls[0].ID != "call_revenue-by-category_1_1_1" {
				t.Fatalf("calls %+v", calls)
			}
			var args struct {
				Query   string `json:"query"`
				MaxRows int    `json:"max_rows"`
			}
			if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"JOIN products", "'2026-07-01' AND '2026-09-30'", "quantity * o.unit_price", "GROUP BY p.category"} {
				if !strings.Contains(args.Query, want) {
					t.Errorf("query lacks %q: %s", want, args.Query)
				}
			}
			if !strings.Contains(answer, "**Hardware** had the highest revenue last quarter (2026-Q3") || !strings.Contains(answer, "412345.67 USD from 1203 orders") {
				t.Errorf("answer does not quote the result:\n%s", answer)
			}
		})
	}
}

func TestEveryShippedScenarioPlaysThrough(t *testing.T) {
	srv, err := scripted.New(scripted.Options{Dir: scenariosDir})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := start(t, scripted.Options{})
	wantTools := map[string][]string{
		"revenue-by-category":       {"sql_query"},
		"data-quality-check":        {"skill", "glob", "file_read", "sql_query", "sql_query", "sql_query"},
		"sales-growth-by-region":    {"skill", "sql_query", "sql_query"},
		"sales-deep-dive":           {"file_read", "file_read", "file_read", "sql_query", "sql_query", "sql_query", "sql_query", "sql_query", "sql_query"},
		"avg-order-value-recovery":  {"sql_query", "sql_query"},
		"tool-error-handling":       {"sql_query", "chart_render", "sql_query"},
		"hitl-clarification-period": {"ask_clarification", "sql_query"},
		"hitl-decision-region":      {"ask_decision", "sql_query"},
		"plan-quarterly-report":     {"plan", "sql_query", "update_plan", "sql_query", "update_plan"},
		"plan-revision":             {"plan", "sql_query", "update_plan", "sql_query", "update_plan", "sql_query", "update_plan"},
		"plan-approval":             {"plan", "sql_query", "update_plan"},
		"memory-software-category":  {"memory_search"},
		"patterns-top-products":     {"sql_query", "sql_query"},
	}
	for _, sc := range srv.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			answer, calls := play(t, c, sc.Example, true)
			var names []string
			for _, call := range calls {
				names = append(names, call.Name)
			}
			if want, ok := wantTools[sc.Name]; !ok || strings.Join(names, ",") != strings.Join(want, ",") {
				t.Errorf("tools %v, want %v", names, want)
			}
			if strings.Contains(answer, "template") && strings.Contains(answer, "failed") {
				t.Errorf("a template failed:\n%s", answer)
			}
			if strings.Contains(answer, "I am the scripted model") || answer == "" {
				t.Errorf("example did not match its scenario:\n%s", answer)
			}
		})
	}
}

func TestRecoveryScenarioFollowsTheErrorBranch(t *testing.T) {
	c, _ := start(t, scripted.Options{})
	answer, calls := play(t, c, "What was the average order value by region in 2026?", true)
	if len(calls) != 2 || !strings.Contains(calls[0].Arguments, "order_total") || strings.Contains(calls[1].Arguments, "order_total") {
		t.Fatalf("calls %+v", calls)
	}
	if calls[1].ID != "call_avg-order-value-recovery_1_2_1" {
		t.Errorf("recovery call id %q", calls[1].ID)
	}
	if !strings.Contains(answer, "**West** had the highest average order value in 2026: 512.3 USD over 880 orders") {
		t.Errorf("answer:\n%s", answer)
	}
	// The skill scenario quotes JSON results through firstRow too.
	answer, _ = play(t, c, "How did revenue grow by region from Q2 to Q3 2026?", false)
	if !strings.Contains(answer, "**East** grew fastest from 2026-Q2 to 2026-Q3: 100.5 → 120.25 USD (19.75 USD, 19.7%)") {
		t.Errorf("answer:\n%s", answer)
	}
}

func TestFallbackAndEndOfScript(t *testing.T) {
	c, _ := start(t, scripted.Options{})
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What's the weather in Yangzhou?"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"I am the scripted model", "none of them matches", "Which product category had the highest revenue last quarter?"} {
		if !strings.Contains(resp.Message.Content, want) {
			t.Errorf("fallback lacks %q:\n%s", want, resp.Message.Content)
		}
	}
	// A conversation that goes on past the script gets a labelled closing answer.
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "Which product category had the highest revenue last quarter?"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "x", Name: "sql_query", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "x", Content: "a,b\n1,2"},
		{Role: llm.RoleAssistant, Content: "answer"},
		{Role: llm.RoleAssistant, Content: "more"},
	}
	resp, err = c.Chat(context.Background(), llm.Request{Messages: msgs}, nil)
	if err != nil || !strings.Contains(resp.Message.Content, "[scripted model] Scenario \"revenue-by-category\" scripts 2 turns") {
		t.Errorf("end of script: %v %+v", err, resp)
	}
}

func TestSecondRoundGetsFreshIDs(t *testing.T) {
	c, _ := start(t, scripted.Options{})
	q := "Which product category had the highest revenue last quarter?"
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: q},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_revenue-by-category_1_1_1", Name: "sql_query", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "call_revenue-by-category_1_1_1", Content: "a,b\n1,2"},
		{Role: llm.RoleAssistant, Content: "answer"},
		{Role: llm.RoleUser, Content: q},
	}
	resp, err := c.Chat(context.Background(), llm.Request{Messages: msgs}, nil)
	if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].ID != "call_revenue-by-category_2_1_1" {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestConcurrentConversations(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, _ := start(t, scripted.Options{Registerer: reg})
	questions := []string{
		"Which product category had the highest revenue last quarter?",
		"What was the average order value by region in 2026?",
		"Check the orders data for quality problems before we analyse it.",
		"How did revenue grow by region from Q2 to Q3 2026?",
	}
	const perQuestion = 8
	var wg sync.WaitGroup
	answers := make([][]string, len(questions))
	for i, q := range questions {
		answers[i] = make([]string, perQuestion)
		for j := range perQuestion {
			wg.Go(func() {
				answers[i][j], _ = play(t, c, q, j%2 == 0)
			})
		}
	}
	wg.Wait()
	for i := range questions {
		for j := 1; j < perQuestion; j++ {
			if answers[i][j] != answers[i][0] {
				t.Errorf("question %d: conversations disagree:\n%s\n---\n%s", i, answers[i][0], answers[i][j])
			}
		}
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, "revenue-by-category")); got != 2*perQuestion {
		t.Errorf("requests for revenue-by-category = %v, want %d", got, 2*perQuestion)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, scenario string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baagent_scripted_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "scenario" && l.GetValue() == scenario {
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return m.GetCounter().GetValue() })
				}
			}
		}
	}
	t.Fatalf("no series for %s", scenario)
	return nil
}

func TestHTTPSurface(t *testing.T) {
	_, base := start(t, scripted.Options{Counter: counter(t)})
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/models"); code != 200 || !strings.Contains(body, `"id":"scripted"`) {
		t.Errorf("/v1/models: %d %s", code, body)
	}
	if code, _ := get("/models/gpt-4o"); code != 404 {
		t.Errorf("/v1/models/gpt-4o: %d", code)
	}
	post := func(body string) (int, http.Header, string) {
		resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	if code, _, body := post(`{"model":"scripted","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"glob","arguments":"{}"}}]}]}`); code != 400 || !strings.Contains(body, "tool_call_id") || !strings.Contains(body, `"param":"messages"`) {
		t.Errorf("unanswered tool call: %d %s", code, body)
	}
	if code, _, _ := post(`{"messages": 5}`); code != 400 {
		t.Errorf("bad body: %d", code)
	}
	// Exact usage: "hi" is one word; the prompt is 3 + (1 role + 1 content) + 3.
	code, hdr, body := post(`{"model":"scripted","messages":[{"role":"user","content":"hi"}]}`)
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if out.Model != "scripted" || out.Usage.PromptTokens != 8 || out.Usage.CompletionTokens <= 10 || hdr.Get("X-Scripted-Usage") != "" || hdr.Get("X-Scripted-Scenario") != "fallback" {
		t.Errorf("model %q usage %+v headers %v", out.Model, out.Usage, hdr)
	}
}

func TestApproximateUsageIsLabelled(t *testing.T) {
	_, base := start(t, scripted.Options{})
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(`{"model":"scripted","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Scripted-Usage") != "approximate" {
		t.Errorf("headers %v", resp.Header)
	}
}

func TestNewRefusesBadDirectories(t *testing.T) {
	if _, err := scripted.New(scripted.Options{}); err == nil {
		t.Error("empty Dir accepted")
	}
	if _, err := scripted.New(scripted.Options{Dir: t.TempDir() + "/missing"}); err == nil {
		t.Error("missing Dir accepted")
	}
}

func TestCancelledStreamStops(t *testing.T) {
	c, _ := start(t, scripted.Options{ChunkBytes: 1})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := c.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "nothing matches this"}}}, func(llm.Delta) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v after %d deltas", err, n)
	}
}
