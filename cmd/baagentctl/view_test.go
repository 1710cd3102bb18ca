package main

import (
	"bytes"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// A tool waiting for approval is shown with its arguments and options, the
// prompt is offered for its decision id, and the reply is shown.
func TestLiveViewShowsPermissionQuestions(t *testing.T) {
	t.Parallel()

	var out bytes.Buffer
	var prompted string
	v := &liveView{w: &out, prompt: func(id string) { prompted = id }}
	asked := &baagentv1.Event{Type: "permission_asked", Payload: &baagentv1.Event_PermissionAsked{PermissionAsked: &baagentv1.PermissionAskedPayload{
		ToolCallId: "call_1", ToolName: "file_write", Arguments: `{"path":"report.md"}`,
		Decision: &baagentv1.DecisionPoint{DecisionId: "perm_s1_c0", TimeoutSeconds: 300, Options: []*baagentv1.DecisionOption{
			{Label: "allow"}, {Label: "deny", IsRecommended: true},
		}},
	}}}
	replied := &baagentv1.Event{Type: "permission_replied", Payload: &baagentv1.Event_PermissionReplied{PermissionReplied: &baagentv1.PermissionRepliedPayload{
		ToolCallId: "call_1", ToolName: "file_write", DecisionId: "perm_s1_c0", Reply: "allow",
	}}}
	for _, ev := range []*baagentv1.Event{asked, replied} {
		if err := v.show(ev); err != nil {
			t.Fatal(err)
		}
	}
	got := out.String()
	for _, want := range []string{"file_write wants to run with {\"path\":\"report.md\"}", "- allow", "- deny", "300 s to answer", "file_write: allow"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if prompted != "perm_s1_c0" {
		t.Errorf("prompted for %q, want perm_s1_c0", prompted)
	}
}

// runs get shows a traced run's trace id, and no trace row otherwise.
func TestPrintRunShowsTheTraceID(t *testing.T) {
	t.Parallel()

	var out bytes.Buffer
	c := &cli{stdout: &out}
	c.printRun(&baagentv1.Run{RunId: "run_1", TraceId: "4bf92f3577b34da6a3ce929d0e0e4736"})
	if !strings.Contains(out.String(), "trace") || !strings.Contains(out.String(), "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("no trace row:\n%s", out.String())
	}
	out.Reset()
	c.printRun(&baagentv1.Run{RunId: "run_1"})
	if strings.Contains(out.String(), "trace") {
		t.Errorf("trace row for an untraced run:\n%s", out.String())
	}
}
