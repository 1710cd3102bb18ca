package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// Limits on scenario files.
const (
	maxScenarioFileBytes = 1 << 20
	maxTurns             = 100
	maxToolCallsPerTurn  = 16
)

// DefaultToolErrorPattern recognises an error observation: the
// standard error format starts with "Operation failed.".
const DefaultToolErrorPattern = `^\s*Operation failed\.`

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// scenarioFile is the on-disk form (YAML or JSON; JSON is read as YAML).
type scenarioFile struct {
	Name             string     `yaml:"name"`
	Description      string     `yaml:"description"`
	Example          string     `yaml:"example"`
	Match            matchFile  `yaml:"match"`
	Priority         int        `yaml:"priority"`
	ToolErrorPattern string     `yaml:"tool_error_pattern"`
	Turns            []turnFile `yaml:"turns"`
}

type matchFile struct {
	Exact    []string `yaml:"exact"`
	Contains []string `yaml:"contains"`
	Regex    string   `yaml:"regex"`
}

type turnFile struct {
	Reasoning   string         `yaml:"reasoning"`
	Text        string         `yaml:"text"`
	ToolCalls   []toolCallFile `yaml:"tool_calls"`
	IfToolError *turnFile      `yaml:"if_tool_error"`
}

type toolCallFile struct {
	Name         string    `yaml:"name"`
	Arguments    yaml.Node `yaml:"arguments"`
	RawArguments *string   `yaml:"raw_arguments"`
}

// Scenario is a validated scenario, immutable after loading.
type Scenario struct {
	Name        string
	Description string
	// Example is a request that matches, shown by the fallback answer.
	Example  string
	File     string
	Priority int

	exact     []string // normalised
	contains  []string // lower-cased
	regex     *regexp.Regexp
	toolError *regexp.Regexp
	turns     []*turn
}

// Turns is the number of scripted assistant turns.
func (s *Scenario) Turns() int { return len(s.turns) }

// turn is one scripted assistant message.
type turn struct {
	reasoning   *template.Template
	text        *template.Template
	toolCalls   []scriptedCall
	ifToolError *turn
}

func (t *turn) final() bool { return len(t.toolCalls) == 0 }

type scriptedCall struct {
	name      string
	arguments string // JSON text, or verbatim raw_arguments
}

// parseScenario reads and validates one file's content. Errors name the
// file and the field.
func parseScenario(file string, data []byte) (*Scenario, error) {
	var f scenarioFile
	if err := decodeFile(file, data, &f); err != nil {
		return nil, err
	}
	s, errs := compile(&f)
	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("%s: %w", file, e)
		}
		return nil, errors.Join(errs...)
	}
	s.File = file
	return s, nil
}

func compile(f *scenarioFile) (*Scenario, []error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s := &Scenario{Name: f.Name, Description: strings.TrimSpace(f.Description), Example: strings.TrimSpace(f.Example), Priority: f.Priority}
	if !namePattern.MatchString(f.Name) {
		bad("name: %q must match %s", f.Name, namePattern)
	}
	for i, e := range f.Match.Exact {
		n := normalize(e)
		if n == "" {
			bad("match.exact[%d]: empty", i)
		}
		s.exact = append(s.exact, n)
	}
	for i, c := range f.Match.Contains {
		if strings.TrimSpace(c) == "" {
			bad("match.contains[%d]: empty", i)
		}
		s.contains = append(s.contains, strings.ToLower(strings.TrimSpace(c)))
	}
	if f.Match.Regex != "" {
		re, err := regexp.Compile(f.Match.Regex)
		if err != nil {
			bad("match.regex: %v", err)
		}
		s.regex = re
	}
	if len(s.exact) == 0 && len(s.contains) == 0 && f.Match.Regex == "" {
		bad("match: needs exact, contains or regex")
	}
	pattern := f.ToolErrorPattern
	if pattern == "" {
		pattern = DefaultToolErrorPattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		bad("tool_error_pattern: %v", err)
	}
	s.toolError = re

	if len(f.Turns) == 0 {
		bad("turns: at least one turn is required")
	}
	if len(f.Turns) > maxTurns {
		bad("turns: at most %d turns, got %d", maxTurns, len(f.Turns))
	}
	for i := range f.Turns {
		field := fmt.Sprintf("turns[%d]", i)
		t, terrs := compileTurn(field, &f.Turns[i], true)
		errs = append(errs, terrs...)
		if t == nil {
			continue
		}
		last := i == len(f.Turns)-1
		switch {
		case last && (!t.final() || (t.ifToolError != nil && !t.ifToolError.final())):
			bad("%s: the last turn (and its if_tool_error) must be a final answer, without tool_calls", field)
		case !last && t.final() && (t.ifToolError == nil || t.ifToolError.final()):
			bad("%s: a final answer (no tool_calls) ends the conversation, so only the last turn may be one; give it tool_calls, or an if_tool_error with tool_calls", field)
		}
		s.turns = append(s.turns, t)
	}
	return s, errs
}

func compileTurn(field string, f *turnFile, top bool) (*turn, []error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(field+"."+format, args...)) }
	t := &turn{}
	if f.Text == "" && len(f.ToolCalls) == 0 {
		errs = append(errs, fmt.Errorf("%s: needs text or tool_calls", field))
	}
	var err error
	if t.text, err = parseTemplate(field+".text", f.Text); err != nil {
		errs = append(errs, err)
	}
	if t.reasoning, err = parseTemplate(field+".reasoning", f.Reasoning); err != nil {
		errs = append(errs, err)
	}
	if len(f.ToolCalls) > maxToolCallsPerTurn {
		bad("tool_calls: at most %d per turn, got %d", maxToolCallsPerTurn, len(f.ToolCalls))
	}
	for j := range f.ToolCalls {
		c := &f.ToolCalls[j]
		cf := fmt.Sprintf("tool_calls[%d]", j)
		if !toolNamePattern.MatchString(c.Name) {
			bad("%s.name: %q must match %s", cf, c.Name, toolNamePattern)
		}
		var args string
		switch {
		case c.RawArguments != nil && !c.Arguments.IsZero():
			bad("%s: give arguments or raw_arguments, not both", cf)
		case c.RawArguments != nil:
			args = *c.RawArguments
		case c.Arguments.IsZero():
			args = "{}"
		default:
			var v any
			if err := c.Arguments.Decode(&v); err != nil {
				bad("%s.arguments: %v", cf, err)
				break
			}
			if _, ok := v.(map[string]any); !ok {
				bad("%s.arguments (line %d): must be a mapping of argument names to values", cf, c.Arguments.Line)
				break
			}
			b, err := json.Marshal(v)
			if err != nil {
				bad("%s.arguments (line %d): %v", cf, c.Arguments.Line, err)
				break
			}
			args = string(b)
		}
		t.toolCalls = append(t.toolCalls, scriptedCall{name: c.Name, arguments: args})
	}
	if f.IfToolError != nil {
		if !top {
			bad("if_tool_error: cannot be nested")
		} else {
			alt, aerrs := compileTurn(field+".if_tool_error", f.IfToolError, false)
			errs = append(errs, aerrs...)
			t.ifToolError = alt
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// normalize is how exact matches compare: case-insensitive, with runs of
// white space collapsed and trailing punctuation ignored.
func normalize(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimRight(s, "?!.。？！ ")
}

// decodeFile decodes one scenario-directory file into v: at most
// maxScenarioFileBytes, one YAML document, no field v does not know.
// Errors name the file.
func decodeFile(file string, data []byte, v any) error {
	if len(data) > maxScenarioFileBytes {
		return fmt.Errorf("%s: larger than %d bytes", file, maxScenarioFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: empty file", file)
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: more than one document", file)
	}
	return nil
}
