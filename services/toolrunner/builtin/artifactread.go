package builtin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/artifact"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// maxArtifactPattern bounds artifact_read's pattern.
const maxArtifactPattern = 1024

// artifactRead is `artifact_read {artifact_id, offset, limit, pattern}`.
type artifactRead struct{ store ArtifactReader }

func (artifactRead) Spec() tool.Spec {
	return spec("artifact_read",
		"Read a stored tool result by its artifact id (artifact_...), as numbered lines: offset is the 0-based line "+
			"to start at, limit the number of lines (default and maximum 2000); pattern (a regular expression) "+
			"returns only matching lines. Only this conversation's artifacts can be read.",
		`{"type":"object","additionalProperties":false,"required":["artifact_id"],"properties":{
			"artifact_id":{"type":"string","pattern":"^artifact_[0-9a-f]{1,64}$","description":"The id from an earlier result, e.g. artifact_3fa2..."},
			"offset":{"type":"integer","minimum":0,"description":"0-based line to start at (default 0)"},
			"limit":{"type":"integer","minimum":1,"maximum":2000,"description":"Number of lines (default 2000)"},
			"pattern":{"type":"string","minLength":1,"maxLength":1024,"description":"Only lines matching this regular expression"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD)
}

func (t artifactRead) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	id := argString(c.Args, "artifact_id")
	if !artifact.ValidID(id) {
		return tool.Result{}, invalid("INVALID_ARTIFACT_ID", "artifact_id must be artifact_ followed by lowercase hex digits, as an earlier result gave it")
	}
	req := artifact.ReadRequest{
		Owner:  artifact.Owner{Tenant: c.Tenant, ConversationID: c.ConversationID},
		ID:     id,
		Offset: int64(argInt(c.Args, "offset", 0, 0, 1<<40)),
		Limit:  argInt(c.Args, "limit", truncate.DefaultReadLimit, 1, truncate.DefaultReadLimit),
	}
	if p := argString(c.Args, "pattern"); p != "" {
		if len(p) > maxArtifactPattern {
			return tool.Result{}, invalid("INVALID_REGEX", "pattern is longer than %d bytes", maxArtifactPattern)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return tool.Result{}, invalid("INVALID_REGEX", "pattern: %v", err)
		}
		req.Pattern = re
	}
	page, err := t.store.Read(req)
	if errors.Is(err, artifact.ErrNotFound) {
		return tool.Result{}, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, "ARTIFACT_NOT_FOUND",
			"%s does not exist in this conversation (it may have expired)", id)
	}
	if err != nil {
		return tool.Result{}, failed("ARTIFACT_READ_FAILED", "%s: %v", id, err)
	}
	var b strings.Builder
	for _, l := range page.Lines {
		fmt.Fprintf(&b, "%6d\t%s\n", l.Number, l.Text)
	}
	last := int64(0)
	if n := len(page.Lines); n > 0 {
		last = page.Lines[n-1].Number
	}
	switch {
	case page.CutByBytes:
		fmt.Fprintf(&b, "\n(Output truncated at %d bytes. Use 'offset' parameter to read beyond line %d)", truncate.MaxOutputBytes, page.NextOffset)
	case page.NextOffset >= 0:
		fmt.Fprintf(&b, "\n(Artifact has more lines. Use 'offset' parameter to read beyond line %d)", page.NextOffset)
	default:
		fmt.Fprintf(&b, "\n(End of artifact - total %d lines)", page.TotalLines)
	}
	brief := fmt.Sprintf("Read %s of %s (%s in total)", plural(len(page.Lines), "line"), id, plural(int(page.TotalLines), "line"))
	if req.Pattern != nil {
		brief = fmt.Sprintf("Found %s matching in %s up to line %d", plural(len(page.Lines), "line"), id, max(last, page.NextOffset))
	}
	return tool.Result{Data: tool.Document{Text: b.String(), Brief: brief}}, nil
}
