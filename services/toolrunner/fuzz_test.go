package toolrunner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// FuzzToolArguments sends arbitrary JSON arguments (paths, paging
// parameters, patterns, SQL) to every built-in tool through the pipeline:
// never an RPC error or a panic, always a result with the request's
// tool_call_id, a valid UTF-8 observation within the 50 KiB bound, and
// nothing written outside the conversation's workspace.
func FuzzToolArguments(f *testing.F) {
	s, env := newTestServer(f, nil)
	tools := []string{"file_read", "file_write", "file_edit", "glob", "grep", "sql_query", "artifact_read"}
	seeds := []string{
		`{"path":"../../etc/passwd"}`, `{"path":"/etc/passwd","offset":-1,"limit":99999}`,
		`{"path":"a.txt","content":"x\ny"}`, `{"path":"a.txt","old_string":"x","new_string":"z","replace_all":true}`,
		`{"pattern":"**/*"}`, `{"pattern":"[","glob":"[!"}`, `{"pattern":"x","path":"..","context_lines":3}`,
		`{"query":"SELECT 1","max_rows":0}`, `{"query":"ATTACH '/etc/passwd' AS p"}`,
		`{"artifact_id":"artifact_../x","offset":1e300,"limit":-5,"pattern":"("}`, `{"offset":1.5}`, `[]`, `null`,
	}
	for i, sd := range seeds {
		f.Add(uint8(i), sd)
	}
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		var m map[string]any
		if json.Unmarshal([]byte(args), &m) != nil {
			return
		}
		p, err := structpb.NewStruct(m)
		if err != nil {
			return
		}
		r := &baagentv1.ToolInvocationRequest{
			ToolCallId: "call_fuzz", ToolName: tools[int(which)%len(tools)], Parameters: p,
			CallerId: "fuzz", Tenant: "acme", ConversationId: "conv-fuzz", TimeoutMs: 2000,
			RetryPolicy: &baagentv1.ToolRetryPolicy{MaxRetries: new(int32)},
		}
		resp, err := s.Invoke(context.Background(), &baagentv1.InvokeRequest{Request: r})
		if err != nil {
			t.Fatalf("%s(%s): RPC error %v", r.ToolName, args, err)
		}
		res := resp.GetResult()
		if res.GetToolCallId() != "call_fuzz" || !utf8.ValidString(res.GetObservation()) || len(res.GetObservation()) > 50*1024 {
			t.Fatalf("%s(%s): %v", r.ToolName, args, res)
		}
		if entries, _ := os.ReadDir(filepath.Dir(env.opts.WorkspaceDir)); len(entries) != 2 {
			t.Fatalf("%s(%s) wrote beside the workspace root: %v", r.ToolName, args, entries)
		}
		if strings.Contains(res.GetObservation(), env.opts.WorkspaceDir) || strings.Contains(res.GetObservation(), env.opts.ArtifactDir) {
			t.Fatalf("observation names a host path: %s", res.GetObservation())
		}
	})
}

// FuzzSelector: any text parses or is refused without panicking; a parsed
// selector evaluates on any document without panicking, and its prefix
// rendering parses back to the same path.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{"$input.path", "$steps[0].data.rows[2]", `$["a b"][0]`, "$", "$steps[", "$input..x", `$input["\u00e9"]`, "$$lit", "$stepsx", "$input[999999]"} {
		f.Add(s)
	}
	doc := map[string]any{"path": "p", "data": map[string]any{"rows": []any{1.0, "x", nil}}, "a b": []any{true}}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := parseSelector(s)
		if err != nil {
			return
		}
		_, _ = sel.eval(doc)
		again, err := parseSelector(sel.prefix(len(sel.path)))
		if err != nil {
			t.Fatalf("%q rendered as %q, which does not parse: %v", s, sel.prefix(len(sel.path)), err)
		}
		if again.root != sel.root || again.step != sel.step || len(again.path) != len(sel.path) {
			t.Fatalf("%q round trip: %+v != %+v", s, again, sel)
		}
		for i := range sel.path {
			if again.path[i] != sel.path[i] {
				t.Fatalf("%q round trip at %d: %+v != %+v", s, i, again.path[i], sel.path[i])
			}
		}
		_, _ = mapArgs(map[string]any{"a": s, "b": []any{s}}, func(x selector) (any, error) { return x.eval(doc) })
	})
}

// FuzzParseCompositions: any tools file is accepted or refused without
// panicking; an accepted composition respects the limits.
func FuzzParseCompositions(f *testing.F) {
	f.Add(seqYAML)
	f.Add("compositions:\n  - {name: c, description: d, kind: conditional, steps: [{tool: a}, {tool: b, when: {path: \"$.data.n\", equals: 3}, args: {x: [\"$steps[0].data\", {y: \"$$z\"}]}}]}")
	f.Add("compositions:\n  - {name: c, description: d, kind: parallel, steps: [{tool: a, fallback: [b]}], input_schema: {type: object}}")
	f.Fuzz(func(t *testing.T, doc string) {
		cs, err := ParseCompositions([]byte(doc))
		if err != nil {
			return
		}
		for _, c := range cs {
			if len(c.Steps) == 0 || len(c.Steps) > MaxCompositionSteps {
				t.Fatalf("%s has %d steps", c.Name, len(c.Steps))
			}
			for _, st := range c.Steps {
				if len(st.Fallback) > MaxStepFallbacks {
					t.Fatalf("%s: %d fallbacks", c.Name, len(st.Fallback))
				}
				_, _ = mapArgs(st.Args, func(sel selector) (any, error) { return sel.eval(map[string]any{}) })
				if st.When != nil {
					st.When.holds(map[string]any{"success": true})
				}
			}
		}
	})
}
