package contextsvc

import (
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// FuzzPageToken: parsing never panics, accepts exactly what encoding
// produces, and round-trips.
func FuzzPageToken(f *testing.F) {
	for _, seq := range []uint64{1, 100, 1 << 40, ^uint64(0)} {
		f.Add(encodePageToken(seq))
	}
	f.Add("")
	f.Add("aDE")
	f.Add("eyJvZmZzZXQiOjEwMH0=")
	f.Fuzz(func(t *testing.T, tok string) {
		seq, err := parsePageToken(tok)
		if err != nil {
			return
		}
		if tok == "" {
			if seq != 0 {
				t.Fatalf("empty token gave %d", seq)
			}
			return
		}
		if seq == 0 || encodePageToken(seq) != tok {
			t.Fatalf("token %q parsed to %d, which encodes as %q", tok, seq, encodePageToken(seq))
		}
	})
}

// FuzzDecodeRecord: whatever a history subject holds, decoding never panics
// and what it accepts has an id and a role and re-encodes to a record that
// decodes to the same message.
func FuzzDecodeRecord(f *testing.F) {
	m := &baagentv1.ChatMessage{Id: "m1", Role: roleAssistant, Content: "hi", ToolCalls: []*baagentv1.ToolCall{{Id: "c", Name: "n", Arguments: "{}"}}}
	b, _ := encodeRecord(m)
	f.Add(formatVersion, b)
	f.Add("chat-message/0", b)
	f.Add(formatVersion, []byte{0x0a, 0x00})
	f.Add(formatVersion, []byte{})
	f.Fuzz(func(t *testing.T, format string, data []byte) {
		m, err := decodeRecord(format, data)
		if err != nil {
			return
		}
		if m.GetId() == "" || m.GetRole() == baagentv1.Role_ROLE_UNSPECIFIED {
			t.Fatalf("accepted %v", m)
		}
		again, err := encodeRecord(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeRecord(format, again)
		if err != nil || !proto.Equal(m, m2) {
			t.Fatalf("re-encoded record: %v %v", m2, err)
		}
		// Derived forms of any accepted message are computable.
		s := &storedMsg{msg: m, hash: hashContent(m)}
		_ = s.forms()
		_ = summaryLine(m)
	})
}

// FuzzCut: cutting never splits a UTF-8 sequence of valid text.
func FuzzCut(f *testing.F) {
	f.Add("héllo wörld 📈", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		out := cut(s, n)
		if len(out) > len(s)+3 {
			t.Fatalf("cut grew the text")
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("cut(%q, %d) = %q is not valid UTF-8", s, n, out)
		}
	})
}
