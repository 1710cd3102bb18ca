package validate

import (
	"cmp"
	"errors"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Length limits of the identifier rules, in bytes (all identifier rules are
// ASCII-only, so bytes are characters).
const (
	MaxIDLen           = 128  // ID, RunID
	MaxTenantLen       = 64   // Tenant
	MaxSkillNameLen    = 64   // SkillName (Agent Skills standard)
	MaxToolNameLen     = 64   // ToolName, ToolPattern (OpenAI function names)
	MaxToolCallIDLen   = 256  // ToolCallID
	MaxModelLen        = 256  // Model
	MaxIdempotencyLen  = 256  // IdempotencyKey
	MaxPageTokenLen    = 1024 // PageToken
	MaxCursorLen       = 512  // Cursor
	MaxVersionLen      = 64   // Version
	MaxPathLen         = 1024 // RelativePath
	MaxArtifactHashLen = 64   // ArtifactID: hex digits after "artifact_"
)

// ArtifactPrefix starts every artifact id (`artifact_<hash>`).
const ArtifactPrefix = "artifact_"

// Rule is the shape of the single-string rules, for [Optional].
type Rule func(e *Errors, field, v string)

// Optional applies rule to v only when v is not empty: the field may be
// omitted, but when it is given it must be well-formed.
//
//	validate.Optional(e, "project", req.GetProject(), validate.ID)
func Optional(e *Errors, field, v string, rule Rule) {
	if v != "" {
		rule(e, field, v)
	}
}

// Required reports `required` when v is empty and `must not be blank` when v
// holds only whitespace.
func Required(e *Errors, field, v string) {
	switch {
	case v == "":
		e.Add(field, "required")
	case strings.TrimSpace(v) == "":
		e.Add(field, "must not be blank (only whitespace)")
	}
}

// UTF8 reports a value that is not valid UTF-8.
func UTF8(e *Errors, field, v string) {
	if !utf8.ValidString(v) {
		e.Add(field, "must be valid UTF-8")
	}
}

// MaxBytes reports a value longer than max bytes.
func MaxBytes(e *Errors, field, v string, max int) {
	if len(v) > max {
		e.Addf(field, "must be at most %d bytes, got %d", max, len(v))
	}
}

// Text checks free text that may be empty: valid UTF-8 and at most max bytes.
func Text(e *Errors, field, v string, max int) {
	UTF8(e, field, v)
	MaxBytes(e, field, v, max)
}

// RequiredText checks free text that must be given: not empty or blank, valid
// UTF-8 and at most max bytes.
func RequiredText(e *Errors, field, v string, max int) {
	Required(e, field, v)
	Text(e, field, v, max)
}

// ID checks a platform identifier (conversation_id, project, caller_id,
// activation_id, message ids, encoding names, ...): 1–128 characters of
// [A-Za-z0-9._:-], not starting with a dot. The rule keeps identifiers safe
// as file and directory names (no `/`, no `.` or `..`, no hidden files) and in
// logs and URLs without escaping.
func ID(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	if len(v) > MaxIDLen || v[0] == '.' || !allBytes(v, isIDByte) {
		e.Addf(field, "must be 1-%d characters of [A-Za-z0-9._:-], not starting with '.'", MaxIDLen)
	}
}

// Tenant checks a tenant name: 1–64 characters of [A-Za-z0-9_-]. A tenant is
// a NATS subject token (`baagent.<tenant>.run.…`) and a directory name
// (`tenants/<tenant>/`), so dots, wildcards and slashes are excluded.
func Tenant(e *Errors, field, v string) { token(e, field, v, MaxTenantLen) }

// RunID checks a run id: 1–128 characters of [A-Za-z0-9_-]. A run id is a
// NATS subject token (`….run.<run_id>.events`), so no dots.
func RunID(e *Errors, field, v string) { token(e, field, v, MaxIDLen) }

// SkillName checks an Agent Skills name: 1–64 lowercase letters, digits and
// hyphens, not starting or ending with a hyphen and without two hyphens in a
// row (`data-analysis`). It is also the skill's folder name.
func SkillName(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	ok := len(v) <= MaxSkillNameLen && v[0] != '-' && v[len(v)-1] != '-' &&
		!strings.Contains(v, "--") && allBytes(v, func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	})
	if !ok {
		e.Addf(field, "must be 1-%d lowercase letters, digits and single hyphens, not starting or ending with a hyphen", MaxSkillNameLen)
	}
}

// ToolName checks the name of a tool the platform defines or shows to the
// model (ToolSchema.name): `^[a-zA-Z0-9_-]{1,64}$`, the OpenAI function name
// rule (`file_read`, `mcp__github__search`).
func ToolName(e *Errors, field, v string) { token(e, field, v, MaxToolNameLen) }

// ToolPattern checks an allowed-tools entry: a tool name or a glob over tool
// names (`mcp__github__*`): 1–64 characters of [A-Za-z0-9_-*?].
func ToolPattern(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	if len(v) > MaxToolNameLen || !allBytes(v, func(c byte) bool { return isTokenByte(c) || c == '*' || c == '?' }) {
		e.Addf(field, "must be a tool name or glob: 1-%d characters of [A-Za-z0-9_-*?]", MaxToolNameLen)
	}
}

// ToolCallName checks a tool name as a model wrote it in a tool call: a
// [Name] (1–256 bytes of valid UTF-8 without control characters). It is
// deliberately lenient: a misspelled or unknown tool name is reported to the
// model as a NOT_FOUND tool result it can correct, not refused as a bad
// request.
func ToolCallName(e *Errors, field, v string) { Name(e, field, v) }

// ToolCallID checks a tool call id, which always comes from the model
// (`call_abc123`, `toolu_01A…`) and is passed through unchanged: 1–256 bytes
// of valid UTF-8 without whitespace or control characters.
func ToolCallID(e *Errors, field, v string) { opaque(e, field, v, MaxToolCallIDLen) }

// IdempotencyKey checks a client idempotency key: 1–256 bytes of valid UTF-8
// without whitespace or control characters.
func IdempotencyKey(e *Errors, field, v string) { opaque(e, field, v, MaxIdempotencyLen) }

// PageToken checks an opaque page token from a previous response: 1–1024
// bytes of valid UTF-8 without whitespace or control characters. Page tokens
// are optional: use it with [Optional].
func PageToken(e *Errors, field, v string) { opaque(e, field, v, MaxPageTokenLen) }

// Cursor checks an opaque event cursor (or `earliest`): 1–512 bytes of valid
// UTF-8 without whitespace or control characters.
func Cursor(e *Errors, field, v string) { opaque(e, field, v, MaxCursorLen) }

// Version checks a version string (`1.0.0`, `2.1.0+build.5`): 1–64 bytes of
// valid UTF-8 without whitespace or control characters.
func Version(e *Errors, field, v string) { opaque(e, field, v, MaxVersionLen) }

// Model checks a model name: 1–256 printable ASCII characters without spaces,
// which covers provider names such as `gpt-4o`, `claude-sonnet-4-5`,
// `Qwen/Qwen2.5-72B-Instruct`, `llama3.1:8b` and
// `anthropic.claude-3-sonnet-20240229-v1:0`.
func Model(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	if len(v) > MaxModelLen || !allBytes(v, func(c byte) bool { return c > ' ' && c < 0x7f }) {
		e.Addf(field, "must be 1-%d printable ASCII characters without spaces", MaxModelLen)
	}
}

// ArtifactID checks an artifact id: `artifact_` followed by 1–64 lowercase
// hexadecimal digits. Artifacts are referred to by id, never by path.
func ArtifactID(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	hash, ok := strings.CutPrefix(v, ArtifactPrefix)
	if !ok || hash == "" || len(hash) > MaxArtifactHashLen ||
		!allBytes(hash, func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }) {
		e.Addf(field, "must be %q followed by 1-%d lowercase hex digits", ArtifactPrefix, MaxArtifactHashLen)
	}
}

// RelativePath checks a path that must stay inside a root directory (a skill
// resource, an artifact namespace): 1–1024 bytes of valid UTF-8, slash
// separated, not absolute, with no backslash, no control characters, no empty
// segment and no `.` or `..` segment (`references/guide.md`).
func RelativePath(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	bad := len(v) > MaxPathLen || !utf8.ValidString(v) ||
		strings.IndexFunc(v, unicode.IsControl) >= 0 || strings.ContainsRune(v, '\\')
	if !bad {
		for seg := range strings.SplitSeq(v, "/") {
			if seg == "" || seg == "." || seg == ".." {
				bad = true
				break
			}
		}
	}
	if !bad && len(v) >= 2 && v[1] == ':' { // Windows drive letter (`C:`)
		bad = true
	}
	if bad {
		e.Addf(field, "must be a relative path of at most %d bytes: no leading '/', no '\\', no empty, '.' or '..' segments", MaxPathLen)
	}
}

// Regexp checks an optional regular expression (RE2 syntax, as Go's regexp
// package accepts): at most max bytes and compilable. Empty is accepted.
func Regexp(e *Errors, field, v string, max int) {
	if v == "" {
		return
	}
	if len(v) > max {
		e.Addf(field, "must be at most %d bytes, got %d", max, len(v))
		return
	}
	if !utf8.ValidString(v) {
		e.Add(field, "must be valid UTF-8")
		return
	}
	if _, err := regexp.Compile(v); err != nil {
		// The syntax error code names the problem (`missing closing )`)
		// without echoing the whole expression back.
		msg := err.Error()
		if se, ok := errors.AsType[*syntax.Error](err); ok {
			msg = string(se.Code)
		}
		e.Addf(field, "must be a valid regular expression (RE2 syntax): %s", msg)
	}
}

// Enum checks an enum value against the generated name map (for example
// baagentv1.Role_name): numbers the contract does not define are rejected,
// and so is the zero UNSPECIFIED value unless allowUnspecified.
func Enum[T ~int32](e *Errors, field string, v T, names map[int32]string, allowUnspecified bool) {
	n := int32(v)
	if n == 0 && !allowUnspecified {
		e.Addf(field, "required: must be one of %s", enumNames(names, false))
		return
	}
	if _, ok := names[n]; !ok {
		e.Addf(field, "unknown value %d: must be one of %s", n, enumNames(names, allowUnspecified))
	}
}

// Range checks lo <= v <= hi. NaN is always out of range.
func Range[T cmp.Ordered](e *Errors, field string, v, lo, hi T) {
	if !(v >= lo && v <= hi) { // written so that NaN fails
		e.Addf(field, "must be between %v and %v, got %v", lo, hi, v)
	}
}

// NonNegative checks v >= 0.
func NonNegative[T ~int32 | ~int64](e *Errors, field string, v T) {
	if v < 0 {
		e.Addf(field, "must not be negative, got %d", v)
	}
}

// PageSize checks a page size: 0 (the RPC's default) up to max. A larger
// value is refused rather than silently shortened.
func PageSize(e *Errors, field string, v, max int32) {
	if v < 0 || v > max {
		e.Addf(field, "must be between 0 and %d (0 uses the default), got %d", max, v)
	}
}

// MaxItems checks that a repeated field has at most max elements.
func MaxItems(e *Errors, field string, n, max int) {
	if n > max {
		e.Addf(field, "must have at most %d items, got %d", max, n)
	}
}

// Timestamp checks an optional timestamp: when set it must be a valid
// google.protobuf.Timestamp (years 1–9999, nanos in range).
func Timestamp(e *Errors, field string, ts *timestamppb.Timestamp) {
	if ts == nil {
		return
	}
	if err := ts.CheckValid(); err != nil {
		e.Add(field, "must be a valid timestamp between years 1 and 9999")
	}
}

// token checks 1–max characters of [A-Za-z0-9_-]: no dots, wildcards or
// slashes, so the value is safe as a NATS subject token and a file name.
func token(e *Errors, field, v string, max int) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	if len(v) > max || !allBytes(v, isTokenByte) {
		e.Addf(field, "must be 1-%d characters of [A-Za-z0-9_-]", max)
	}
}

// opaque checks an opaque token: 1–max bytes of valid UTF-8 without
// whitespace or control characters.
func opaque(e *Errors, field, v string, max int) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	if len(v) > max || !utf8.ValidString(v) ||
		strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		e.Addf(field, "must be 1-%d bytes of valid UTF-8 without whitespace or control characters", max)
	}
}

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// isTokenByte is [A-Za-z0-9_-].
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// isIDByte is [A-Za-z0-9._:-].
func isIDByte(c byte) bool { return isTokenByte(c) || c == '.' || c == ':' }

// enumNames lists the names of an enum's values in numeric order, without the
// zero value unless withZero.
func enumNames(names map[int32]string, withZero bool) string {
	nums := make([]int32, 0, len(names))
	for n := range names {
		if n != 0 || withZero {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	out := make([]string, len(nums))
	for i, n := range nums {
		out[i] = names[n]
	}
	return strings.Join(out, ", ")
}
