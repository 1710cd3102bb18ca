package validate

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// badRequest returns the BadRequest detail of err, failing unless err is an
// InvalidArgument status carrying exactly one such detail.
func badRequest(t *testing.T, err error) (*status.Status, *errdetails.BadRequest) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument status, got %v", err)
	}
	var br *errdetails.BadRequest
	for _, d := range st.Details() {
		b, ok := d.(*errdetails.BadRequest)
		if !ok {
			t.Fatalf("unexpected detail %T: %v", d, d)
		}
		if br != nil {
			t.Fatal("more than one BadRequest detail")
		}
		br = b
	}
	if br == nil {
		t.Fatalf("no BadRequest detail in %v", err)
	}
	return st, br
}

func TestErrorsZeroValue(t *testing.T) {
	t.Parallel()

	var e Errors
	if e.Len() != 0 || len(e.Violations()) != 0 {
		t.Fatalf("zero Errors: Len %d, %d violations", e.Len(), len(e.Violations()))
	}
	if err := e.Err(); err != nil {
		t.Fatalf("zero Errors: Err() = %v, want nil", err)
	}
}

func TestErrorsErr(t *testing.T) {
	t.Parallel()

	var e Errors
	e.Add("spec.input", "required")
	e.Addf("messages[3].role", "unknown value %d", 9)
	e.Add("tenant", "must be 1-64 characters of [A-Za-z0-9_-]")
	if e.Len() != 3 {
		t.Fatalf("Len = %d, want 3", e.Len())
	}
	st, br := badRequest(t, e.Err())
	want := "invalid argument: spec.input: required; messages[3].role: unknown value 9; tenant: must be 1-64 characters of [A-Za-z0-9_-]"
	if st.Message() != want {
		t.Errorf("message\n got %q\nwant %q", st.Message(), want)
	}
	wantViolations := []*errdetails.BadRequest_FieldViolation{
		{Field: "spec.input", Description: "required"},
		{Field: "messages[3].role", Description: "unknown value 9"},
		{Field: "tenant", Description: "must be 1-64 characters of [A-Za-z0-9_-]"},
	}
	if len(br.GetFieldViolations()) != len(wantViolations) {
		t.Fatalf("got %d violations, want %d", len(br.GetFieldViolations()), len(wantViolations))
	}
	for i, v := range br.GetFieldViolations() {
		if !proto.Equal(v, wantViolations[i]) {
			t.Errorf("violation %d = %v, want %v", i, v, wantViolations[i])
		}
		if !proto.Equal(v, e.Violations()[i]) {
			t.Errorf("violation %d = %v, Violations() has %v", i, v, e.Violations()[i])
		}
	}
	// Err does not consume the violations: a second call gives the same status.
	st2, _ := badRequest(t, e.Err())
	if !proto.Equal(st.Proto(), st2.Proto()) {
		t.Errorf("second Err() differs: %v vs %v", st2.Proto(), st.Proto())
	}
}

func TestErrorsCap(t *testing.T) {
	t.Parallel()

	for _, n := range []int{MaxViolations - 1, MaxViolations, MaxViolations + 1, MaxViolations + 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			var e Errors
			for i := range n {
				e.Add(Index("messages", i), "required")
			}
			if e.Len() != n {
				t.Errorf("Len = %d, want %d", e.Len(), n)
			}
			kept := min(n, MaxViolations)
			if len(e.Violations()) != kept {
				t.Errorf("kept %d violations, want %d", len(e.Violations()), kept)
			}
			st, br := badRequest(t, e.Err())
			if len(br.GetFieldViolations()) != kept {
				t.Errorf("BadRequest has %d violations, want %d", len(br.GetFieldViolations()), kept)
			}
			for i, v := range br.GetFieldViolations() {
				if v.GetField() != Index("messages", i) { // the first ones are kept, in order
					t.Errorf("violation %d names %q", i, v.GetField())
				}
			}
			more := fmt.Sprintf("; and %d more", n-MaxViolations)
			if hasMore := strings.HasSuffix(st.Message(), more); hasMore != (n > MaxViolations) {
				t.Errorf("message %q: ends with %q = %v, want %v", st.Message(), more, hasMore, n > MaxViolations)
			}
			if n <= MaxViolations && strings.Contains(st.Message(), "more") {
				t.Errorf("message mentions dropped violations: %q", st.Message())
			}
			if strings.Count(st.Message(), ": required") != kept {
				t.Errorf("message lists %d violations, want %d", strings.Count(st.Message(), ": required"), kept)
			}
		})
	}
}

func TestErrorsClean(t *testing.T) {
	t.Parallel()

	long := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		name            string
		field, desc     string
		wantField       string // exact, or "" to check only the bounds
		wantDesc        string
		fieldCut, dsCut bool
	}{
		{name: "short kept", field: "a", desc: "b", wantField: "a", wantDesc: "b"},
		{name: "invalid UTF-8 replaced", field: "labels[\"\xff\xfe\"]", desc: "bad \xc3", wantField: "labels[\"\uFFFD\"]", wantDesc: "bad \uFFFD"},
		{name: "field at limit kept", field: long("f", maxFieldBytes), desc: long("d", maxDescriptionBytes),
			wantField: long("f", maxFieldBytes), wantDesc: long("d", maxDescriptionBytes)},
		{name: "field one over cut", field: long("f", maxFieldBytes+1), desc: long("d", maxDescriptionBytes+1),
			wantField: long("f", maxFieldBytes-len("…")) + "…", wantDesc: long("d", maxDescriptionBytes-len("…")) + "…"},
		{name: "huge cut", field: long("f", 1<<20), desc: long("d", 1<<20), fieldCut: true, dsCut: true},
		{name: "multi-byte not split", field: long("é", maxFieldBytes), desc: long("😀", maxDescriptionBytes), fieldCut: true, dsCut: true},
		{name: "multi-byte offset not split", field: "x" + long("€", maxFieldBytes), desc: "xy" + long("€", maxDescriptionBytes), fieldCut: true, dsCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var e Errors
			e.Add(tt.field, tt.desc)
			v := e.Violations()[0]
			if tt.wantField != "" && (v.GetField() != tt.wantField || v.GetDescription() != tt.wantDesc) {
				t.Errorf("got %q: %q\nwant %q: %q", v.GetField(), v.GetDescription(), tt.wantField, tt.wantDesc)
			}
			for _, c := range []struct {
				s   string
				max int
				cut bool
			}{{v.GetField(), maxFieldBytes, tt.fieldCut}, {v.GetDescription(), maxDescriptionBytes, tt.dsCut}} {
				if !utf8.ValidString(c.s) || len(c.s) > c.max {
					t.Errorf("%q: valid UTF-8 %v, %d bytes (max %d)", c.s, utf8.ValidString(c.s), len(c.s), c.max)
				}
				if c.cut && (!strings.HasSuffix(c.s, "…") || len(c.s) < c.max-len("…")-utf8.UTFMax) {
					t.Errorf("cut %q (%d bytes): want a '…' ending close to %d bytes", c.s, len(c.s), c.max)
				}
			}
			// The status must still carry the detail: a protobuf string
			// must be valid UTF-8.
			st, br := badRequest(t, e.Err())
			if !proto.Equal(br.GetFieldViolations()[0], v) || !strings.Contains(st.Message(), v.GetField()+": "+v.GetDescription()) {
				t.Errorf("status does not carry the cleaned violation: %s", st.Message())
			}
		})
	}
}

// TestErrorsBounded checks that a hostile request cannot make the status
// unbounded: MaxViolations violations of maximal size, plus dropped ones.
func TestErrorsBounded(t *testing.T) {
	t.Parallel()

	var e Errors
	huge := strings.Repeat("x", 1<<16)
	for range 10 * MaxViolations {
		e.Add(huge, huge)
	}
	st, _ := badRequest(t, e.Err())
	limit := len("invalid argument: ") + MaxViolations*(maxFieldBytes+maxDescriptionBytes+4) + len("; and 999 more")
	if n := len(st.Message()); n > limit {
		t.Errorf("message is %d bytes, want at most %d", n, limit)
	}
	// The detail repeats every violation, with a few bytes of framing each.
	if n, max := proto.Size(st.Proto()), 2*limit+MaxViolations*16+256; n > max {
		t.Errorf("status proto is %d bytes, want at most %d", n, max)
	}
}
