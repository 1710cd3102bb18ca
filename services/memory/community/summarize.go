package community

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/baagent/baagent/services/memory/internal/structured"
)

// SchemaCommunity names the structured output of a summary.
const SchemaCommunity = "memory_community"

// Defaults and limits of OpenAISummarizer.
const (
	DefaultSummaryTimeout = 60 * time.Second
	DefaultSummaryTokens  = 400
	DefaultMaxMembers     = 40
	DefaultMaxFacts       = 30
	maxNameRunes          = 120
	maxSummaryRunes       = 2000
	maxMemberRunes        = 300
	maxFactRunes          = 300
)

const communitySchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["name", "summary"],
  "properties": {
    "name": {"type": "string", "description": "A short name for the group (at most 8 words)."},
    "summary": {"type": "string", "description": "Two to four sentences on what the group is about and its key facts."}
  }
}`

const communityPrompt = `You name and summarise a group of related entities of a business-analytics knowledge graph. The user lists the members ("- Name (Type): summary") and, after "Facts:", facts among them. Give the group a short, specific name (at most 8 words) and a summary of two to four sentences saying what ties the members together, with the key figures of the facts. Use only what is given; never invent numbers or facts.`

// SummarizerConfig configures an OpenAISummarizer.
type SummarizerConfig struct {
	// BaseURL is the API root ("https://api.openai.com/v1"). Required.
	BaseURL string
	// APIKey is sent as a Bearer token when set.
	APIKey string
	// Model is the chat model. Required.
	Model string
	// Timeout bounds one call (DefaultSummaryTimeout).
	Timeout time.Duration
	// MaxTokens bounds the answer (DefaultSummaryTokens).
	MaxTokens int
	// MaxMembers and MaxFacts bound what the prompt lists
	// (DefaultMaxMembers, DefaultMaxFacts); the rest is counted, not shown.
	MaxMembers, MaxFacts int
	// HTTPClient sends the requests (a plain client when nil).
	HTTPClient *http.Client
}

// OpenAISummarizer writes community names and summaries with an
// OpenAI-compatible chat model and JSON-schema structured output.
type OpenAISummarizer struct {
	cfg SummarizerConfig
	llm *structured.Client
}

var _ Summarizer = (*OpenAISummarizer)(nil)

// NewOpenAISummarizer checks cfg and returns the summarizer.
func NewOpenAISummarizer(cfg SummarizerConfig) (*OpenAISummarizer, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultSummaryTimeout
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultSummaryTokens
	}
	if cfg.MaxMembers <= 0 {
		cfg.MaxMembers = DefaultMaxMembers
	}
	if cfg.MaxFacts <= 0 {
		cfg.MaxFacts = DefaultMaxFacts
	}
	llm, err := structured.New(structured.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model,
		Timeout: cfg.Timeout, MaxTokens: cfg.MaxTokens, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("community: SummarizerConfig.%w", err)
	}
	return &OpenAISummarizer{cfg: cfg, llm: llm}, nil
}

// Model is the configured model.
func (s *OpenAISummarizer) Model() string { return s.cfg.Model }

// Estimate is a conservative token cost of summarising members and facts
// (prompt text at 4 bytes a token, plus the whole answer budget), to
// reserve in a Budget before calling Summarize.
func (s *OpenAISummarizer) Estimate(members []Member, facts []string) int {
	return (len(communityPrompt)+len(s.userMessage(members, facts))+3)/4 + 20 + s.cfg.MaxTokens
}

func (s *OpenAISummarizer) userMessage(members []Member, facts []string) string {
	var b strings.Builder
	b.WriteString("Members:\n")
	for i, m := range members {
		if i == s.cfg.MaxMembers {
			fmt.Fprintf(&b, "(and %d more members)\n", len(members)-i)
			break
		}
		line := oneLine(m.Name)
		if m.Type != "" {
			line += " (" + oneLine(m.Type) + ")"
		}
		if sum := oneLine(m.Summary); sum != "" {
			line += ": " + sum
		}
		b.WriteString("- " + capRunes(line, maxMemberRunes) + "\n")
	}
	if len(facts) > 0 {
		b.WriteString("\nFacts:\n")
		for i, f := range facts {
			if i == s.cfg.MaxFacts {
				fmt.Fprintf(&b, "(and %d more facts)\n", len(facts)-i)
				break
			}
			b.WriteString("- " + capRunes(oneLine(f), maxFactRunes) + "\n")
		}
	}
	return b.String()
}

// Summarize asks the model for the community's name and summary. Errors
// are *Error, retryable when the model is unavailable.
func (s *OpenAISummarizer) Summarize(ctx context.Context, members []Member, facts []string) (Summary, error) {
	if len(members) == 0 {
		return Summary{}, &Error{Retryable: false, Msg: "a community needs members"}
	}
	a, err := s.llm.Call(ctx, structured.Schema{Name: SchemaCommunity, Description: "A community's name and summary.", JSON: json.RawMessage(communitySchema)},
		communityPrompt, s.userMessage(members, facts))
	tokens := a.PromptTokens + a.CompletionTokens
	if f := (*structured.Failure)(nil); errors.As(err, &f) {
		return Summary{Tokens: tokens}, &Error{Retryable: f.Retryable, Status: f.Status, Msg: f.Msg, Err: f.Err}
	}
	sum, err := ParseSummary(a.Content)
	sum.Tokens = tokens
	if err != nil {
		return sum, &Error{Msg: "the model's summary is not usable", Err: err}
	}
	return sum, nil
}

// ParseSummary decodes {"name": …, "summary": …}: both non-empty after
// trimming, control characters removed, the name capped at 120 runes and
// the summary at 2000.
func ParseSummary(content string) (Summary, error) {
	s := strings.TrimSpace(content)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	var w struct {
		Name    *string `json:"name"`
		Summary *string `json:"summary"`
	}
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		return Summary{}, fmt.Errorf("not the schema's JSON: %w", err)
	}
	if w.Name == nil || w.Summary == nil {
		return Summary{}, errors.New("name and summary are required")
	}
	out := Summary{Name: capRunes(oneLine(*w.Name), maxNameRunes), Summary: capRunes(oneLine(*w.Summary), maxSummaryRunes)}
	if out.Name == "" || out.Summary == "" {
		return Summary{}, errors.New("empty name or summary")
	}
	return out, nil
}

// Error is a failed summary.
type Error struct {
	// Retryable: the model is unavailable; try again later.
	Retryable bool
	Status    int
	Msg       string
	Err       error
}

func (e *Error) Error() string {
	s := "community: " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is a summary error worth retrying.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable
}

// oneLine replaces control characters (newlines included) by spaces and
// trims, so that listed items stay one line each.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s))
}

func capRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}
