// Package rpcfuzz sends generated requests to every RPC of every service of
// the running suite over real gRPC and checks each is refused (or served)
// with a client-error status, never Internal or Unknown, and that the
// suite stays healthy.
package rpcfuzz

import (
	"math/rand/v2"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Mode is one kind of hostile request.
type Mode uint8

const (
	ModeEmpty        Mode = iota // no fields at all
	ModeRandom                   // every field with a random value, 3 levels deep
	ModeOversize                 // every string 1 MiB
	ModeUnknownEnum              // every enum a number the schema does not define
	ModeDeepStruct               // every google.protobuf.Struct/Value nested 1,000 levels
	ModeHugeRepeated             // every repeated field with 100,000 elements
	ModeInvalidUTF8              // a string field carrying invalid UTF-8 (raw wire bytes)
	ModeRawBytes                 // arbitrary bytes as the message
	modeCount
)

var modeNames = [...]string{"empty", "random", "oversize", "unknown-enum", "deep-struct", "huge-repeated", "invalid-utf8", "raw-bytes"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode?"
}

const (
	oversizeString = 1 << 20
	hugeRepeated   = 100_000 / raceScale
	deepStruct     = 1_000
	maxDepth       = 3
	// maxPayload keeps generated requests under the suite's -max-msg-bytes
	// so they reach the handlers; the limit itself is tested separately.
	maxPayload = 12 << 20
)

// Request builds the wire bytes of one request of md in mode, from seed;
// raw is the message for ModeRawBytes.
func Request(md protoreflect.MessageDescriptor, mode Mode, seed uint64, raw []byte) []byte {
	if mode == ModeRawBytes {
		return raw
	}
	g := &gen{rnd: rand.New(rand.NewPCG(seed, uint64(mode))), mode: mode}
	msg := dynamicpb.NewMessage(md)
	if mode != ModeEmpty {
		g.fill(msg, 0)
	}
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(msg)
	if err != nil {
		return nil
	}
	if mode == ModeInvalidUTF8 {
		b = appendInvalidUTF8(b, md)
	}
	if len(b) > maxPayload {
		b, _ = proto.Marshal(dynamicpb.NewMessage(md))
	}
	return b
}

type gen struct {
	rnd  *rand.Rand
	mode Mode
	size int // bytes of strings and repeated elements generated so far
}

func (g *gen) fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && m.WhichOneof(od) != nil {
			continue // one member of a oneof
		}
		g.setField(m, fd, depth)
	}
}

func (g *gen) setField(m protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) {
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		n := 1 + g.rnd.IntN(3)
		if g.mode == ModeHugeRepeated && g.size < maxPayload/2 {
			n = hugeRepeated / 10
		}
		for range n {
			k := g.scalar(fd.MapKey(), depth).MapKey()
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				if depth >= maxDepth {
					return
				}
				v := mp.NewValue()
				g.fillMessage(v.Message(), depth+1)
				mp.Set(k, v)
			} else {
				mp.Set(k, g.scalar(fd.MapValue(), depth))
			}
		}
	case fd.IsList():
		l := m.Mutable(fd).List()
		n := 1 + g.rnd.IntN(3)
		if g.mode == ModeHugeRepeated && g.size < maxPayload/2 {
			n = hugeRepeated
		}
		for range n {
			if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
				if depth >= maxDepth {
					return
				}
				v := l.NewElement()
				if g.mode != ModeHugeRepeated { // empty elements keep 100k of them small
					g.fillMessage(v.Message(), depth+1)
				}
				l.Append(v)
			} else {
				l.Append(g.scalar(fd, depth))
			}
			g.size += 4
		}
	case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
		if depth >= maxDepth && !isStruct(fd.Message()) {
			return
		}
		g.fillMessage(m.Mutable(fd).Message(), depth+1)
	default:
		m.Set(fd, g.scalar(fd, depth))
	}
}

// fillMessage fills m, building google.protobuf.Struct and Value as JSON
// (deeply nested in ModeDeepStruct) rather than field by field.
func (g *gen) fillMessage(m protoreflect.Message, depth int) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct":
		proto.Merge(m.Interface(), g.structValue().GetStructValue())
	case "google.protobuf.Value":
		proto.Merge(m.Interface(), g.structValue())
	case "google.protobuf.ListValue":
		proto.Merge(m.Interface(), &structpb.ListValue{Values: []*structpb.Value{g.structValue()}})
	default:
		g.fill(m, depth)
	}
}

func (g *gen) structValue() *structpb.Value {
	leaf := structpb.NewStringValue(g.str())
	if g.mode != ModeDeepStruct {
		s, _ := structpb.NewStruct(map[string]any{"path": g.str(), "n": g.rnd.Float64() * 1e9, "ok": true})
		if s == nil {
			s = &structpb.Struct{}
		}
		s.Fields["x"] = leaf
		return structpb.NewStructValue(s)
	}
	v := leaf
	for i := range deepStruct {
		if i%2 == 0 {
			v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": v}})
		} else {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		}
	}
	return v
}

func isStruct(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.") &&
		(md.Name() == "Struct" || md.Name() == "Value" || md.Name() == "ListValue")
}

func (g *gen) scalar(fd protoreflect.FieldDescriptor, depth int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(g.rnd.IntN(2) == 1)
	case protoreflect.EnumKind:
		if g.mode == ModeUnknownEnum {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(9999 + g.rnd.Int32N(1000)))
		}
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(g.rnd.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(g.int32())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(g.int32()) * int64(1+g.rnd.IntN(1<<20)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(g.rnd.Uint32())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(g.rnd.Uint64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(g.rnd.NormFloat64() * 1e6))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(g.rnd.NormFloat64() * 1e12)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(g.str()))
	default: // string
		return protoreflect.ValueOfString(g.str())
	}
}

// int32 favours the edges: 0, negatives, the extremes.
func (g *gen) int32() int32 {
	switch g.rnd.IntN(5) {
	case 0:
		return 0
	case 1:
		return -1 - g.rnd.Int32N(1000)
	case 2:
		return 1<<31 - 1
	case 3:
		return -1 << 31
	default:
		return g.rnd.Int32N(10_000)
	}
}

// str returns short strings that look like ids, paths, injections and
// nonsense, or 1 MiB in ModeOversize.
func (g *gen) str() string {
	if g.mode == ModeOversize && g.size < maxPayload/2 {
		g.size += oversizeString
		return strings.Repeat("é", oversizeString/2)
	}
	pool := []string{
		"", " ", "a", "default", "acme", "../../../etc/passwd", "/etc/passwd", "run_00000000000000000000000000",
		"artifact_deadbeef", "x\x00y", "tenants/../acme", "*", ">", "baagent.events.>", "'; DROP TABLE t; --",
		"gpt-4o", "sales-analysis", "file_read", "SKILL.md", "{\"a\":1}", "\u202e\u0000\uffff", strings.Repeat("z", 300),
	}
	if g.rnd.IntN(4) == 0 {
		b := make([]byte, g.rnd.IntN(40))
		for i := range b {
			b[i] = byte(32 + g.rnd.IntN(95))
		}
		return string(b)
	}
	return pool[g.rnd.IntN(len(pool))]
}

// appendInvalidUTF8 appends the first string field of md again, with bytes
// that are not UTF-8; a later occurrence wins, so the field is invalid.
func appendInvalidUTF8(b []byte, md protoreflect.MessageDescriptor) []byte {
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.StringKind && !fd.IsMap() {
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			return protowire.AppendBytes(b, []byte{'o', 'k', 0xff, 0xfe, 0xc0, 0x80})
		}
	}
	return b
}

// HasStringField reports whether ModeInvalidUTF8 changes md's requests.
func HasStringField(md protoreflect.MessageDescriptor) bool {
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Kind() == protoreflect.StringKind && !fd.IsMap() {
			return true
		}
	}
	return false
}
