package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Names of the memory tools.
const (
	MemorySearchTool = "memory_search"
	MemoryAddTool    = "memory_add"
)

// Limits of the memory tools' arguments.
const (
	MemoryQueryMaxBytes   = 4 << 10 // SearchRequest.query
	MemoryAddMaxBytes     = 8 << 10 // memory_add content
	MemorySearchDefault   = 10
	MemorySearchMax       = 50
	memorySummaryChars    = 200
	memoryRelationsShown  = 3
	memorySettingsTimeout = 3 * time.Second
)

// Defaults of [MemoryOptions].
const (
	DefaultMemorySettingsTTL     = 15 * time.Second
	DefaultMemorySettingsEntries = 10_000
	// A failed settings read is remembered briefly, so that a memory
	// service that is down is not asked again on every tool listing.
	memorySettingsErrorTTL = 3 * time.Second
)

// MemoryOptions configures the memory tools.
type MemoryOptions struct {
	// Client is the memory service; required.
	Client baagentv1.MemoryServiceClient
	// Logger receives the logs; nil uses slog.Default().
	Logger *slog.Logger
	// SettingsTTL is how long a tenant's tools_enabled switch is cached
	// (default 15 s): a switch changed in the API takes effect within it.
	SettingsTTL time.Duration
	// SettingsEntries bounds the tenants whose switch is cached (default
	// 10,000).
	SettingsEntries int
	// Now is the clock of the cache; nil is time.Now.
	Now func() time.Time
}

// MemorySource offers memory_search and memory_add to the tenants whose
// memory settings enable the tools (tools_enabled). It is a
// tool.TenantSource: every tenant sees its own answer.
type MemorySource struct {
	opts     MemoryOptions
	log      *slog.Logger
	settings *lru.Cache[string, memorySwitch]
	search   memorySearch
	add      memoryAdd
}

// memorySwitch is a cached tools_enabled answer; err is set when the
// memory service could not say.
type memorySwitch struct {
	enabled bool
	err     error
}

var _ tool.TenantSource = (*MemorySource)(nil)

// NewMemorySource returns the memory tools' source.
func NewMemorySource(opts MemoryOptions) *MemorySource {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SettingsTTL <= 0 {
		opts.SettingsTTL = DefaultMemorySettingsTTL
	}
	if opts.SettingsEntries <= 0 {
		opts.SettingsEntries = DefaultMemorySettingsEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &MemorySource{
		opts:     opts,
		log:      opts.Logger,
		settings: lru.New[string, memorySwitch](lru.Options{MaxEntries: opts.SettingsEntries, Now: opts.Now}),
		search:   memorySearch{opts.Client},
		add:      memoryAdd{opts.Client},
	}
}

// Name implements tool.Source.
func (*MemorySource) Name() string { return "builtin:memory" }

// Tools implements tool.Source: none for every tenant; see TenantTools.
func (*MemorySource) Tools() []tool.Tool { return nil }

// TenantTools implements tool.TenantSource: both tools when the tenant's
// tools_enabled is on, none when it is off or the memory service cannot
// say.
func (m *MemorySource) TenantTools(ctx context.Context, tenant string) []tool.Tool {
	if !m.enabled(ctx, tenant) {
		return nil
	}
	return []tool.Tool{m.add, m.search}
}

// TenantTool implements tool.TenantSource. A tenant whose memory tools are
// switched off gets a tool that says so (a call from an earlier listing).
func (m *MemorySource) TenantTool(ctx context.Context, tenant, name string) (tool.Tool, bool) {
	var t tool.Tool
	switch name {
	case MemorySearchTool:
		t = m.search
	case MemoryAddTool:
		t = m.add
	default:
		return nil, false
	}
	if !m.enabled(ctx, tenant) {
		return memoryOff{t.Spec()}, true
	}
	return t, true
}

// enabled reads the tenant's tools_enabled switch, cached.
func (m *MemorySource) enabled(ctx context.Context, tenant string) bool {
	if tenant == "" {
		return false
	}
	if sw, ok := m.settings.Get(tenant); ok {
		return sw.enabled
	}
	cctx, cancel := context.WithTimeout(ctx, memorySettingsTimeout)
	resp, err := m.opts.Client.GetMemorySettings(cctx, &baagentv1.GetMemorySettingsRequest{Tenant: tenant})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			level := slog.LevelWarn
			if status.Code(err) == codes.Unimplemented { // a memory service without the API: nothing to offer
				level = slog.LevelDebug
			}
			m.log.Log(ctx, level, "memory settings unavailable; memory tools not offered", "tenant", tenant, "error", err)
			m.settings.Put(tenant, memorySwitch{err: err}, 1, memorySettingsErrorTTL)
		}
		return false
	}
	on := resp.GetSettings().GetToolsEnabled()
	m.settings.Put(tenant, memorySwitch{enabled: on}, 1, m.opts.SettingsTTL)
	return on
}

// memoryOff is a memory tool of a tenant that switched the tools off.
type memoryOff struct{ spec tool.Spec }

func (t memoryOff) Spec() tool.Spec { return t.spec }

func (t memoryOff) Execute(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{}, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "MEMORY_TOOLS_DISABLED",
		"%s is switched off in this tenant's memory settings; answer without it", t.spec.Name)
}

// memorySearch is `memory_search {query, search_type, limit}`.
type memorySearch struct{ client baagentv1.MemoryServiceClient }

func (memorySearch) Spec() tool.Spec {
	s := spec(MemorySearchTool,
		"Search the organisation's long-term memory: the people, products, metrics and facts earlier runs and users "+
			"established, with how they relate. Use it before answering a question that may depend on what is already "+
			"known. search_type: hybrid (default; meaning, keywords and relations together), semantic (by meaning) or "+
			"keyword (exact words). Returns one line per entity: name, type, summary, strongest relations, community.",
		`{"type":"object","additionalProperties":false,"required":["query"],"properties":{
			"query":{"type":"string","minLength":1,"maxLength":4096,"description":"What to recall, in words"},
			"search_type":{"type":"string","enum":["hybrid","semantic","keyword"],"description":"hybrid (default), semantic or keyword"},
			"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Entities to return (default 10, at most 50)"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD)
	s.Timeout = 30 * time.Second
	return s
}

// SearchMode maps memory_search's search_type to the SearchRequest mode
// ("" is hybrid); ok is false for anything else.
func SearchMode(searchType string) (baagentv1.SearchMode, bool) {
	switch searchType {
	case "", "hybrid":
		return baagentv1.SearchMode_SEARCH_MODE_HYBRID, true
	case "semantic":
		return baagentv1.SearchMode_SEARCH_MODE_VECTOR, true
	case "keyword":
		return baagentv1.SearchMode_SEARCH_MODE_KEYWORD, true
	}
	return baagentv1.SearchMode_SEARCH_MODE_UNSPECIFIED, false
}

func (t memorySearch) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	query := strings.TrimSpace(argString(c.Args, "query"))
	if query == "" {
		return tool.Result{}, invalid("INVALID_QUERY", "query must not be empty")
	}
	if len(query) > MemoryQueryMaxBytes {
		return tool.Result{}, invalid("INVALID_QUERY", "query is %d bytes; the maximum is %d", len(query), MemoryQueryMaxBytes)
	}
	mode, ok := SearchMode(argString(c.Args, "search_type"))
	if !ok {
		return tool.Result{}, invalid("INVALID_SEARCH_TYPE", "search_type must be hybrid, semantic or keyword")
	}
	limit := argInt(c.Args, "limit", MemorySearchDefault, 1, MemorySearchMax)
	resp, err := t.client.Search(ctx, &baagentv1.SearchRequest{Tenant: c.Tenant, Query: query, Mode: mode, TopK: int32(limit)}) //nolint:gosec // at most 50
	if err != nil {
		return tool.Result{}, memoryError("search", err)
	}
	text := FormatHits(query, resp.GetHits())
	hits := make([]*baagentv1.SearchHit, 0, len(resp.GetHits()))
	for _, h := range resp.GetHits() {
		e := h.GetEntity()
		hits = append(hits, &baagentv1.SearchHit{
			Entity: &baagentv1.Entity{Id: e.GetId(), Name: e.GetName(), Type: e.GetType()},
			Score:  h.GetScore(),
		})
	}
	noun := "entities"
	if len(hits) == 1 {
		noun = "entity"
	}
	brief := fmt.Sprintf("Recalled %d %s for %q", len(hits), noun, oneLine(query, 60))
	return tool.Result{Data: tool.Document{Text: text, Brief: brief, Recall: &tool.Recall{Hits: hits}}}, nil
}

// FormatHits renders search hits for the model, one compact line each:
//
//  1. Software [Category] — Licences and subscriptions. Relations: SOLD_IN → EMEA; … Community: Product lines.
func FormatHits(query string, hits []*baagentv1.SearchHit) string {
	if len(hits) == 0 {
		return fmt.Sprintf("Memory has nothing about %q yet.", oneLine(query, 200))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Memory recall for %q (%d, best first):\n", oneLine(query, 200), len(hits))
	for i, h := range hits {
		e := h.GetEntity()
		fmt.Fprintf(&b, "%d. %s [%s]", i+1, oneLine(e.GetName(), 120), oneLine(e.GetType(), 40))
		if s := oneLine(e.GetSummary(), memorySummaryChars); s != "" {
			b.WriteString(" — ")
			b.WriteString(s)
		}
		var rels []string
		for _, r := range h.GetRelations() {
			if len(rels) == memoryRelationsShown {
				break
			}
			other, arrow := r.GetTargetId(), "→"
			if other == e.GetId() {
				other, arrow = r.GetSourceId(), "←"
			}
			name := h.GetRelatedNames()[other]
			if name == "" {
				name = other
			}
			rels = append(rels, fmt.Sprintf("%s %s %s", oneLine(r.GetType(), 40), arrow, oneLine(name, 80)))
		}
		if len(rels) > 0 {
			b.WriteString(" Relations: ")
			b.WriteString(strings.Join(rels, "; "))
			b.WriteString(".")
		}
		if c := h.GetCommunity(); c.GetName() != "" {
			b.WriteString(" Community: ")
			b.WriteString(oneLine(c.GetName(), 80))
			b.WriteString(".")
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// oneLine is s on one line (runs of whitespace as one space), cut at n
// runes with an ellipsis.
func oneLine(s string, n int) string {
	return cutRunes(strings.Join(strings.Fields(s), " "), n)
}

func cutRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// memoryAdd is `memory_add {content}`.
type memoryAdd struct{ client baagentv1.MemoryServiceClient }

func (memoryAdd) Spec() tool.Spec {
	s := spec(MemoryAddTool,
		"Remember a fact for later runs in the organisation's long-term memory (at most 8 KiB of text). Write it as "+
			"a self-contained statement naming the people, products and figures involved. Personal data is removed "+
			"before it is stored. It becomes searchable with memory_search shortly after.",
		`{"type":"object","additionalProperties":false,"required":["content"],"properties":{
			"content":{"type":"string","minLength":1,"maxLength":8192,"description":"The fact to remember"}}}`,
		false, baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD)
	s.Timeout = 30 * time.Second
	return s
}

// MemoryAddKey is the AddEpisode idempotency key of a memory_add call: a
// digest of where it was made and the call's own ids, so that a retry of
// the call (which keeps them) adds nothing twice.
func MemoryAddKey(c tool.Call) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{"memory_add", c.Tenant, c.ConversationID, c.RunID, c.ToolCallID, c.IdempotencyKey}, "\x00")))
	return "agent_" + hex.EncodeToString(sum[:24])
}

func (t memoryAdd) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	content := strings.TrimSpace(argString(c.Args, "content"))
	if content == "" {
		return tool.Result{}, invalid("INVALID_CONTENT", "content must not be empty")
	}
	if len(content) > MemoryAddMaxBytes {
		return tool.Result{}, invalid("INVALID_CONTENT", "content is %d bytes; the maximum is %d: remember one fact at a time", len(content), MemoryAddMaxBytes)
	}
	resp, err := t.client.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{
		Tenant: c.Tenant, Content: content, Source: baagentv1.EpisodeSource_EPISODE_SOURCE_AGENT,
		ConversationId: c.ConversationID, RunId: c.RunID, IdempotencyKey: MemoryAddKey(c),
	})
	if err != nil {
		return tool.Result{}, memoryError("add", err)
	}
	if resp.GetSkipped() {
		msg := "Not remembered: memory is switched off for this conversation or tenant."
		return tool.Result{Data: tool.Document{Text: msg, Brief: msg}}, nil
	}
	ep := resp.GetEpisode()
	text := fmt.Sprintf("Remembered as episode %s; its entities become searchable once it is processed.", ep.GetId())
	if n := ep.GetRedactions(); n > 0 {
		text += fmt.Sprintf(" %d span(s) of personal data or secrets were removed first.", n)
	}
	return tool.Result{Data: tool.Document{Text: text, Brief: "Remembered as " + ep.GetId()}}, nil
}

// memoryError is a failed memory call as a typed tool error: an
// unavailable or overloaded memory service is retryable.
func memoryError(op string, err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR, Code: "MEMORY_UNAVAILABLE",
			Message: fmt.Sprintf("memory %s failed: the memory service is unavailable (%s); try again later", op, st.Message()), Err: err}
	case codes.ResourceExhausted:
		return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT, Code: "MEMORY_BUSY",
			Message: fmt.Sprintf("memory %s failed: the memory service is busy (%s)", op, st.Message()), Err: err}
	case codes.InvalidArgument:
		return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, Code: "INVALID_ARGUMENTS",
			Message: fmt.Sprintf("memory %s refused the arguments: %s", op, st.Message()), Err: err}
	case codes.Canceled:
		return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, Code: "TIMEOUT",
			Message: fmt.Sprintf("memory %s was cut short", op), Err: err}
	}
	return &tool.Error{Type: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, Code: "MEMORY_FAILED",
		Message: fmt.Sprintf("memory %s failed: %s", op, st.Message()), Err: err}
}
