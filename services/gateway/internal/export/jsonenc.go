package export

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// The transcripts are written with these appenders rather than
// encoding/json: a document is built message by message into one reused
// buffer, map keys come out sorted (the output is deterministic), and
// text that is not valid UTF-8 is replaced rather than refused, so any
// stored event exports.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// control characters, U+2028 and U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// maxValueDepth bounds the nesting of tool arguments written: deeper
// values are written as null (JSON readers refuse documents nested some
// thousands of levels deep; tool arguments are never that deep).
const maxValueDepth = 500

// appendStruct appends s as a JSON object with sorted keys; nil is {}.
func appendStruct(b []byte, s *structpb.Struct) []byte {
	return appendFields(b, s.GetFields(), 0)
}

func appendFields(b []byte, fields map[string]*structpb.Value, depth int) []byte {
	if depth >= maxValueDepth {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendValue(b, fields[k], depth+1)
	}
	return append(b, '}')
}

// appendValue appends v. NaN and the infinities, which JSON has no number
// for, are written as the strings the protobuf JSON mapping uses.
func appendValue(b []byte, v *structpb.Value, depth int) []byte {
	if depth >= maxValueDepth {
		return append(b, "null"...)
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue)
	case *structpb.Value_NumberValue:
		f := k.NumberValue
		switch {
		case math.IsNaN(f):
			return append(b, `"NaN"`...)
		case math.IsInf(f, 1):
			return append(b, `"Infinity"`...)
		case math.IsInf(f, -1):
			return append(b, `"-Infinity"`...)
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue)
	case *structpb.Value_StructValue:
		return appendFields(b, k.StructValue.GetFields(), depth+1)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e, depth+1)
		}
		return append(b, ']')
	}
	return append(b, "null"...)
}
