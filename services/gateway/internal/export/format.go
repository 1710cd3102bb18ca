// Package export turns a run's stored events (baagentv1.Event, in seq
// order) into a document a user can download: a Claude content-block
// transcript, an OpenAI Chat Completions message list, or the events
// themselves as JSON Lines in the shape the event streams send. A
// conversation's export is its runs' events one run after the other, fed to
// one Writer. The conversion is streaming: a Writer holds at most the
// assistant turn in progress (and, for claude, one message to merge with
// the next), never the document. See docs/concepts/export.md.
package export

import (
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Content types of the formats.
const (
	ContentTypeJSON  = "application/json"
	ContentTypeJSONL = "application/x-ndjson"
)

// ParseFormat reads a format as the HTTP API and the CLI take it: claude,
// openai or events, or the enum's name (EXPORT_FORMAT_CLAUDE).
func ParseFormat(s string) (baagentv1.ExportFormat, bool) {
	if v, ok := baagentv1.ExportFormat_value[s]; ok && v != 0 {
		return baagentv1.ExportFormat(v), true
	}
	if s == strings.ToLower(s) {
		if v, ok := baagentv1.ExportFormat_value["EXPORT_FORMAT_"+strings.ToUpper(s)]; ok && v != 0 {
			return baagentv1.ExportFormat(v), true
		}
	}
	return baagentv1.ExportFormat_EXPORT_FORMAT_UNSPECIFIED, false
}

// Valid reports whether f is a format a Writer produces.
func Valid(f baagentv1.ExportFormat) bool {
	switch f {
	case baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS:
		return true
	}
	return false
}

// Name is the short lowercase name of f (claude, openai, events), "" for
// a format that is not Valid.
func Name(f baagentv1.ExportFormat) string {
	if !Valid(f) {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(f.String(), "EXPORT_FORMAT_"))
}

// ContentType is the MIME type of a document in format f.
func ContentType(f baagentv1.ExportFormat) string {
	if f == baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS {
		return ContentTypeJSONL
	}
	return ContentTypeJSON
}

// Filename is the suggested file name of an export of the run or
// conversation id (kind "run" or "conversation") in format f, e.g.
// run-<id>.claude.json or conversation-<id>.events.jsonl. Characters
// other than letters, digits, '-', '_' and '.' become '_'.
func Filename(kind, id string, f baagentv1.ExportFormat) string {
	ext := ".json"
	if f == baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS {
		ext = ".jsonl"
	}
	safe := []byte(id)
	for i, c := range safe {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			safe[i] = '_'
		}
	}
	return kind + "-" + string(safe) + "." + Name(f) + ext
}
