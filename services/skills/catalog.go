package skills

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The level-1 catalog is the `<available_skills>` block (docs/concepts/skills.md),
// one line per skill with its layer:
//
//	<available_skills>
//	<skill name="sales-analysis" layer="system">Analyses sales tables with SQL…</skill>
//	<skill name="acme-glossary" layer="tenant"/>
//	<note>…</note>
//	</available_skills>
//
// When it does not fit the caller's token budget it shrinks in this order,
// and says so in a <note> and in the response counts; a skill is never
// dropped silently:
//
//  1. Every description is cut to a common maximum length, as long as
//     possible, at a word boundary and ending in "…": the longest
//     descriptions are shortened first, and none is cut below
//     minDescriptionChars.
//  2. Skills are listed by name only, system skills first, then tenant, then
//     project skills (the more specific a skill, the longer it keeps its
//     description), each layer from the end of the alphabet.
//  3. Skills are left out in the same order; the note says how many.
//
// If not even the note fits, GetCatalog fails with ResourceExhausted.
const (
	catalogOpen  = "<available_skills>"
	catalogClose = "</available_skills>"
	// minDescriptionChars is the shortest a description is cut to before
	// skills lose their descriptions altogether: below it a description
	// no longer tells the model when to use the skill.
	minDescriptionChars = 60
	// maxPlanRounds bounds re-planning when the model's tokenizer counts
	// more than the estimate the plan was made with.
	maxPlanRounds = 8
)

var xmlText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// catalogLine renders a skill's full catalog entry. Descriptions written as
// YAML block scalars span lines; the catalog keeps one skill per line.
func catalogLine(name, layer, description string) string {
	return skillLine(name, layer, strings.Join(strings.Fields(description), " "))
}

func skillLine(name, layer, desc string) string {
	if desc == "" {
		return `<skill name="` + name + `" layer="` + layer + `"/>`
	}
	return `<skill name="` + name + `" layer="` + layer + `">` + xmlText.Replace(desc) + `</skill>`
}

// catalogSkills are the skills of a view the catalog offers the model: a
// skill with disable-model-invocation is left out, since only the user or
// a trigger may activate it (ListSkills still lists it).
func catalogSkills(view []*skill) []*skill {
	out := make([]*skill, 0, len(view))
	for _, sk := range view {
		if !sk.disableModelInvocation {
			out = append(out, sk)
		}
	}
	return out
}

// catalogItem is one skill while the catalog is planned.
type catalogItem struct {
	name, layer string
	desc        string // whitespace collapsed, not escaped
	descChars   int
	// rank is the position in the name-only / omission order (0 first).
	rank int
}

// catalogPlan is how each item is shown: its description cut at cap runes,
// by name only, or left out.
type catalogPlan struct {
	cap      int
	nameOnly int // the first nameOnly items in rank order are name only
	omitted  int // of which the first omitted are left out
}

// catalogResult is a rendered catalog.
type catalogResult struct {
	text                         string
	tokens                       int
	listed, shortened, nameOnlyN int
	omittedN                     int
}

// buildCatalog renders the catalog of skills (ordered by name) within budget
// tokens as counted by count (0 = no limit).
func buildCatalog(ctx context.Context, skills []*skill, budget int, count func(context.Context, string) (int, error)) (*catalogResult, error) {
	if len(skills) == 0 {
		return &catalogResult{}, nil
	}
	items := rankItems(skills)
	full := catalogPlan{cap: maxDescChars(items)}
	res := render(items, full)
	n, err := count(ctx, res.text)
	if err != nil {
		return nil, err
	}
	res.tokens = n
	if budget <= 0 || n <= budget {
		return res, nil
	}
	// Plan with the local estimate scaled to the model's tokenizer, then
	// check the real count; re-plan with a tighter target while the
	// tokenizer disagrees.
	ratio := float64(n) / float64(max(1, EstimateTokens(res.text)))
	target := float64(budget)
	for range maxPlanRounds {
		plan, ok := planCatalog(items, int(target/ratio))
		if !ok {
			break
		}
		res = render(items, plan)
		if n, err = count(ctx, res.text); err != nil {
			return nil, err
		}
		res.tokens = n
		if n <= budget {
			return res, nil
		}
		target = target * float64(budget) / float64(n) * 0.95
	}
	return nil, status.Errorf(codes.ResourceExhausted,
		"token_budget %d is too small for a catalog of %d skills: even a note saying they are left out does not fit", budget, len(skills))
}

// rankItems prepares the items and their name-only order: system before
// tenant before project, each layer from the end of the alphabet.
func rankItems(skills []*skill) []catalogItem {
	items := make([]catalogItem, len(skills))
	r := 0
	for _, layer := range []string{"system", "tenant", "project"} {
		for i := len(skills) - 1; i >= 0; i-- {
			if scopeName(skills[i].scope) != layer {
				continue
			}
			d := catalogDescription(skills[i])
			items[i] = catalogItem{name: skills[i].name, layer: layer, desc: d, descChars: utf8.RuneCountInString(d), rank: r}
			r++
		}
	}
	return items
}

func maxDescChars(items []catalogItem) int {
	m := 0
	for _, it := range items {
		m = max(m, it.descChars)
	}
	return m
}

// planCatalog finds the plan that keeps the most text within target
// estimated tokens, following the order documented above.
func planCatalog(items []catalogItem, target int) (catalogPlan, bool) {
	cost := func(p catalogPlan) int { return EstimateTokens(render(items, p).text) }
	hi := maxDescChars(items)
	lo := min(minDescriptionChars, hi)
	if cost(catalogPlan{cap: lo}) <= target {
		// Largest cap that fits: cost grows with the cap.
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if cost(catalogPlan{cap: mid}) <= target {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return catalogPlan{cap: lo}, true
	}
	// Name only, then left out, one skill at a time in rank order. The
	// search is binary since the cost falls as more skills go.
	search := func(mk func(k int) catalogPlan) (catalogPlan, bool) {
		lo, hi := 1, len(items)
		if cost(mk(hi)) > target {
			return mk(hi), false
		}
		for lo < hi {
			mid := (lo + hi) / 2
			if cost(mk(mid)) <= target {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return mk(lo), true
	}
	capMin := min(minDescriptionChars, maxDescChars(items))
	if p, ok := search(func(k int) catalogPlan { return catalogPlan{cap: capMin, nameOnly: k} }); ok {
		return p, true
	}
	return search(func(k int) catalogPlan { return catalogPlan{cap: capMin, nameOnly: len(items), omitted: k} })
}

// render writes the catalog for a plan.
func render(items []catalogItem, p catalogPlan) *catalogResult {
	var b strings.Builder
	res := &catalogResult{}
	b.WriteString(catalogOpen)
	b.WriteByte('\n')
	for _, it := range items {
		switch {
		case it.rank < p.omitted:
			res.omittedN++
			continue
		case it.rank < p.nameOnly:
			res.nameOnlyN++
			b.WriteString(skillLine(it.name, it.layer, ""))
		case it.descChars > p.cap:
			res.shortened++
			b.WriteString(skillLine(it.name, it.layer, shorten(it.desc, p.cap)))
		default:
			b.WriteString(skillLine(it.name, it.layer, it.desc))
		}
		res.listed++
		b.WriteByte('\n')
	}
	if note := catalogNote(res); note != "" {
		b.WriteString(note)
		b.WriteByte('\n')
	}
	b.WriteString(catalogClose)
	res.text = b.String()
	return res
}

// catalogNote tells the model what was cut, so a shortened catalog is never
// mistaken for the whole one.
func catalogNote(r *catalogResult) string {
	var parts []string
	if r.shortened > 0 {
		parts = append(parts, plural(r.shortened, "description is", "descriptions are")+" shortened")
	}
	if r.nameOnlyN > 0 {
		parts = append(parts, plural(r.nameOnlyN, "skill is", "skills are")+" listed by name only")
	}
	if r.omittedN > 0 {
		parts = append(parts, plural(r.omittedN, "skill is", "skills are")+" not listed")
	}
	if len(parts) == 0 {
		return ""
	}
	return "<note>To fit the context budget, " + strings.Join(parts, ", ") +
		". Activating a skill gives its full instructions.</note>"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shorten cuts s to at most limit runes including the trailing "…", at the
// last word boundary when one is near.
func shorten(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit <= 1 {
		return "…"
	}
	end, n := len(s), 0
	for i := range s {
		if n == limit-1 {
			end = i
			break
		}
		n++
	}
	t := s[:end]
	if sp := strings.LastIndexByte(t, ' '); sp > len(t)*3/4 {
		t = t[:sp]
	}
	return strings.TrimRight(t, " ,;:.-") + "…"
}
