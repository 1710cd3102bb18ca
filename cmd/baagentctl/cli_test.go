package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The reproduction: a flag after the question was a usage error.
// Against a dead gateway the same line now fails on the connection (exit 1),
// i.e. --json and --timeout were taken as flags and "q" as the question.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	dead := "--addr=127.0.0.1:1"
	for _, args := range [][]string{
		{"ask", "q", "--json", "--timeout=300ms", dead},
		{"ask", "--json", "q", "--timeout", "300ms", dead},
		{dead, "--json", "ask", "q", "--timeout=300ms"},
		{"ask", "q", "-json", "-timeout=300ms", "-addr", "127.0.0.1:1"}, // the old single-dash form
	} {
		code, stdout, stderr := ctl(t, args...)
		if code != 1 || !strings.Contains(stderr, "start run at 127.0.0.1:1") || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1 and a connection error", args, code, stdout, stderr)
		}
	}
	// A question that looks like a flag goes after "--".
	if code, _, stderr := ctl(t, "ask", dead, "--timeout=300ms", "--", "-json"); code != 1 || !strings.Contains(stderr, "start run at") {
		t.Errorf("ask -- -json: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := ctl(t, "ask", "q", "--nope"); code != 2 || !strings.Contains(stderr, "unknown flag: --nope") {
		t.Errorf("unknown flag after the argument: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := ctl(t, "ask", "q", "extra", dead); code != 2 || !strings.Contains(stderr, "want exactly one QUESTION argument") {
		t.Errorf("two questions: exit %d, stderr %q", code, stderr)
	}
}

func TestNormaliseFlags(t *testing.T) {
	t.Parallel()
	root := newCLI(nil, nil, nil, func(string) string { return "" }).rootCommand()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"-json", "health"}, []string{"--json", "health"}},
		{[]string{"ask", "q", "-timeout=5s", "-plan-approval", "ask"}, []string{"ask", "q", "--timeout=5s", "--plan-approval", "ask"}},
		{[]string{"runs", "list", "-o", "yaml", "-h"}, []string{"runs", "list", "-o", "yaml", "-h"}},
		{[]string{"runs", "list", "-ojson"}, []string{"runs", "list", "-ojson"}},
		{[]string{"ask", "-frob", "-", "-5"}, []string{"ask", "-frob", "-", "-5"}},
		{[]string{"ask", "--", "-json"}, []string{"ask", "--", "-json"}},
		{[]string{"-help"}, []string{"--help"}},
	} {
		if got := normaliseFlags(root, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("normaliseFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzNormaliseFlags(f *testing.F) {
	root := newCLI(nil, nil, nil, func(string) string { return "" }).rootCommand()
	f.Add("-json", "ask", "--")
	f.Add("-timeout=1s", "-o", "yaml")
	f.Add("--", "-json", "-x=y")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		in := []string{a, b, c}
		out := normaliseFlags(root, in)
		if len(out) != len(in) {
			t.Fatalf("%q -> %q", in, out)
		}
		dash := false
		for i := range in {
			if dash && out[i] != in[i] {
				t.Fatalf("rewrote %q after --", in[i])
			}
			if out[i] != in[i] && out[i] != "-"+in[i] {
				t.Fatalf("%q -> %q", in[i], out[i])
			}
			dash = dash || in[i] == "--"
		}
		if !slices.Equal(in, []string{a, b, c}) {
			t.Fatal("input modified")
		}
	})
}

// Every command documents itself: a description, and examples on every
// command that runs something.
func TestEveryCommandHasHelpAndExamples(t *testing.T) {
	t.Parallel()
	root := newCLI(nil, nil, nil, func(string) string { return "" }).rootCommand()
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Short == "" || cmd.Long == "" {
			t.Errorf("%s: no description", cmd.CommandPath())
		}
		if cmd.RunE != nil && !cmd.HasSubCommands() && cmd.Example == "" && cmd.Name() != "help" && cmd.Parent() != nil && cmd.Parent().Name() != "completion" {
			t.Errorf("%s: no examples", cmd.CommandPath())
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)

	code, stdout, stderr := ctl(t, "ask", "--help")
	for _, want := range []string{"Usage:\n  baagentctl ask QUESTION [flags]", "Examples:", `baagentctl ask "q" --json`, "--plan-approval string", "--api-key string", "Global Flags:", "--timeout duration", "Exit status: 0 completed, 1 failed, 3 cancelled"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("ask --help lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 || stderr != "" {
		t.Errorf("ask --help: exit %d, stderr %q", code, stderr)
	}
	// The API key from the environment is used but never shown.
	var out, errOut strings.Builder
	env := map[string]string{"BAAGENT_API_KEY": "secret-key-in-env"}
	if code := run(t.Context(), []string{"ask", "--help"}, strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] }); code != 0 || strings.Contains(out.String(), "secret-key-in-env") {
		t.Errorf("ask --help with BAAGENT_API_KEY set: exit %d, shows the key:\n%s", code, out.String())
	}
	// Help in every position and spelling.
	for _, args := range [][]string{{"runs", "list", "-h"}, {"help", "runs", "list"}, {"runs", "list", "-help"}, {"--json", "runs", "list", "--help"}} {
		code, stdout, _ := ctl(t, args...)
		if code != 0 || !strings.Contains(stdout, "-o, --output string") || !strings.Contains(stdout, "--state string") {
			t.Errorf("%q: exit %d, help:\n%s", args, code, stdout)
		}
	}
	if code, stdout, _ := ctl(t, "--help"); code != 0 || !strings.Contains(stdout, "completion") || !strings.Contains(stdout, "2 usage error") {
		t.Errorf("--help: exit %d:\n%s", code, stdout)
	}
	// No arguments at all, or a group without its subcommand: usage on
	// stderr, exit 2.
	for _, args := range [][]string{nil, {"runs"}, {"tokens"}} {
		code, stdout, stderr := ctl(t, args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "Available Commands:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{
		"bash": "__start_baagentctl",
		"zsh":  "#compdef baagentctl",
		"fish": "complete -c baagentctl",
	} {
		code, stdout, stderr := ctl(t, "completion", shell)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("completion %s: exit %d, stderr %q, script lacks %q", shell, code, stderr, want)
		}
	}
	if code, _, _ := ctl(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
	// What the scripts ask for at run time: command names and flag names,
	// the flags of each command included.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"ask", "runs", "skills", "tokens", "tools", "completion"}},
		{[]string{"__complete", "runs", ""}, []string{"list", "get", "cancel"}},
		{[]string{"__complete", "ask", "q", "--pl"}, []string{"--plan", "--plan-approval"}},
		{[]string{"__complete", "runs", "list", "--"}, []string{"--output", "--state", "--json", "--addr"}},
	} {
		code, stdout, stderr := ctl(t, tc.args...)
		lines := strings.Split(stdout, "\n")
		for _, w := range tc.want {
			if !slices.ContainsFunc(lines, func(l string) bool { return l == w || strings.HasPrefix(l, w+"\t") }) {
				t.Errorf("%q: exit %d, no %q in:\n%s%s", tc.args, code, w, stdout, stderr)
			}
		}
	}
}

// -o yaml carries what -o json does: the same names and values.
func TestProtoYAMLMatchesJSON(t *testing.T) {
	t.Parallel()
	resp := &baagentv1.ListRunsResponse{
		Runs: []*baagentv1.Run{
			{RunId: "run_1", Input: "yes", State: baagentv1.RunState_RUN_STATE_COMPLETED, Step: 3, CreatedAt: timestamppb.New(timestamppb.Now().AsTime()), FinalAnswer: "line one\nline two: with colon\n# not a comment"},
			{RunId: "123", Input: "null", Model: "- dash", ConversationId: "{x}"},
			{RunId: "run_3", Input: "  padded \t", Model: "'quoted\"", ConversationId: "true"},
		},
		NextPageToken: "0x1F",
	}
	y, err := protoYAML(resp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), "{") && !strings.Contains(string(y), "'{x}'") && !strings.Contains(string(y), `"{x}"`) {
		t.Errorf("flow style left in:\n%s", y)
	}
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal(y, &fromYAML); err != nil {
		t.Fatalf("%v:\n%s", err, y)
	}
	j, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normaliseNumbers(fromYAML), normaliseNumbers(fromJSON)) {
		t.Errorf("YAML differs from JSON:\n%s\n%s", y, j)
	}
	if strings.Index(string(y), "run_id") > strings.Index(string(y), "input") {
		t.Errorf("field order lost:\n%s", y)
	}
}

// normaliseNumbers makes YAML's ints and JSON's float64s comparable.
func normaliseNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normaliseNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normaliseNumbers(e)
		}
	case int:
		return float64(v)
	}
	return v
}

func FuzzProtoYAML(f *testing.F) {
	f.Add("run_1", "yes", "a\nb: c")
	f.Add("", "null", "- x")
	f.Add("0", "\u0085\u2028", "\x7f")
	f.Fuzz(func(t *testing.T, id, input, answer string) {
		resp := &baagentv1.ListRunsResponse{Runs: []*baagentv1.Run{{RunId: id, Input: input, FinalAnswer: answer}}}
		j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
		if err != nil {
			return // invalid UTF-8: the JSON output refuses it too
		}
		y, err := protoYAML(resp)
		if err != nil {
			t.Fatalf("%v", err)
		}
		var fromYAML, fromJSON any
		if err := yaml.Unmarshal(y, &fromYAML); err != nil {
			t.Fatalf("%v:\n%s", err, y)
		}
		if err := json.Unmarshal(j, &fromJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normaliseNumbers(fromYAML), normaliseNumbers(fromJSON)) {
			t.Fatalf("YAML differs from JSON:\n%s\n%s", y, j)
		}
	})
}

func TestOutputFlagOnLists(t *testing.T) {
	t.Parallel()
	addr := startSkills(t)
	code, stdout, stderr := ctl(t, addr, "skills", "list", "-o", "yaml")
	var list struct {
		Skills []struct {
			Name string `yaml:"name"`
		} `yaml:"skills"`
	}
	if err := yaml.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || !slices.ContainsFunc(list.Skills, func(s struct {
		Name string `yaml:"name"`
	}) bool {
		return s.Name == "sales-analysis"
	}) {
		t.Errorf("skills list -o yaml: exit %d, %v, stderr %q:\n%s", code, err, stderr, stdout)
	}
	_, asJSON, _ := ctl(t, addr, "skills", "list", "--json")
	if code, stdout, _ := ctl(t, "skills", "list", "-o", "json", addr); code != 0 || stdout != asJSON {
		t.Errorf("skills list -o json (exit %d) differs from --json:\n%s\n%s", code, stdout, asJSON)
	}
	if code, stdout, _ := ctl(t, addr, "skills", "list", "--output=table"); code != 0 || !strings.HasPrefix(stdout, "NAME") {
		t.Errorf("skills list -o table: exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := ctl(t, addr, "skills", "list", "-o", "xml"); code != 2 || !strings.Contains(stderr, `want table, json or yaml, got "xml"`) {
		t.Errorf("-o xml: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := ctl(t, addr, "skills", "list", "--json", "-o", "table"); code != 2 || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("--json -o table: exit %d, stderr %q", code, stderr)
	}

	tools := toolsCLI(t)
	code, stdout, stderr = tools("list", "-o", "yaml")
	if code != 0 || !strings.Contains(stdout, "tools:\n") || !strings.Contains(stdout, "name: sql_query") {
		t.Errorf("tools list -o yaml: exit %d, stderr %q:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = tools("list", "-o", "json")
	var tl map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &tl) != nil || tl["tools"] == nil {
		t.Errorf("tools list -o json: exit %d:\n%s", code, stdout)
	}
}
