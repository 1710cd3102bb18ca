package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit/exporttest"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// publishToolRun publishes a run that calls a tool, reasons, delegates to
// a sub-agent (mirrored events) and answers.
func publishToolRun(t *testing.T, ctx context.Context, r *natstest.Run, input string) {
	t.Helper()
	args, _ := structpb.NewStruct(map[string]any{"query": "SELECT 1"})
	evs := []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: input, Model: "scripted"}}},
		{Step: 1, Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: 1}}},
		{Step: 1, Payload: &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{Delta: "need data"}}},
		{Step: 1, Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: "need data"}}},
		{Step: 1, Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call_1", ToolName: "sql_query", ToolInput: args}}},
		{Step: 1, Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call_2", ToolName: "task"}}},
		{Step: 1, SubagentRunId: "child", Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "sub task"}}},
		{Step: 1, SubagentRunId: "child", Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "sub done"}}},
		{Step: 1, Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call_1", ToolName: "sql_query", Observation: "1", Success: true}}},
		{Step: 1, Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call_2", ToolName: "task", Observation: "sub done", Success: true}}},
		{Step: 2, Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "The answer is 1."}}},
		{Step: 2, Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "The answer is 1."}}},
	}
	for _, ev := range evs {
		if _, err := r.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// httpGet fetches path with key and returns the response and its body.
func (e *env) httpGet(ctx context.Context, path, key string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, body
}

// grpcExportRun collects an ExportRun stream.
func grpcExportRun(ctx context.Context, c baagentv1.GatewayServiceClient, key string, req *baagentv1.ExportRunRequest) ([]*baagentv1.ExportRunResponse, []byte, error) {
	stream, err := c.ExportRun(withKey(ctx, key), req)
	if err != nil {
		return nil, nil, err
	}
	var chunks []*baagentv1.ExportRunResponse
	var doc []byte
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return chunks, doc, nil
		}
		if err != nil {
			return chunks, doc, err
		}
		chunks = append(chunks, m)
		doc = append(doc, m.GetData()...)
	}
}

func TestExportRunOverHTTPAndGRPC(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, Options{})
	r := e.run("acme", "run-x1")
	publishToolRun(t, ctx, r, "What is one?")

	for _, f := range []string{"claude", "openai", "events"} {
		resp, body := e.httpGet(ctx, "/v1/runs/run-x1/export?format="+f, keyAcme)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", f, resp.StatusCode, body)
		}
		wantType := "application/json"
		if f == "events" {
			wantType = "application/x-ndjson"
		}
		ext := map[string]string{"claude": "claude.json", "openai": "openai.json", "events": "events.jsonl"}[f]
		if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); ct != wantType || cd != `attachment; filename=run-run-x1.`+ext {
			t.Errorf("%s: Content-Type %q, Content-Disposition %q", f, ct, cd)
		}
		switch f {
		case "claude":
			msgs, err := exporttest.Claude(body)
			if err != nil {
				t.Fatalf("claude: %v\n%s", err, body)
			}
			if len(msgs) != 4 || msgs[1].Content[0].Thinking != "need data" || msgs[1].Content[1].ID != "call_1" || msgs[3].Content[0].Text != "The answer is 1." {
				t.Errorf("claude export %s", body)
			}
		case "openai":
			msgs, err := exporttest.OpenAI(body)
			if err != nil {
				t.Fatalf("openai: %v\n%s", err, body)
			}
			if len(msgs) != 5 || msgs[1].ToolCalls[0].ID != "call_1" || msgs[3].ToolCallID != "call_2" {
				t.Errorf("openai export %s", body)
			}
		case "events":
			lines, err := exporttest.Events(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) != 12 || lines[6]["subagent_run_id"] != "child" || lines[0]["type"] != "start" || lines[11]["cursor"] != "12" {
				t.Errorf("events export %s", body)
			}
		}
		// The same document over gRPC, in one chunk carrying the type.
		format, _ := baagentv1.ExportFormat_value["EXPORT_FORMAT_"+strings.ToUpper(f)]
		chunks, doc, err := grpcExportRun(ctx, e.client, keyAcme, &baagentv1.ExportRunRequest{RunId: "run-x1", Format: baagentv1.ExportFormat(format)})
		if err != nil {
			t.Fatalf("%s: gRPC: %v", f, err)
		}
		if len(chunks) != 1 || chunks[0].GetContentType() != wantType || chunks[0].GetFilename() != "run-run-x1."+ext {
			t.Errorf("%s: %d chunks, first %q %q", f, len(chunks), chunks[0].GetContentType(), chunks[0].GetFilename())
		}
		if !bytes.Equal(doc, body) {
			t.Errorf("%s: gRPC document differs from HTTP's\n%s\n%s", f, doc, body)
		}
	}
	if got := testutil.ToFloat64(e.srv.exportM.exports.WithLabelValues("run", "claude", "http", "OK")); got != 1 {
		t.Errorf("exports_total{run,claude,http,OK} = %v", got)
	}
	if got := testutil.ToFloat64(e.srv.exportM.events); got != 6*12 {
		t.Errorf("export_events_total = %v, want %d", got, 6*12)
	}
}

func TestExportIsChunked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, Options{})
	r := e.run("acme", "run-big")
	if _, err := r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "big"}}}); err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("x", 1000)
	for range 300 {
		if _, err := r.Text(ctx, chunk); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []baagentv1.ExportFormat{baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS, baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE} {
		chunks, doc, err := grpcExportRun(ctx, e.client, keyAcme, &baagentv1.ExportRunRequest{RunId: "run-big", Format: f})
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) < 5 {
			t.Errorf("%v: %d chunks for %d bytes", f, len(chunks), len(doc))
		}
		for i, c := range chunks {
			if len(c.GetData()) > ExportChunkBytes || (i > 0) != (c.GetContentType() == "") || (i < len(chunks)-1 && len(c.GetData()) != ExportChunkBytes) {
				t.Errorf("%v: chunk %d: %d bytes, content type %q", f, i, len(c.GetData()), c.GetContentType())
			}
		}
		if f == baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE {
			// The run has not ended: its streamed text is its last message.
			msgs, err := exporttest.Claude(doc)
			if err != nil || len(msgs) != 2 || len(msgs[1].Content[0].Text) != 300*len(chunk) {
				t.Errorf("claude: %v, %d messages", err, len(msgs))
			}
		}
	}
	resp, body := e.httpGet(ctx, "/v1/runs/run-big/export?format=events", keyAcme)
	if lines, err := exporttest.Events(body); resp.StatusCode != http.StatusOK || err != nil || len(lines) != 301 {
		t.Errorf("HTTP: status %d, %d lines, %v", resp.StatusCode, len(lines), err)
	}
}

func TestExportConversationRunsOldestFirst(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, Options{MaxExportRuns: 3})
	now := time.Now()
	// Listed by id (b before c before a), created a, b, c.
	for _, id := range []string{"run-c2", "run-c3", "run-c1"} {
		created := map[string]time.Time{"run-c1": now.Add(-3 * time.Minute), "run-c2": now.Add(-2 * time.Minute), "run-c3": now.Add(-time.Minute)}[id]
		e.orch.put(&baagentv1.Run{RunId: id, Tenant: "acme", ConversationId: "conv-7", State: baagentv1.RunState_RUN_STATE_COMPLETED, CreatedAt: timestamppb.New(created)})
		r := natstest.NewRun(e.js, "acme", id)
		r.ConversationID = "conv-7"
		publishToolRun(t, ctx, r, "question of "+id)
	}
	e.orch.put(&baagentv1.Run{RunId: "run-other", Tenant: "acme", ConversationId: "conv-8", CreatedAt: timestamppb.Now()})

	resp, body := e.httpGet(ctx, "/v1/conversations/conv-7/export?format=claude", keyAcme)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	msgs, err := exporttest.Claude(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var asked []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == "text" && strings.HasPrefix(b.Text, "question of ") {
				asked = append(asked, strings.TrimPrefix(b.Text, "question of "))
			}
		}
	}
	if fmt.Sprint(asked) != "[run-c1 run-c2 run-c3]" {
		t.Errorf("runs in order %v", asked)
	}
	// Every run reused call_1 and call_2: the later ones are renamed.
	if cd := resp.Header.Get("Content-Disposition"); cd != "attachment; filename=conversation-conv-7.claude.json" {
		t.Errorf("Content-Disposition %q", cd)
	}
	resp, body = e.httpGet(ctx, "/v1/conversations/conv-7/export?format=openai", keyAcme)
	if _, err := exporttest.OpenAI(body); resp.StatusCode != http.StatusOK || err != nil {
		t.Errorf("openai: %d %v", resp.StatusCode, err)
	}
	resp, body = e.httpGet(ctx, "/v1/conversations/conv-7/export?format=events", keyAcme)
	if lines, err := exporttest.Events(body); resp.StatusCode != http.StatusOK || err != nil || len(lines) != 36 || lines[0]["run_id"] != "run-c1" || lines[35]["run_id"] != "run-c3" {
		t.Errorf("events: %d, %d lines, %v", resp.StatusCode, len(lines), err)
	}
	stream, err := e.client.ExportConversation(withKey(ctx, keyAcme), &baagentv1.ExportConversationRequest{ConversationId: "conv-7", Format: baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE})
	if err != nil {
		t.Fatal(err)
	}
	var doc []byte
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		doc = append(doc, m.GetData()...)
	}
	if msgs2, err := exporttest.Claude(doc); err != nil || len(msgs2) != len(msgs) {
		t.Errorf("gRPC conversation export: %v, %d messages", err, len(msgs2))
	}

	// One run over the limit.
	e.orch.put(&baagentv1.Run{RunId: "run-c4", Tenant: "acme", ConversationId: "conv-7", CreatedAt: timestamppb.Now()})
	resp, body = e.httpGet(ctx, "/v1/conversations/conv-7/export?format=claude", keyAcme)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "more than 3 runs") {
		t.Errorf("over the limit: %d %s", resp.StatusCode, body)
	}
}

func TestExportBadInput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, Options{})
	publishToolRun(t, ctx, e.run("acme", "run-mine"), "mine")
	e.orch.put(&baagentv1.Run{RunId: "run-conv", Tenant: "acme", ConversationId: "conv-mine", CreatedAt: timestamppb.Now()})

	for _, c := range []struct {
		path, key string
		status    int
		want      string
	}{
		{"/v1/runs/run-nope/export?format=claude", keyAcme, http.StatusNotFound, "not found"},
		{"/v1/runs/run-mine/export?format=claude", keyInitech, http.StatusNotFound, "not found"},
		{"/v1/conversations/conv-nope/export?format=openai", keyAcme, http.StatusNotFound, "not found"},
		{"/v1/conversations/conv-mine/export?format=openai", keyInitech, http.StatusNotFound, "not found"},
		{"/v1/runs/run-mine/export?format=xml", keyAcme, http.StatusBadRequest, `"field":"format"`},
		{"/v1/runs/run-mine/export?format=EXPORT_FORMAT_UNSPECIFIED", keyAcme, http.StatusBadRequest, `"field":"format"`},
		{"/v1/runs/run-mine/export", keyAcme, http.StatusBadRequest, `"field":"format"`},
		{"/v1/conversations/conv-mine/export?format=Claude", keyAcme, http.StatusBadRequest, `"field":"format"`},
		{"/v1/conversations/bad%20id/export?format=claude", keyAcme, http.StatusBadRequest, `"field":"conversation_id"`},
		{"/v1/runs/run-mine/export?format=claude", "", http.StatusUnauthorized, "UNAUTHENTICATED"},
	} {
		resp, body := e.httpGet(ctx, c.path, c.key)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s: %d %s, want %d with %s", c.path, resp.StatusCode, body, c.status, c.want)
		}
	}
	// The dashboard's links authenticate with a stream token.
	tok := e.streamToken(t, keyAcme)
	if resp, body := e.httpGet(ctx, "/v1/runs/run-mine/export?format=claude&token="+tok, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("export with a stream token: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.httpGet(ctx, "/v1/runs/run-mine/export?format=claude&token="+e.streamToken(t, keyInitech), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("export with another tenant's stream token: %d", resp.StatusCode)
	}
	_, _, err := grpcExportRun(ctx, e.client, keyAcme, &baagentv1.ExportRunRequest{RunId: "run-mine"})
	vt.WantInvalid(t, err, "format")
	_, _, err = grpcExportRun(ctx, e.client, keyAcme, &baagentv1.ExportRunRequest{RunId: "run-mine", Format: 99})
	vt.WantInvalid(t, err, "format")
	_, _, err = grpcExportRun(ctx, e.client, keyAcme, &baagentv1.ExportRunRequest{Format: baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE})
	vt.WantInvalid(t, err, "run_id")
	for _, key := range []string{keyAcme, keyInitech} {
		id := map[string]string{keyAcme: "run-nope", keyInitech: "run-mine"}[key]
		if _, _, err := grpcExportRun(ctx, e.client, key, &baagentv1.ExportRunRequest{RunId: id, Format: baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS}); status.Code(err) != codes.NotFound {
			t.Errorf("ExportRun(%s) as %s: %v, want NotFound", id, key, err)
		}
	}
	stream, err := e.client.ExportConversation(withKey(ctx, keyInitech), &baagentv1.ExportConversationRequest{ConversationId: "conv-mine", Format: baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("ExportConversation of another tenant: %v, want NotFound", err)
	}
	if got := testutil.ToFloat64(e.srv.exportM.exports.WithLabelValues("run", "claude", "http", "NOT_FOUND")); got != 3 {
		t.Errorf("exports_total{run,claude,http,NOT_FOUND} = %v, want 3", got)
	}
}
