package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit/exporttest"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// events builds a run's events with contiguous seqs.
type events struct {
	runID, sub string
	seq        uint64
	step       int32
	list       []*baagentv1.Event
}

func newRun(id string) *events { return &events{runID: id} }

func (e *events) add(ev *baagentv1.Event) *events {
	e.seq++
	ev.RunId, ev.ConversationId, ev.Tenant, ev.Seq, ev.Step, ev.SubagentRunId = e.runID, "conv-1", "acme", e.seq, e.step, e.sub
	e.list = append(e.list, ev)
	return e
}

func (e *events) start(input string) *events {
	return e.add(&baagentv1.Event{Type: "start", Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: input, Model: "scripted"}}})
}

func (e *events) stepStart() *events {
	e.step++
	return e.add(&baagentv1.Event{Type: "step_start", Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: e.step}}})
}

func (e *events) thinkDelta(s string) *events {
	return e.add(&baagentv1.Event{Type: "thought_delta", Payload: &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{Delta: s}}})
}

func (e *events) textDelta(s string) *events {
	return e.add(&baagentv1.Event{Type: "text_delta", Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: s}}})
}

func (e *events) thought(s string) *events {
	return e.add(&baagentv1.Event{Type: "thought", Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: s, ThoughtLevel: "task"}}})
}

func (e *events) act(id, name string, args map[string]any) *events {
	in, err := structpb.NewStruct(args)
	if err != nil {
		panic(err)
	}
	return e.add(&baagentv1.Event{Type: "act", Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: id, ToolName: name, ToolInput: in}}})
}

func (e *events) actRaw(id, name, raw string) *events {
	return e.add(&baagentv1.Event{Type: "act", Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: id, ToolName: name, RawArguments: raw}}})
}

func (e *events) observe(id, name, obs string, ok bool) *events {
	return e.add(&baagentv1.Event{Type: "observe", Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: id, ToolName: name, Observation: obs, Success: ok}}})
}

func (e *events) stepEnd() *events {
	return e.add(&baagentv1.Event{Type: "step_end", Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{StepNumber: e.step, Success: true}}})
}

func (e *events) complete(answer string) *events {
	return e.add(&baagentv1.Event{Type: "complete", Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: answer, Format: "markdown"}}})
}

func (e *events) failed(msg string) *events {
	return e.add(&baagentv1.Event{Type: "error", Payload: &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Message: msg, Code: "MODEL_UNAVAILABLE"}}})
}

func (e *events) cancelled(reason string) *events {
	return e.add(&baagentv1.Event{Type: "cancelled", Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: reason}}})
}

// export converts evs in format f.
func export(t testing.TB, f baagentv1.ExportFormat, evs ...[]*baagentv1.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range evs {
		for _, ev := range list {
			if err := w.Add(ev, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func claude(t *testing.T, evs ...[]*baagentv1.Event) []exporttest.ClaudeMessage {
	t.Helper()
	data := export(t, baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, evs...)
	msgs, err := exporttest.Claude(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return msgs
}

func openaiMsgs(t *testing.T, evs ...[]*baagentv1.Event) []map[string]any {
	t.Helper()
	data := export(t, baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI, evs...)
	if _, err := exporttest.OpenAI(data); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var msgs []map[string]any
	if err := json.Unmarshal(data, &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// compact renders v as compact JSON, to compare documents.
func compact(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func toolRun() *events {
	return newRun("run-1").start("Which region grew fastest?").
		stepStart().thinkDelta("I need the sales by region.").textDelta("Let me query the sales.").
		thought("I need the sales by region.").thought("Let me query the sales.").
		act("call_a", "sql_query", map[string]any{"query": "SELECT 1", "max_rows": 10}).
		actRaw("call_b", "file_read", `{"path": "x.csv"`).
		observe("call_a", "sql_query", "region,growth\nnorth,12%", true).
		observe("call_b", "file_read", "error: arguments are not JSON", false).
		stepEnd().
		stepStart().thinkDelta("North is highest.").textDelta("North ").textDelta("grew 12%.").stepEnd().
		complete("North grew fastest (12%).")
}

func TestClaudeToolCallsAndAnswer(t *testing.T) {
	msgs := claude(t, toolRun().list)
	got := compact(t, msgs)
	want := `[{"role":"user","content":[{"type":"text","text":"Which region grew fastest?"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"I need the sales by region."},{"type":"text","text":"Let me query the sales."},` +
		`{"type":"tool_use","id":"call_a","name":"sql_query","input":{"max_rows":10,"query":"SELECT 1"}},` +
		`{"type":"tool_use","id":"call_b","name":"file_read","input":{"raw_arguments":"{\"path\": \"x.csv\""}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_a","content":"region,growth\nnorth,12%","is_error":false},` +
		`{"type":"tool_result","tool_use_id":"call_b","content":"error: arguments are not JSON","is_error":true}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"North is highest."},{"type":"text","text":"North grew fastest (12%)."}]}]`
	if got != want {
		t.Errorf("claude export\n got %s\nwant %s", got, want)
	}
}

func TestOpenAIToolCallsAndAnswer(t *testing.T) {
	msgs := openaiMsgs(t, toolRun().list)
	got := compact(t, msgs)
	want := `[{"content":"Which region grew fastest?","role":"user"},` +
		`{"content":"Let me query the sales.","role":"assistant","tool_calls":[` +
		`{"function":{"arguments":"{\"max_rows\":10,\"query\":\"SELECT 1\"}","name":"sql_query"},"id":"call_a","type":"function"},` +
		`{"function":{"arguments":"{\"path\": \"x.csv\"","name":"file_read"},"id":"call_b","type":"function"}]},` +
		`{"content":"region,growth\nnorth,12%","role":"tool","tool_call_id":"call_a"},` +
		`{"content":"error: arguments are not JSON","role":"tool","tool_call_id":"call_b"},` +
		`{"content":"North grew fastest (12%).","role":"assistant"}]`
	if got != want {
		t.Errorf("openai export\n got %s\nwant %s", got, want)
	}
}

func TestUnfinishedCallsGetAnErrorResult(t *testing.T) {
	base := func() *events {
		return newRun("run-2").start("slow one").stepStart().
			act("call_1", "sql_query", map[string]any{"query": "SELECT 2"}).
			act("call_2", "sql_query", map[string]any{"query": "SELECT 3"}).
			observe("call_1", "sql_query", "2", true)
	}
	cases := map[string]struct {
		evs  *events
		note string
	}{
		"cancelled":   {base().cancelled("the user pressed stop"), noteCancelled + ": the user pressed stop"},
		"failed":      {base().failed("the model endpoint is down"), noteFailed + ": the model endpoint is down"},
		"in progress": {base(), noteUnended},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			msgs := claude(t, c.evs.list)
			if len(msgs) != 3 {
				t.Fatalf("%d messages: %s", len(msgs), compact(t, msgs))
			}
			res := msgs[2].Content
			if len(res) != 2 || res[0].ToolUseID != "call_1" || *res[0].IsError || res[0].Content != "2" {
				t.Errorf("first result %+v", res)
			}
			if res[1].ToolUseID != "call_2" || !*res[1].IsError || res[1].Content != c.note {
				t.Errorf("unfinished result %+v, want note %q", res[1], c.note)
			}
			om := openaiMsgs(t, c.evs.list)
			if last := om[len(om)-1]; last["role"] != "tool" || last["tool_call_id"] != "call_2" || last["content"] != c.note {
				t.Errorf("openai last message %v", last)
			}
		})
	}
}

func TestCancelledMidAnswerKeepsTheStreamedText(t *testing.T) {
	evs := newRun("run-3").start("write a poem").stepStart().thinkDelta("rhymes…").textDelta("Roses are").cancelled("")
	msgs := claude(t, evs.list)
	if got := compact(t, msgs); got != `[{"role":"user","content":[{"type":"text","text":"write a poem"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"rhymes…"},{"type":"text","text":"Roses are"}]}]` {
		t.Errorf("claude %s", got)
	}
	om := openaiMsgs(t, evs.list)
	if len(om) != 2 || om[1]["content"] != "Roses are" {
		t.Errorf("openai %v", om)
	}
}

func TestClarificationAnswerIsTheToolResult(t *testing.T) {
	evs := newRun("run-4").start("sales last period").stepStart().
		textDelta("Which period?").thought("Which period?").
		act("call_q", "ask_clarification", map[string]any{"question": "Which period?"})
	evs.add(&baagentv1.Event{Type: "clarification_asked", Payload: &baagentv1.Event_ClarificationAsked{ClarificationAsked: &baagentv1.ClarificationQuestion{QuestionId: "q_s1_c0", Question: "Which period?"}}})
	evs.add(&baagentv1.Event{Type: "clarification_answered", Payload: &baagentv1.Event_ClarificationAnswered{ClarificationAnswered: &baagentv1.ClarificationAnsweredPayload{QuestionId: "q_s1_c0", Answer: "Q3"}}})
	evs.observe("call_q", "ask_clarification", "The user answered: Q3", true).stepEnd().
		stepStart().textDelta("Q3 sales were 10.").complete("Q3 sales were 10.")
	msgs := claude(t, evs.list)
	if len(msgs) != 4 || msgs[2].Content[0].Content != "The user answered: Q3" || msgs[3].Content[0].Text != "Q3 sales were 10." {
		t.Errorf("claude %s", compact(t, msgs))
	}
	om := openaiMsgs(t, evs.list)
	if len(om) != 4 || om[2]["content"] != "The user answered: Q3" {
		t.Errorf("openai %v", om)
	}
}

func TestStepResumedAfterTheAnswerKeepsItsCall(t *testing.T) {
	// A run paused on a question resumes its step (step_start again) and
	// then delivers the call's result.
	evs := newRun("run-8").start("which period?").stepStart().textDelta("I need the period.").
		act("call_q", "ask_clarification", map[string]any{"question": "Which period?"})
	evs.step--
	evs.stepStart().observe("call_q", "ask_clarification", "The user answered: Q4", true).stepEnd().
		stepStart().textDelta("Q4 it is.").complete("Q4 it is.")
	msgs := claude(t, evs.list)
	if len(msgs) != 4 || msgs[2].Content[0].ToolUseID != "call_q" || msgs[2].Content[0].Content != "The user answered: Q4" || *msgs[2].Content[0].IsError {
		t.Errorf("claude %s", compact(t, msgs))
	}
	openaiMsgs(t, evs.list)
}

func TestSubagentEventsStayOutOfTheTranscript(t *testing.T) {
	evs := newRun("run-5").start("delegate").stepStart().
		act("call_t", "task", map[string]any{"subagent_type": "analyst", "prompt": "count rows"})
	evs.add(&baagentv1.Event{Type: "subagent_assigned", Payload: &baagentv1.Event_SubagentAssigned{SubagentAssigned: &baagentv1.SubagentAssignedPayload{ChildRunId: "child-1", ToolCallId: "call_t"}}})
	evs.sub = "child-1"
	evs.start("count rows").stepStart().act("call_t", "sql_query", map[string]any{"query": "SELECT COUNT(*)"}).
		observe("call_t", "sql_query", "42", true).stepStart().complete("42 rows")
	evs.sub = ""
	evs.observe("call_t", "task", "The sub-agent answered: 42 rows", true).stepStart().complete("There are 42 rows.")
	msgs := claude(t, evs.list)
	want := `[{"role":"user","content":[{"type":"text","text":"delegate"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"call_t","name":"task","input":{"prompt":"count rows","subagent_type":"analyst"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_t","content":"The sub-agent answered: 42 rows","is_error":false}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"There are 42 rows."}]}]`
	if got := compact(t, msgs); got != want {
		t.Errorf("claude\n got %s\nwant %s", got, want)
	}
	openaiMsgs(t, evs.list)
	lines, err := exporttest.Events(export(t, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS, evs.list))
	if err != nil {
		t.Fatal(err)
	}
	mirrored := 0
	for _, l := range lines {
		if l["subagent_run_id"] == "child-1" {
			mirrored++
		}
	}
	if len(lines) != len(evs.list) || mirrored != 6 {
		t.Errorf("%d lines (want %d), %d mirrored (want 6)", len(lines), len(evs.list), mirrored)
	}
}

func TestReusedCallIDsAreNewCalls(t *testing.T) {
	evs := newRun("run-6").start("twice").
		stepStart().act("call_1", "echo", map[string]any{"n": 1}).observe("call_1", "echo", "one", true).
		stepStart().act("call_1", "echo", map[string]any{"n": 2}).act("call_1_2", "echo", map[string]any{"n": 3}).
		observe("call_1", "echo", "two", true).observe("call_1_2", "echo", "three", true).
		stepStart().complete("done")
	msgs := claude(t, evs.list)
	var ids, results []string
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				ids = append(ids, b.ID)
			case "tool_result":
				results = append(results, b.ToolUseID+"="+b.Content)
			}
		}
	}
	if strings.Join(ids, " ") != "call_1 call_1_2 call_1_2_2" || strings.Join(results, " ") != "call_1=one call_1_2=two call_1_2_2=three" {
		t.Errorf("ids %v results %v", ids, results)
	}
	openaiMsgs(t, evs.list)
}

func TestConversationConcatenatesRuns(t *testing.T) {
	first := newRun("run-a").start("first").stepStart().act("c1", "echo", nil).cancelled("stop")
	second := newRun("run-b").start("second").stepStart().textDelta("hi").complete("hi")
	msgs := claude(t, first.list, second.list)
	want := `[{"role":"user","content":[{"type":"text","text":"first"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"echo","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"` + noteCancelled + `: stop","is_error":true},{"type":"text","text":"second"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"hi"}]}]`
	if got := compact(t, msgs); got != want {
		t.Errorf("claude\n got %s\nwant %s", got, want)
	}
	om := openaiMsgs(t, first.list, second.list)
	if len(om) != 5 || om[3]["content"] != "second" {
		t.Errorf("openai %v", om)
	}
	// A run without a terminal event, followed by another run.
	open := newRun("run-c").start("open").stepStart().act("c9", "echo", nil)
	msgs = claude(t, open.list, second.list)
	if msgs[2].Content[0].Content != noteUnended {
		t.Errorf("claude %s", compact(t, msgs))
	}
}

func TestRetriedStepClosesTheAbandonedCalls(t *testing.T) {
	// A step whose model call was made again (another replica resumed the
	// run): the first attempt's calls got no result.
	evs := newRun("run-7").start("retry").stepStart().act("c1", "echo", nil)
	evs.step--
	evs.stepStart().act("c1", "echo", nil).observe("c1", "echo", "ok", true).stepStart().complete("done")
	msgs := claude(t, evs.list)
	if len(msgs) != 6 || msgs[2].Content[0].Content != noteMovedOn || msgs[3].Content[0].ID != "c1_2" || msgs[4].Content[0].Content != "ok" {
		t.Errorf("claude %s", compact(t, msgs))
	}
	openaiMsgs(t, evs.list)
}

func TestEventsAreTheStreamShape(t *testing.T) {
	evs := toolRun().list
	data := export(t, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS, evs)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) != len(evs) {
		t.Fatalf("%d lines for %d events", len(lines), len(evs))
	}
	for i, ev := range evs {
		want, err := hub.JSONOptions.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(lines[i], want) {
			t.Errorf("line %d = %s, want %s", i, lines[i], want)
		}
	}
	// Pre-rendered JSON is written as it is.
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS)
	if err := w.Add(evs[0], []byte(`{"seq":"1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil || buf.String() != "{\"seq\":\"1\"}\n" {
		t.Errorf("got %q, %v", buf.String(), err)
	}
}

func TestEmptyExports(t *testing.T) {
	for f, want := range map[baagentv1.ExportFormat]string{
		baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE: "[]\n",
		baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI: "[]\n",
		baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS: "",
	} {
		if got := string(export(t, f)); got != want {
			t.Errorf("%v: %q, want %q", f, got, want)
		}
	}
	if _, err := NewWriter(&bytes.Buffer{}, baagentv1.ExportFormat_EXPORT_FORMAT_UNSPECIFIED); err == nil {
		t.Error("NewWriter accepted UNSPECIFIED")
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errBoom
	}
	f.n--
	return len(p), nil
}

var errBoom = bytes.ErrTooLarge

func TestWriteErrorsStick(t *testing.T) {
	for _, f := range []baagentv1.ExportFormat{baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS} {
		w, _ := NewWriter(&failWriter{n: 1}, f)
		var err error
		for _, ev := range toolRun().list {
			if err = w.Add(ev, nil); err != nil {
				break
			}
		}
		if err == nil {
			err = w.Close()
		}
		if err != errBoom {
			t.Errorf("%v: err = %v, want the writer's", f, err)
		}
		if err := w.Close(); err != errBoom {
			t.Errorf("%v: Close after the failure = %v", f, err)
		}
	}
}

func TestParseFormatAndNames(t *testing.T) {
	for in, want := range map[string]baagentv1.ExportFormat{
		"claude": baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, "openai": baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI,
		"events": baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS, "EXPORT_FORMAT_OPENAI": baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI,
	} {
		if got, ok := ParseFormat(in); !ok || got != want {
			t.Errorf("ParseFormat(%q) = %v %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "Claude", "unspecified", "EXPORT_FORMAT_UNSPECIFIED", "xml"} {
		if _, ok := ParseFormat(bad); ok {
			t.Errorf("ParseFormat(%q) accepted", bad)
		}
	}
	if got := Filename("run", "r/1 x", baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS); got != "run-r_1_x.events.jsonl" {
		t.Errorf("Filename = %q", got)
	}
	if ContentType(baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS) != ContentTypeJSONL || ContentType(baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE) != ContentTypeJSON {
		t.Error("content types")
	}
}

func TestAppendStringIsJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" back \\ nl \n tab \t cr \r", "\x00\x1f\x7f", "héllo ✓", "bad \xff utf8", "\u2028\u2029", "<&>"} {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%q → %s: %v", s, b, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); got != want {
			t.Errorf("%q → %q", s, got)
		}
	}
}

func TestManyReusedIDsStayLinear(t *testing.T) {
	// Every step reuses one id (as a model may across a long
	// conversation); each rename is one lookup, and the ids stay unique.
	evs := newRun("run-9").start("loop")
	const steps = 5000
	for range steps {
		evs.stepStart().act("call_1", "echo", nil).observe("call_1", "echo", "ok", true)
	}
	evs.stepStart().complete("done")
	start := time.Now()
	msgs := claude(t, evs.list)
	if len(msgs) != 2*steps+2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if last := msgs[len(msgs)-3].Content[0].ID; last != fmt.Sprintf("call_1_%d", steps) {
		t.Errorf("last id %q", last)
	}
	t.Logf("%d reused ids in %v", steps, time.Since(start))
}
