package external

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// maxListedTools bounds one MCP server's tool list.
const maxListedTools = validate.MaxTools

// MCPToolName is the toolrunner's name of tool of MCP server server.
func MCPToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// mcpTool is one tool of an MCP server. It calls whatever session of its
// server is live at the time of the call, so that a retry after a restart
// reaches the new process.
type mcpTool struct {
	src    *mcpSource
	remote string // the tool's name on the server
	spec   tool.Spec
}

// mcpTools turns a tools/list answer into tools, refusing those whose name or
// schema the toolrunner cannot publish.
func mcpTools(s *mcpSource, listed []*mcp.Tool) ([]tool.Tool, []refusal) {
	s.mu.RLock()
	version := s.version
	s.mu.RUnlock()
	specs, refused := mcpSpecs(s.cfg, s.name, version, listed)
	tools := make([]tool.Tool, 0, len(specs))
	for _, sp := range specs {
		tools = append(tools, &mcpTool{src: s, remote: sp.remote, spec: sp.spec})
	}
	return tools, refused
}

// remoteSpec is an MCP tool's spec and its name on the server.
type remoteSpec struct {
	remote string
	spec   tool.Spec
}

// mcpSpecs turns a tools/list answer of the server of cfg into specs,
// refusing those whose name or schema the toolrunner cannot publish.
func mcpSpecs(cfg MCPServerConfig, source, version string, listed []*mcp.Tool) ([]remoteSpec, []refusal) {
	var specs []remoteSpec
	var refused []refusal
	for _, t := range listed {
		if t == nil || !(len(cfg.Tools) == 0 || slices.Contains(cfg.Tools, t.Name)) {
			continue
		}
		name := MCPToolName(cfg.Name, t.Name)
		if !validName(name) {
			refused = append(refused, refusal{clip(name), fmt.Sprintf("not a valid tool name: %q must be at most %d characters of [A-Za-z0-9_-]", clip(name), validate.MaxToolNameLen)})
			continue
		}
		params, err := inputSchema(t.InputSchema)
		if err != nil {
			refused = append(refused, refusal{name, "inputSchema: " + err.Error()})
			continue
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		specs = append(specs, remoteSpec{remote: t.Name, spec: tool.Spec{
			Name:        name,
			Description: clipBytes(strings.ToValidUTF8(desc, "\uFFFD"), validate.MaxToolDescriptionBytes),
			Version:     version,
			Parameters:  params,
			ReadOnly:    t.Annotations != nil && t.Annotations.ReadOnlyHint,
			Timeout:     cfg.Timeout.Std(),
			Source:      source,
		}})
	}
	return specs, refused
}

// inputSchema re-encodes a tool's inputSchema, which MCP requires to be an
// object schema.
func inputSchema(schema any) (json.RawMessage, error) {
	if schema == nil {
		return emptyObjectSchema, nil
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("must be a JSON object")
	}
	if typ, ok := obj["type"]; ok && typ != "object" {
		return nil, fmt.Errorf(`"type" must be "object": tool arguments are a JSON object`)
	}
	return b, nil
}

// Spec implements tool.Tool.
func (t *mcpTool) Spec() tool.Spec { return t.spec }

// Execute implements tool.Tool: one tools/call on the live session.
func (t *mcpTool) Execute(ctx context.Context, call tool.Call) (tool.Result, error) {
	session := t.src.current()
	if session == nil {
		return tool.Result{}, unavailable(t.src.name)
	}
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.spec.Timeout)
		defer cancel()
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		return tool.Result{}, mcpError(ctx, t.src.cfg.Name, t.spec.ReadOnly, err)
	}
	return callResult(res)
}

// callResult maps a tools/call result. A result with isError is the tool's
// own failure (EXECUTION_ERROR, its text as the message). Otherwise the data
// is the structured content when there is some, else the content: one item
// as itself, several as a list. Text stays text; binary content (images,
// audio, blobs) is described, not inlined, since a model cannot read base64.
func callResult(res *mcp.CallToolResult) (tool.Result, error) {
	if res == nil {
		return tool.Result{}, &tool.Error{Type: typeDependency, Code: "MCP_PROTOCOL_ERROR", Message: "the MCP server returned no result"}
	}
	if res.IsError {
		msg := strings.TrimSpace(contentText(res.Content))
		if msg == "" {
			msg = "the MCP tool reported an error without a message"
		}
		return tool.Result{}, &tool.Error{Type: typeExecution, Code: "MCP_TOOL_ERROR", Message: clipMessage(msg)}
	}
	if res.StructuredContent != nil {
		return tool.Result{Data: tool.Generic(res.StructuredContent)}, nil
	}
	items := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		items = append(items, contentValue(c))
	}
	switch len(items) {
	case 0:
		return tool.Result{Data: nil}, nil
	case 1:
		return tool.Result{Data: items[0]}, nil
	}
	return tool.Result{Data: items}, nil
}

// contentText joins the text items of content, for error messages.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// contentValue maps one content item to a JSON-compatible value.
func contentValue(c mcp.Content) any {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return binaryItem("image", c.MIMEType, len(c.Data))
	case *mcp.AudioContent:
		return binaryItem("audio", c.MIMEType, len(c.Data))
	case *mcp.ResourceLink:
		m := map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name}
		if c.Description != "" {
			m["description"] = c.Description
		}
		if c.MIMEType != "" {
			m["mime_type"] = c.MIMEType
		}
		return m
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return map[string]any{"type": "resource"}
		}
		if r.Blob != nil {
			m := binaryItem("resource", r.MIMEType, len(r.Blob))
			m["uri"] = r.URI
			return m
		}
		m := map[string]any{"type": "resource", "uri": r.URI, "text": r.Text}
		if r.MIMEType != "" {
			m["mime_type"] = r.MIMEType
		}
		return m
	default:
		// A content type newer than this client: keep its JSON form.
		b, err := json.Marshal(c)
		if err != nil {
			return map[string]any{"type": "unknown"}
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return map[string]any{"type": "unknown"}
		}
		return v
	}
}

func binaryItem(kind, mime string, n int) map[string]any {
	return map[string]any{"type": kind, "mime_type": mime, "bytes": int64(n), "note": "binary content not shown"}
}

// clipBytes cuts s to at most max bytes at a rune boundary.
func clipBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
