// Package complexity judges how complex a user's request is — SIMPLE,
// MODERATE or COMPLEX — from rules over its text, in English and Chinese,
// so that a run knows whether to make a work plan first (see
// docs/concepts/planning.md). It reads the text once, in linear time: no
// regular expressions, no backtracking.
package complexity

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Level is how complex a request is judged.
type Level int

// The levels, in increasing order.
const (
	// Simple: one or two steps, answered directly.
	Simple Level = iota + 1
	// Moderate: three to five steps; planning is offered.
	Moderate
	// Complex: six steps or more; planning is required.
	Complex
)

// String is the level's lowercase name.
func (l Level) String() string {
	switch l {
	case Simple:
		return "simple"
	case Moderate:
		return "moderate"
	case Complex:
		return "complex"
	}
	return "unknown"
}

// Thresholds of the score.
const (
	// LongRunes: a request longer than this (in characters) is long.
	LongRunes = 100
	// ModerateScore and ComplexScore are the lowest scores of the levels.
	ModerateScore = 2
	ComplexScore  = 4
)

// Result is a classification: the level, the score it came from and the
// signals that fired, in a fixed order (long, several_requests, analysis,
// time_span, entities).
type Result struct {
	Level   Level
	Score   int
	Signals []string
}

// Classify judges text. Every input, however long or malformed, gets a
// result.
func Classify(text string) Result {
	var sc scan
	sc.run(text)
	return sc.result()
}

// scan accumulates what the rules count.
type scan struct {
	runes     int
	requests  int             // explicit request connectors and extra questions
	questions int             // question marks
	analysis  map[string]bool // analysis keywords, by canonical name
	entities  map[entity]bool // entity types mentioned
	quarters  map[string]bool // q1..q4, h1/h2, 一季度…
	years     map[string]bool // four-digit years 1900-2099
	spans     int             // explicit spans (last 6 months, 同比…)
	words     []string        // the last few words, for phrases
}

// maxWords is how many previous words a phrase rule looks back on.
const maxWords = 3

func (sc *scan) run(text string) {
	sc.analysis = map[string]bool{}
	sc.entities = map[entity]bool{}
	sc.quarters = map[string]bool{}
	sc.years = map[string]bool{}
	sc.words = make([]string, 0, maxWords+1)
	var word strings.Builder
	flush := func() {
		if word.Len() == 0 {
			return
		}
		sc.word(word.String())
		word.Reset()
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		sc.runes++
		switch {
		case unicode.Is(unicode.Han, r):
			flush()
			i += sc.han(text[i:])
			continue
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			if word.Len() < maxWordBytes {
				word.WriteByte(byte(unicode.ToLower(r)))
			}
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if word.Len() < maxWordBytes {
				word.WriteRune(unicode.ToLower(r))
			}
		default:
			flush()
			sc.punct(r)
		}
		i += size
	}
	flush()
}

// maxWordBytes bounds one word (longer ones are cut, never looked up whole).
const maxWordBytes = 64

func (sc *scan) punct(r rune) {
	switch r {
	case '?', '？':
		sc.questions++
	case ';', '；':
		sc.requests++
	}
}

// word handles one lowercase word.
func (sc *scan) word(w string) {
	prev := func(k int) string { // k-th previous word, 1 = the one before
		if k > len(sc.words) {
			return ""
		}
		return sc.words[len(sc.words)-k]
	}
	switch {
	case connectors[w]:
		sc.requests++
	case w == "well" && prev(1) == "as": // "as well as": counted at "as"
	case w == "as" && prev(1) == "well" && prev(2) == "as":
		sc.requests++
	case w == "addition" && prev(1) == "in":
		sc.requests++
	}
	if a, ok := analysisWords[w]; ok {
		sc.analysis[a] = true
	}
	if e, ok := entityWords[w]; ok {
		sc.entities[e] = true
	}
	switch {
	case isQuarter(w):
		sc.quarters[w[:2]] = true
	case isYear(w):
		sc.years[w[:4]] = true
	case timeUnits[w] && isCount(prev(1)) && spanLead[prev(2)]:
		sc.spans++ // last 6 months, past three quarters
	case timeUnits[w] && spanLead[prev(1)]: // last quarter vs this quarter: one span each
		sc.quarters["rel:"+prev(1)+" "+w] = true
	case w == "year" && prev(1) == "over" && prev(2) == "year",
		w == "month" && prev(1) == "over" && prev(2) == "month",
		w == "quarter" && prev(1) == "over" && prev(2) == "quarter",
		w == "yoy" || w == "mom" || w == "qoq" || w == "ytd":
		sc.spans++
	}
	if len(sc.words) == maxWords {
		copy(sc.words, sc.words[1:])
		sc.words = sc.words[:maxWords-1]
	}
	sc.words = append(sc.words, w)
}

// han matches the Chinese rules at the start of s (which begins with a Han
// character) and returns how many bytes to advance: the whole keyword that
// matched, or the one character.
func (sc *scan) han(s string) int {
	r, size := utf8.DecodeRuneInString(s)
	for _, k := range hanKeywords[r] {
		if !strings.HasPrefix(s, k.text) {
			continue
		}
		switch k.kind {
		case hanRequest:
			sc.requests++
		case hanAnalysis:
			sc.analysis[k.canon] = true
		case hanEntity:
			sc.entities[k.entity] = true
		case hanSpan:
			sc.spans++
		case hanRecent:
			if n := hanSpanAfter(s[len(k.text):]); n > 0 {
				sc.spans++
				sc.runes += utf8.RuneCountInString(s[:len(k.text)+n]) - 1
				return len(k.text) + n
			}
		case hanQuarter:
			sc.quarters["zh:"+k.text] = true
		}
		sc.runes += utf8.RuneCountInString(k.text) - 1
		return len(k.text)
	}
	return size
}

// hanSpanAfter matches a count and a unit after 过去/最近/近 (6个月, 三年,
// 两个季度) and returns its length in bytes, 0 when there is none.
func hanSpanAfter(s string) int {
	i := 0
	digits := 0
	for i < len(s) && digits < 8 {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !(r >= '0' && r <= '9') && !strings.ContainsRune("一二两三四五六七八九十半", r) {
			break
		}
		i += size
		digits++
	}
	if digits == 0 {
		return 0
	}
	for _, p := range []string{" ", "个"} {
		if strings.HasPrefix(s[i:], p) {
			i += len(p)
		}
	}
	for _, u := range []string{"月", "年", "季度", "周", "星期", "天", "日"} {
		if strings.HasPrefix(s[i:], u) {
			return i + len(u)
		}
	}
	return 0
}

func isQuarter(w string) bool {
	if len(w) < 2 {
		return false
	}
	switch {
	case w[0] == 'q' && w[1] >= '1' && w[1] <= '4',
		w[0] == 'h' && (w[1] == '1' || w[1] == '2'):
	default:
		return false
	}
	// q3, q3fy26, q32026 are quarters; q5, h100 are not.
	rest := w[2:]
	return rest == "" || len(rest) == 2 && isDigits(rest) || len(rest) == 4 && isYear(rest) || strings.HasPrefix(rest, "fy")
}

func isYear(w string) bool {
	if len(w) != 4 || !isDigits(w) {
		return false
	}
	return w[:2] == "19" || w[:2] == "20"
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isCount reports whether w is a small count (6, twelve, several).
func isCount(w string) bool {
	if isDigits(w) && len(w) <= 3 {
		n, _ := strconv.Atoi(w)
		return n >= 2
	}
	return countWords[w]
}

// result scores the signals.
func (sc *scan) result() Result {
	res := Result{}
	add := func(points int, signal string) {
		if points > 0 {
			res.Score += points
			res.Signals = append(res.Signals, signal)
		}
	}
	if sc.runes > LongRunes {
		add(1, "long")
	}
	// Each question beyond the first is one more request.
	requests := sc.requests + max(0, sc.questions-1)
	switch {
	case requests >= 2:
		add(2, "several_requests")
	case requests == 1:
		add(1, "several_requests")
	}
	switch n := len(sc.analysis); {
	case n >= 2:
		add(2, "analysis")
	case n == 1:
		add(1, "analysis")
	}
	if sc.spans > 0 || len(sc.quarters) >= 2 || len(sc.years) >= 2 {
		add(1, "time_span")
	}
	if len(sc.entities) >= 3 {
		add(1, "entities")
	}
	switch {
	case res.Score >= ComplexScore:
		res.Level = Complex
	case res.Score >= ModerateScore:
		res.Level = Moderate
	default:
		res.Level = Simple
	}
	return res
}
