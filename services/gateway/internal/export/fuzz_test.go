package export

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit/exporttest"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// fuzzEvents builds an event sequence from data: each byte picks the next
// event and the bytes after it its ids and texts. Ids come from a small
// set (and may be empty), so calls repeat ids, results arrive for unknown
// or already answered calls, and runs end mid-call.
func fuzzEvents(data []byte) []*baagentv1.Event {
	var out []*baagentv1.Event
	run, sub, step := "run-0", "", int32(0)
	var seq uint64
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	text := func() string {
		n := int(next() % 8)
		n = min(n, len(data))
		s := string(data[:n])
		data = data[n:]
		return s
	}
	id := func() string {
		return [...]string{"c0", "c1", "c1_2", "", "call_unnamed_1", "c0_2", "c2", "c3"}[next()%8]
	}
	for len(data) > 0 {
		op := next()
		ev := &baagentv1.Event{}
		switch op % 16 {
		case 0:
			ev.Payload = &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: text()}}
		case 1:
			step++
			ev.Payload = &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: step}}
		case 2:
			ev.Payload = &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{Delta: text()}}
		case 3:
			ev.Payload = &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: text()}}
		case 4:
			ev.Payload = &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: text()}}
		case 5, 6:
			act := &baagentv1.ActPayload{ToolCallId: id(), ToolName: text()}
			switch next() % 3 {
			case 0:
				act.RawArguments = text()
			case 1:
				v := next()
				act.ToolInput = &structpb.Struct{Fields: map[string]*structpb.Value{
					text(): structpb.NewStringValue(text()),
					"n":    structpb.NewNumberValue([]float64{1, -0.5, 1e300, 0}[v%4] / float64(v%3)), // ±Inf, NaN
					"l":    structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewBoolValue(v%2 == 0), structpb.NewNullValue(), {}}}),
				}}
			}
			ev.Payload = &baagentv1.Event_Act{Act: act}
		case 7, 8:
			ev.Payload = &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: id(), Observation: text(), Success: op%2 == 0}}
		case 9:
			ev.Payload = &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: text()}}
		case 10:
			ev.Payload = &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Message: text()}}
		case 11:
			ev.Payload = &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: text()}}
		case 12:
			if sub == "" {
				sub = "child-1"
			} else {
				sub = ""
			}
			continue
		case 13:
			run, step, seq = run+"x", 0, 0
			continue
		case 14:
			ev.Payload = &baagentv1.Event_ClarificationAnswered{ClarificationAnswered: &baagentv1.ClarificationAnsweredPayload{Answer: text()}}
		default:
			ev.Payload = &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{Model: text()}}
		}
		seq++
		ev.RunId, ev.Seq, ev.Step, ev.SubagentRunId, ev.Tenant = run, seq, step, sub, "acme"
		out = append(out, ev)
	}
	return out
}

func FuzzConverters(f *testing.F) {
	f.Add([]byte{0, 3, 'h', 'e', 'y', 1, 5, 0, 0, 1, 7, 0, 2, 'o', 'k', 9, 2, 'o', 'k'})
	f.Add([]byte{0, 1, 'q', 1, 2, 3, 'a', 'b', 'c', 4, 3, 'a', 'b', 'c', 5, 1, 1, 1, 2, 'x', 'y', 6, 1, 1, 0, 8, 1, 0, 11, 0})
	f.Add([]byte{0, 0, 12, 0, 2, 'h', 'i', 5, 0, 2, 1, 7, 0, 0, 12, 13, 0, 1, 'z', 5, 0, 0, 10, 3, 0xff, 0xfe, 'x'})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 6, 2, 2, 3, 'a', 'b', 'c', 8, 1, 0, 7, 1, 0, 1, 5, 1, 0, 7, 1, 0, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8<<10 {
			// Longer inputs add events, not cases, and make each
			// execution (and the minimization of a new input) slow.
			data = data[:8<<10]
		}
		evs := fuzzEvents(data)
		for _, f := range []baagentv1.ExportFormat{baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS} {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, f)
			if err != nil {
				t.Fatal(err)
			}
			added := 0
			for _, ev := range evs {
				if err := w.Add(ev, nil); err != nil {
					// Only an event the stream mapping cannot render (an
					// empty Value, invalid UTF-8) is refused, and only by
					// the events format; the writer goes on.
					if _, merr := hub.JSONOptions.Marshal(ev); f != baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS || merr == nil {
						t.Fatalf("%v: Add: %v", f, err)
					}
					continue
				}
				added++
			}
			if err := w.Close(); err != nil {
				t.Fatalf("%v: Close: %v", f, err)
			}
			out := buf.Bytes()
			switch f {
			case baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE:
				if _, err := exporttest.Claude(out); err != nil {
					t.Fatalf("claude: %v\n%s", err, out)
				}
			case baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI:
				if !json.Valid(out) {
					t.Fatalf("openai: invalid JSON\n%s", out)
				}
				if _, err := exporttest.OpenAI(out); err != nil {
					t.Fatalf("openai: %v\n%s", err, out)
				}
			default:
				lines, err := exporttest.Events(out)
				if err != nil {
					t.Fatalf("events: %v\n%s", err, out)
				}
				if len(lines) != added {
					t.Fatalf("events: %d lines for %d events", len(lines), added)
				}
			}
		}
	})
}
