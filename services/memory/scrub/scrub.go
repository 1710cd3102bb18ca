// Package scrub removes personal data and secrets (email addresses, phone
// numbers, payment card numbers, API keys and tokens) from text before the
// memory service stores it.
//
// Scrub replaces each detected value with a typed placeholder:
//
//	[EMAIL]   e-mail addresses
//	[PHONE]   phone numbers: international (+CC …) and the common national
//	          formats (North American (555) 123-4567, trunk-prefixed 0… numbers
//	          such as 020 7946 0958, 030 1234567 or 01 23 45 67 89)
//	[CARD]    payment card numbers: 13–19 digits, optionally grouped by spaces
//	          or dashes, with a card-network prefix and a valid Luhn checksum
//	[SECRET]  API keys and tokens (OpenAI sk-…, Anthropic sk-ant-…, AWS
//	          AKIA…/ASIA…, GitHub ghp_/gho_/ghu_/ghs_/ghr_/github_pat_, Slack
//	          xox?-, Google AIza…), JWTs, Bearer credentials, the values of
//	          password=/api_key=/token: style assignments, and PEM private keys
//
// Detection is pattern based and errs on the side of redaction for secrets;
// for numbers it is careful not to take dates, amounts, order ids or SQL
// for phone or card numbers. Placeholders contain nothing any detector
// matches, so scrubbing is idempotent: Scrub(Scrub(x)) == Scrub(x).
package scrub

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The placeholders.
const (
	Email  = "[EMAIL]"
	Phone  = "[PHONE]"
	Card   = "[CARD]"
	Secret = "[SECRET]"
)

// maxPasses bounds the passes Scrub makes: a replacement can, rarely, make
// a new value appear (text on both sides of a removed value joining), so
// Scrub repeats until a pass finds nothing.
const maxPasses = 4

// Match is one detected value: Text[Start:End] is replaced by Placeholder.
type Match struct {
	Start, End  int
	Placeholder string
}

// detector finds values of one kind. find returns the byte ranges to
// replace (a detector may keep a prefix such as "password=" and replace
// only the value).
type detector struct {
	name        string
	placeholder string
	// need, when set, is a lower-case literal the text must contain
	// (case-insensitively) for the detector to run at all.
	need []string
	find func(s string) [][2]int
}

// Scrub returns text with every detected value replaced by its
// placeholder, and the number of replacements.
func Scrub(text string) (string, int) {
	total := 0
	for range maxPasses {
		out, n := scrubOnce(text)
		if n == 0 {
			return text, total
		}
		total += n
		text = out
	}
	return text, total
}

// Find lists what one pass of Scrub would replace in text, in order.
func Find(text string) []Match {
	var out []Match
	covered := spans{}
	lower := ""
	for _, d := range detectors {
		if len(d.need) > 0 {
			if lower == "" {
				lower = asciiLower(text)
			}
			ok := false
			for _, n := range d.need {
				if strings.Contains(lower, n) {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
		}
		// A detector's own ranges do not overlap and come in order; they
		// are checked against the earlier detectors' and merged in at once.
		var fresh [][2]int
		for _, r := range d.find(text) {
			if r[0] >= r[1] || covered.overlaps(r[0], r[1]) || len(fresh) > 0 && r[0] < fresh[len(fresh)-1][1] {
				continue
			}
			fresh = append(fresh, r)
			out = append(out, Match{Start: r[0], End: r[1], Placeholder: d.placeholder})
		}
		covered.merge(fresh)
	}
	slices.SortFunc(out, func(a, b Match) int { return a.Start - b.Start })
	return out
}

func scrubOnce(text string) (string, int) {
	ms := Find(text)
	if len(ms) == 0 {
		return text, 0
	}
	var b strings.Builder
	b.Grow(len(text))
	prev := 0
	for _, m := range ms {
		b.WriteString(text[prev:m.Start])
		b.WriteString(m.Placeholder)
		prev = m.End
	}
	b.WriteString(text[prev:])
	return b.String(), len(ms)
}

// spans is a set of disjoint byte ranges, sorted.
type spans struct{ r [][2]int }

// overlaps reports whether [a, b) overlaps a range of the set: the first
// range ending after a (ends are sorted too, the ranges being disjoint)
// must start at or after b.
func (s *spans) overlaps(a, b int) bool {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i][1] > a })
	return i < len(s.r) && s.r[i][0] < b
}

// merge adds sorted ranges that overlap neither the set nor each other.
func (s *spans) merge(rs [][2]int) {
	if len(rs) == 0 {
		return
	}
	out := make([][2]int, 0, len(s.r)+len(rs))
	i, j := 0, 0
	for i < len(s.r) || j < len(rs) {
		if j == len(rs) || i < len(s.r) && s.r[i][0] < rs[j][0] {
			out = append(out, s.r[i])
			i++
		} else {
			out = append(out, rs[j])
			j++
		}
	}
	s.r = out
}

// add inserts [a, b), which must not overlap the set.
func (s *spans) add(a, b int) {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i][0] >= a })
	s.r = slices.Insert(s.r, i, [2]int{a, b})
}

// detectors, in priority order: where two overlap, the earlier wins.
var detectors = []detector{
	{name: "pem", placeholder: Secret, need: []string{"-----begin"}, find: all(rePEM)},
	{name: "jwt", placeholder: Secret, need: []string{"eyj"}, find: all(reJWT)},
	{name: "vendor-key", placeholder: Secret, need: []string{"sk-", "akia", "asia", "gh", "github_pat_", "xox", "aiza"}, find: all(reVendorKey)},
	{name: "bearer", placeholder: Secret, need: []string{"bearer"}, find: findBearer},
	{name: "assignment", placeholder: Secret, need: []string{"pass", "pwd", "secret", "key", "token"}, find: findAssignment},
	{name: "email", placeholder: Email, need: []string{"@"}, find: findEmail},
	{name: "card", placeholder: Card, find: findCard},
	{name: "phone", placeholder: Phone, find: findPhone},
}

func all(re *regexp.Regexp) func(string) [][2]int {
	return func(s string) [][2]int {
		var out [][2]int
		for _, m := range re.FindAllStringIndex(s, -1) {
			out = append(out, [2]int{m[0], m[1]})
		}
		return out
	}
}

var (
	// A PEM private key block; an unterminated one is taken up to the end
	// of its base64 body.
	rePEM = regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[A-Za-z0-9+/=\s:,-]*)`)
	// A JWT: base64url header and payload (both JSON objects, so "eyJ"),
	// and a signature.
	reJWT = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)
	// Vendor keys with recognisable prefixes.
	reVendorKey = regexp.MustCompile(`\b(?:` +
		`sk-ant-[A-Za-z0-9_-]{20,}` + // Anthropic
		`|sk-[A-Za-z0-9_-]{20,}` + // OpenAI (sk-, sk-proj-, sk-svcacct-)
		`|(?:AKIA|ASIA)[0-9A-Z]{16}\b` + // AWS access key id
		`|gh[pousr]_[A-Za-z0-9]{30,}` + // GitHub tokens
		`|github_pat_[A-Za-z0-9_]{22,}` + // GitHub fine-grained
		`|xox[abposr]-[A-Za-z0-9-]{10,}` + // Slack
		`|AIza[0-9A-Za-z_-]{35}` + // Google API key
		`)`)
	reBearer = regexp.MustCompile(`(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{8,}=*)`)
	// key = value, key: value, "key": "value", key='value'.
	reAssignment = regexp.MustCompile(`^(?i)(?:password|passwd|pwd|passphrase|secret|client_secret|secret_key|api[_-]?key|apikey|api[_-]?token|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key|aws_secret_access_key|token)["']?[ \t]*[:=][ \t]*(?:"([^"\r\n]*)"|'([^'\r\n]*)'|([^\s"'&,;\[\]<>(){}]+))`)
	reEmail      = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b`)
	// Card candidates: 13–19 digits, groups separated by single spaces or
	// dashes; checked further in findCard.
	reCard = regexp.MustCompile(`\b[2-6]\d{3}(?:[ -]?\d){9,15}\b`)
	// Phone candidates, checked further in findPhone.
	rePhoneIntl     = regexp.MustCompile(`\+[1-9]\d{0,2}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,6}`)
	rePhoneNANP     = regexp.MustCompile(`(?:\b1[ .-])?(?:\([2-9]\d{2}\)[ ]?|\b[2-9]\d{2}[ .-])[2-9]\d{2}[ .-]\d{4}\b`)
	rePhoneTrunk    = regexp.MustCompile(`\b0[1-9]\d{0,4}(?:[ /-]\d{2,8}){1,3}\b`)
	rePhoneTrunkDot = regexp.MustCompile(`\b0[1-9](?:[ .]\d{2}){4}\b`)
)

func findBearer(s string) [][2]int {
	var out [][2]int
	for _, m := range reBearer.FindAllStringSubmatchIndex(s, -1) {
		v := s[m[2]:m[3]]
		// A credential has a digit or is long; "bearer instruments" is prose.
		if len(v) >= 20 || strings.ContainsAny(v, "0123456789") {
			out = append(out, [2]int{m[2], m[3]})
		}
	}
	return out
}

// assignmentStems start every key reAssignment knows; the pattern runs,
// anchored, only where one starts a word.
var assignmentStems = []string{"pass", "pwd", "secret", "client_secret", "api", "access", "auth", "refresh", "private", "aws_secret", "token"}

// maxAssignmentBytes bounds the text an anchored assignment match reads.
const maxAssignmentBytes = 1024

func findAssignment(s string) [][2]int {
	lower := asciiLower(s)
	var starts []int
	for _, stem := range assignmentStems {
		for from := 0; ; {
			i := strings.Index(lower[from:], stem)
			if i < 0 {
				break
			}
			p := from + i
			from = p + len(stem)
			if p == 0 || !isWordByte(s[p-1]) {
				starts = append(starts, p)
			}
		}
	}
	slices.Sort(starts)
	var out [][2]int
	end := 0
	for _, p := range starts {
		if p < end {
			continue
		}
		m := reAssignment.FindStringSubmatchIndex(s[p:min(len(s), p+maxAssignmentBytes)])
		if m == nil {
			continue
		}
		for g := 1; g <= 3; g++ {
			a, b := m[2*g], m[2*g+1]
			if a < 0 {
				continue
			}
			v := s[p+a : p+b]
			if strings.TrimSpace(v) == "" || isPlaceholder(v) {
				break
			}
			out = append(out, [2]int{p + a, p + b})
			break
		}
		end = p + m[1]
	}
	return out
}

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

// asciiLower lower-cases ASCII letters only, so that offsets into the
// result are offsets into s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func isPlaceholder(v string) bool {
	switch v {
	case Email, Phone, Card, Secret:
		return true
	}
	return false
}

func findEmail(s string) [][2]int {
	var out [][2]int
	for _, m := range reEmail.FindAllStringIndex(s, -1) {
		a := m[0]
		// The local part does not start with a dot.
		for a < m[1] && s[a] == '.' {
			a++
		}
		if s[a] == '@' {
			continue
		}
		out = append(out, [2]int{a, m[1]})
	}
	return out
}

// isAlnum reports whether b is an ASCII letter or digit.
func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// standalone reports whether s[a:b] is not part of a longer number or word:
// no letter, digit or digit-joining punctuation (".,") followed by a digit
// on either side.
func standalone(s string, a, b int) bool {
	if a > 0 {
		c := s[a-1]
		if isAlnum(c) || c == '_' || c == '+' {
			return false
		}
		if (c == '.' || c == ',' || c == '-' || c == '/' || c == ':') && a > 1 && isDigit(s[a-2]) {
			return false
		}
	}
	if b < len(s) {
		c := s[b]
		if isAlnum(c) || c == '_' {
			return false
		}
		if (c == '.' || c == ',' || c == '-' || c == '/' || c == ':') && b+1 < len(s) && isDigit(s[b+1]) {
			return false
		}
	}
	return true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func digits(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if isDigit(v[i]) {
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

// minChunkDigits is the fewest digits a phone number (8, international)
// or card number (13) has.
const minChunkDigits = 8

// numericChunks returns the maximal runs of digits and the characters
// phone and card numbers are written with (space + ( ) . - /) that hold
// at least minChunkDigits digits: only those can contain one, so the
// number patterns run on them rather than on the whole text.
func numericChunks(s string) [][2]int {
	var out [][2]int
	start, n := -1, 0
	for i := 0; i <= len(s); i++ {
		var c byte
		if i < len(s) {
			c = s[i]
		}
		switch {
		case i < len(s) && isDigit(c):
			if start < 0 {
				start = i
			}
			n++
		case i < len(s) && (c == ' ' || c == '+' || c == '(' || c == ')' || c == '.' || c == '-' || c == '/'):
			if start < 0 {
				start = i
			}
		default:
			if start >= 0 && n >= minChunkDigits {
				out = append(out, [2]int{start, i})
			}
			start, n = -1, 0
		}
	}
	return out
}

// findIn runs re over the numeric chunks of s, with offsets into s.
func findIn(re *regexp.Regexp, s string, chunks [][2]int) [][2]int {
	var out [][2]int
	for _, c := range chunks {
		for _, m := range re.FindAllStringIndex(s[c[0]:c[1]], -1) {
			out = append(out, [2]int{c[0] + m[0], c[0] + m[1]})
		}
	}
	return out
}

func findCard(s string) [][2]int {
	var out [][2]int
	for _, m := range findIn(reCard, s, numericChunks(s)) {
		v := s[m[0]:m[1]]
		d := digits(v)
		if len(d) < 13 || len(d) > 19 || !standalone(s, m[0], m[1]) || !consistentSeparators(v) || !cardPrefix(d) || !luhn(d) {
			continue
		}
		out = append(out, [2]int{m[0], m[1]})
	}
	return out
}

// consistentSeparators: a card number is written with one kind of
// separator (or none), in groups of at least 3 digits except the last.
func consistentSeparators(v string) bool {
	hasSpace, hasDash := strings.Contains(v, " "), strings.Contains(v, "-")
	if hasSpace && hasDash {
		return false
	}
	if !hasSpace && !hasDash {
		return true
	}
	sep := " "
	if hasDash {
		sep = "-"
	}
	groups := strings.Split(v, sep)
	for i, g := range groups {
		if len(g) < 3 && i != len(groups)-1 || len(g) > 8 {
			return false
		}
	}
	return true
}

// cardPrefix reports whether d starts like a number of a card network
// (Visa 4; Mastercard 51–55, 2221–2720; Amex 34, 37; Discover 6011, 644–649,
// 65; Diners 300–305, 36, 38; JCB 35; UnionPay 62; Maestro 50, 56–69).
func cardPrefix(d string) bool {
	switch d[0] {
	case '4', '5', '6':
		return true
	case '3':
		p := d[:2]
		return p == "34" || p == "37" || p == "35" || p == "36" || p == "38" || (p == "30" && d[2] <= '5')
	case '2':
		p4 := d[:4]
		return p4 >= "2221" && p4 <= "2720"
	}
	return false
}

// luhn reports whether the digits d pass the Luhn checksum.
func luhn(d string) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

func findPhone(s string) [][2]int {
	var found spans
	add := func(a, b int) {
		if !found.overlaps(a, b) {
			found.add(a, b)
		}
	}
	chunks := numericChunks(s)
	if strings.IndexByte(s, '+') >= 0 {
		for _, m := range findIn(rePhoneIntl, s, chunks) {
			// Drop a trailing separator the pattern may not have (it has
			// none) and check the digit count: E.164 allows at most 15, and
			// fewer than 8 is a short code or an amount (+15, +3.5).
			n := len(digits(s[m[0]:m[1]]))
			if n < 8 || n > 15 || !standalone(s, m[0], m[1]) || strings.Contains(s[m[0]:m[1]], ".") && !evenDots(s[m[0]:m[1]]) {
				continue
			}
			add(m[0], m[1])
		}
	}
	for _, m := range findIn(rePhoneNANP, s, chunks) {
		if standalone(s, m[0], m[1]) && uniformSeparators(s[m[0]:m[1]]) {
			add(m[0], m[1])
		}
	}
	for _, re := range []*regexp.Regexp{rePhoneTrunk, rePhoneTrunkDot} {
		for _, m := range findIn(re, s, chunks) {
			n := len(digits(s[m[0]:m[1]]))
			if n < 9 || n > 12 || !standalone(s, m[0], m[1]) {
				continue
			}
			add(m[0], m[1])
		}
	}
	return found.r
}

// evenDots: a dotted international number uses dots between every group
// (+44.20.7946.0958), not as a decimal point (+1.5).
func evenDots(v string) bool {
	return !strings.ContainsAny(v, " -")
}

// uniformSeparators rejects "555.123-4567"-style mixtures, which are more
// often ranges or codes than phone numbers; "(555) 123-4567" is allowed.
func uniformSeparators(v string) bool {
	if i := strings.IndexByte(v, ')'); i >= 0 {
		v = strings.TrimLeft(v[i+1:], " ")
	}
	seps := map[byte]bool{}
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' || v[i] == '.' || v[i] == '-' {
			seps[v[i]] = true
		}
	}
	return len(seps) <= 1
}
