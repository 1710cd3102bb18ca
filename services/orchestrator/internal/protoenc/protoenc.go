// Package protoenc encodes the protobuf messages a run keeps in its
// checkpoint (JSON records with protobuf-encoded fields).
package protoenc

import (
	"google.golang.org/protobuf/proto"
)

// Marshal encodes m, nil for nil.
func Marshal(m proto.Message) []byte {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	b, _ := proto.Marshal(m) // messages built by the run always encode
	return b
}

// Unmarshal decodes b into a new T; a nil b gives an empty T.
func Unmarshal[T any, PT interface {
	*T
	proto.Message
}](b []byte) (PT, error) {
	m := PT(new(T))
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}
