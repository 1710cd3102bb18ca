// Package validate is the edge validation shared by every service: small rule
// functions that check one request field each and collect violations in an
// [Errors], which turns them into a gRPC InvalidArgument status naming every
// offending field.
//
// It holds no business logic: a rule only decides whether a value is
// acceptable input for the contract in proto/baagent/v1, never what it means.
//
// Field paths use the proto field names, dotted for nested messages and
// indexed for repeated fields (`spec.input`, `messages[3].role`,
// `spec.labels["team"]`), so a client can find the field in the contract.
//
// Conventions:
//   - String rules that check a format (ID, Tenant, SkillName, ...) treat the
//     empty string as missing and report "required". For an optional field,
//     wrap the rule in [Optional].
//   - Every string rule rejects invalid UTF-8.
//   - Numeric rules reject NaN and infinities.
package validate

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxViolations is how many violations an [Errors] keeps; further ones are
// counted and summarised as "and N more" so that a pathological request
// cannot produce an unbounded error.
const MaxViolations = 32

// Limits on the text of one violation. Field paths and descriptions are cut
// (at a UTF-8 boundary) so that a hostile field name, such as a huge map key,
// cannot blow up the status message.
const (
	maxFieldBytes       = 256
	maxDescriptionBytes = 512
)

// Errors collects field violations for one request. The zero value is ready
// to use. It is not safe for concurrent use.
type Errors struct {
	violations []*errdetails.BadRequest_FieldViolation
	dropped    int
}

// Add records that field (a proto field path such as `messages[3].role`) is
// invalid, with a description a user can act on (`required`, `must be at most
// 1048576 bytes`).
func (e *Errors) Add(field, description string) {
	if len(e.violations) >= MaxViolations {
		e.dropped++
		return
	}
	e.violations = append(e.violations, &errdetails.BadRequest_FieldViolation{
		Field:       clean(field, maxFieldBytes),
		Description: clean(description, maxDescriptionBytes),
	})
}

// Addf is [Errors.Add] with a formatted description.
func (e *Errors) Addf(field, format string, args ...any) {
	e.Add(field, fmt.Sprintf(format, args...))
}

// Len reports how many violations were recorded, including those beyond
// [MaxViolations] that were only counted.
func (e *Errors) Len() int { return len(e.violations) + e.dropped }

// Violations returns the recorded violations (at most [MaxViolations]).
func (e *Errors) Violations() []*errdetails.BadRequest_FieldViolation {
	return e.violations
}

// Err returns nil when no violation was recorded. Otherwise it returns a
// status error with code InvalidArgument, a message listing every violation
// (`invalid argument: spec.input: required; tenant: must be ...`) and an
// errdetails.BadRequest detail with one FieldViolation per violation.
func (e *Errors) Err() error {
	if e.Len() == 0 {
		return nil
	}
	st := status.New(codes.InvalidArgument, "invalid argument: "+e.Summary())
	detailed, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: e.violations})
	if err != nil {
		// Cannot happen with sanitised strings; the message alone still
		// names every field.
		return st.Err()
	}
	return detailed.Err()
}

// Summary lists the violations as `field: description; field: ...`, with
// `; and N more` for those beyond [MaxViolations]: the message of Err, and
// of configuration files checked with the same rules.
func (e *Errors) Summary() string {
	var b strings.Builder
	for i, v := range e.violations {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.GetField())
		b.WriteString(": ")
		b.WriteString(v.GetDescription())
	}
	if e.dropped > 0 {
		fmt.Fprintf(&b, "; and %d more", e.dropped)
	}
	return b.String()
}

// clean makes s valid UTF-8 (a protobuf string must be) and cuts it to at most
// max bytes without splitting a character.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
