package skills

import (
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// MaxTriggerTextBytes bounds MatchTriggersRequest.text: a run's input may
// be as long (1 MiB), so a caller can always pass the user's message whole.
const MaxTriggerTextBytes = validate.MaxRunInputBytes

func validateMatchTriggers(req *baagentv1.MatchTriggersRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	if req.GetText() == "" {
		e.Add("text", "required")
	} else {
		validate.Text(&e, "text", req.GetText(), MaxTriggerTextBytes)
	}
	return e.Err()
}

// MatchTriggers finds the skills a user message asks for: `/skill-name`
// (origin USER) and the skills' trigger phrases (origin TRIGGER), among the
// skills the tenant and project see, disable-model-invocation ones
// included. One match per skill; explicit requests first, then in the
// order they appear in the message.
func (s *Server) MatchTriggers(ctx context.Context, req *baagentv1.MatchTriggersRequest) (*baagentv1.MatchTriggersResponse, error) {
	if err := validateMatchTriggers(req); err != nil {
		return nil, s.rejected(ctx, "MatchTriggers", err)
	}
	view := s.snap.Load().view(req.GetTenant(), req.GetProject())
	return &baagentv1.MatchTriggersResponse{Matches: matchTriggers(view, req.GetText())}, nil
}

// matchTriggers implements MatchTriggers on a view ordered by name.
//
// An explicit request is `/name` at the start of the message or after a
// space or an opening bracket or quote, and not followed by a character
// that could continue the name (`docs/sales-report` and `/sales-reports`
// name nothing). A trigger phrase matches case-insensitively; where the
// phrase begins or ends with a letter or digit of a script written with
// spaces (Latin, Cyrillic, Greek, …) it must begin or end at a word
// boundary (`report` does not match `reporting`), while an edge in a script
// written without spaces (Han, Hiragana, Katakana, Hangul, Thai) matches as
// a substring.
func matchTriggers(view []*skill, text string) []*baagentv1.TriggerMatch {
	lower := strings.ToLower(text)
	byName := make(map[string]*skill, len(view))
	for _, sk := range view {
		byName[sk.name] = sk
	}
	var out []*baagentv1.TriggerMatch
	seen := map[string]bool{}
	for _, name := range explicitNames(lower) {
		if byName[name] != nil && !seen[name] {
			seen[name] = true
			out = append(out, &baagentv1.TriggerMatch{
				SkillName: name,
				Origin:    baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER,
				Matched:   "/" + name,
			})
		}
	}
	type hit struct {
		pos    int
		name   string
		phrase string
	}
	var hits []hit
	// Skills often share phrases ("report", "summary"): each distinct
	// phrase is looked for once.
	found := map[string]int{}
	for _, sk := range view {
		if seen[sk.name] {
			continue
		}
		best := hit{pos: -1}
		for _, t := range sk.triggers {
			lt := strings.ToLower(t)
			p, ok := found[lt]
			if !ok {
				p = findPhrase(lower, lt)
				found[lt] = p
			}
			if p >= 0 && (best.pos < 0 || p < best.pos) {
				best = hit{pos: p, name: sk.name, phrase: t}
			}
		}
		if best.pos >= 0 {
			hits = append(hits, best)
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.pos - b.pos })
	for _, h := range hits {
		out = append(out, &baagentv1.TriggerMatch{
			SkillName: h.name,
			Origin:    baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_TRIGGER,
			Matched:   h.phrase,
		})
	}
	return out
}

// explicitNames returns the names written as `/name` in the lowercased
// text, in order of appearance.
func explicitNames(lower string) []string {
	var out []string
	for i := 0; i < len(lower); i++ {
		if lower[i] != '/' {
			continue
		}
		if i > 0 {
			r, _ := utf8.DecodeLastRuneInString(lower[:i])
			if !unicode.IsSpace(r) && !strings.ContainsRune("([{\"'`«“‘", r) {
				continue
			}
		}
		j := i + 1
		for j < len(lower) && skillNameByte(lower[j]) {
			j++
		}
		if j < len(lower) && lower[j] == '/' {
			i = j - 1 // a path (`/data/sales-report/x`), not a request
			continue
		}
		name := strings.TrimRight(lower[i+1:j], "-")
		if name != "" && len(name) <= MaxNameChars {
			out = append(out, name)
		}
		i = j - 1
	}
	return out
}

func skillNameByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' }

// findPhrase returns the byte offset of the first match of phrase (both
// lowercased) in text, or -1.
func findPhrase(text, phrase string) int {
	if phrase == "" {
		return -1
	}
	first, _ := utf8.DecodeRuneInString(phrase)
	last, _ := utf8.DecodeLastRuneInString(phrase)
	needStart, needEnd := spacedWordRune(first), spacedWordRune(last)
	for off := 0; off <= len(text)-len(phrase); {
		i := strings.Index(text[off:], phrase)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(phrase)
		okStart := !needStart || i == 0 || !wordRune(lastRune(text[:i]))
		okEnd := !needEnd || end == len(text) || !wordRune(firstRune(text[end:]))
		if okStart && okEnd {
			return i
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		off = i + max(size, 1)
	}
	return -1
}

func firstRune(s string) rune { r, _ := utf8.DecodeRuneInString(s); return r }
func lastRune(s string) rune  { r, _ := utf8.DecodeLastRuneInString(s); return r }

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// spacedWordRune reports whether r is a letter or digit of a script that
// separates words with spaces, where a phrase must match whole words.
func spacedWordRune(r rune) bool {
	return wordRune(r) && !unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}
