package toolrunner

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/baagent/baagent/core/toolerror"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Formatting limits of the output levels (docs/concepts/output-levels.md),
// in characters.
const (
	briefTextChars    = 100
	standardTextChars = 500
	standardListItems = 3
	summaryTextChars  = 200
	summaryTopKeys    = 10
)

// rendered is a tool result prepared for the observation.
type rendered struct {
	// observation at the requested level, before artifacts and truncation.
	observation string
	// complete reports that the observation holds all of the data.
	complete bool
	// content is the complete data as an artifact stores it: text as is,
	// anything else as indented JSON (which artifact_read can page).
	content []byte
	// summary is the result's data_summary.
	summary string
}

// render formats data at level: a tool.Document by its own renderings, any
// other value by the generic rules for lists, objects and text.
func render(data any, level baagentv1.OutputLevel) rendered {
	if d, ok := data.(tool.Document); ok {
		r := rendered{content: []byte(d.Text), summary: d.Summary}
		if r.summary == "" {
			r.summary = d.Brief
		}
		switch level {
		case baagentv1.OutputLevel_OUTPUT_LEVEL_BRIEF:
			r.observation, r.complete = d.Brief, d.Brief == d.Text
		default:
			r.observation, r.complete = d.Text, true
		}
		return r
	}
	data = tool.Generic(data)
	r := rendered{summary: summarize(data)}
	if s, ok := data.(string); ok {
		r.content = []byte(s)
	} else {
		r.content = jsonIndent(data)
	}
	switch level {
	case baagentv1.OutputLevel_OUTPUT_LEVEL_BRIEF:
		r.observation, r.complete = formatBrief(data)
	case baagentv1.OutputLevel_OUTPUT_LEVEL_FULL:
		r.observation, r.complete = string(r.content), true
	default:
		r.observation, r.complete = formatStandard(data)
	}
	return r
}

// formatBrief is BRIEF: key facts only.
func formatBrief(data any) (string, bool) {
	switch d := data.(type) {
	case []any:
		return fmt.Sprintf("Found %d items", len(d)), len(d) == 0
	case map[string]any:
		if ok, has := d["success"]; has {
			status := "Failed"
			if ok == true {
				status = "Success"
			}
			msg, _ := d["message"].(string)
			if msg == "" {
				msg = "Operation completed"
			}
			return status + ": " + msg, false
		}
		return fmt.Sprintf("Result has %d fields", len(d)), len(d) == 0
	}
	return cutChars(scalar(data), briefTextChars)
}

// formatStandard is STANDARD: the first three items of a list
// and the count, an object as indented JSON cut at 500 characters, text cut
// at 500 characters.
func formatStandard(data any) (string, bool) {
	switch d := data.(type) {
	case []any:
		var b strings.Builder
		fmt.Fprintf(&b, "Found %d items:", len(d))
		for _, item := range d[:min(len(d), standardListItems)] {
			b.WriteString("\n  - ")
			b.WriteString(compact(item))
		}
		if len(d) > standardListItems {
			fmt.Fprintf(&b, "\n  ... and %d more", len(d)-standardListItems)
		}
		return b.String(), len(d) <= standardListItems
	case map[string]any:
		return cutChars(string(jsonIndent(d)), standardTextChars)
	}
	return cutChars(scalar(data), standardTextChars)
}

// summarize is the data_summary of data.
func summarize(data any) string {
	switch d := data.(type) {
	case []any:
		keys := "N/A"
		if len(d) > 0 {
			if m, ok := d[0].(map[string]any); ok {
				keys = "[" + strings.Join(sortedKeys(m, len(m)), ", ") + "]"
			}
		}
		return fmt.Sprintf("List with %d items. First item keys: %s", len(d), keys)
	case map[string]any:
		return fmt.Sprintf("Dictionary with %d keys. Top keys: %s", len(d), strings.Join(sortedKeys(d, summaryTopKeys), ", "))
	}
	s, _ := cutChars(scalar(data), summaryTextChars)
	return s
}

func sortedKeys(m map[string]any, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[:min(n, len(keys))]
}

// scalar is the text form of a value: a string as is, anything else as
// compact JSON.
func scalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return compact(v)
}

func compact(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonIndent(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return []byte(fmt.Sprint(v))
	}
	return b
}

// cutChars keeps the first n characters of s; the bool reports that
// nothing was cut.
func cutChars(s string, n int) (string, bool) {
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s, true
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], false
		}
		i++
	}
	return s, true
}

// artifactObservation is the observation for stored data (docs/concepts/artifacts.md): the id
// and a summary, never a path.
func artifactObservation(id, summary string) string {
	return "Data stored as artifact: " + id + "\n\n" +
		"Large dataset available for subsequent tool access.\n\n" +
		"To access this data, call artifact_read with this artifact_id (offset and limit page it by lines; pattern filters lines).\n\n" +
		"Data summary: " + summary
}

// errorObservation is the standard failure observation of r
// (docs/concepts/errors-and-retries.md).
func errorObservation(r *baagentv1.ToolExecutionResult) string {
	return toolerror.Observation(r.GetToolCallId(), r.GetErrorType(), r.GetErrorCode(), r.GetErrorMessage())
}
