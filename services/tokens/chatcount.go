package tokens

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baagent/baagent/core/chatrole"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/tokens/encoding"
)

// How a chat request is counted.
//
// Messages follow the OpenAI cookbook "How to count tokens with tiktoken"
// (num_tokens_from_messages), which the cookbook checks against the API's
// usage.prompt_tokens and finds equal for plain messages (gpt-3.5-turbo,
// gpt-4, gpt-4o, gpt-4o-mini): each message costs tokens_per_message = 3
// (`<|start|>{role}\n ... <|end|>\n`) plus the tokens of each of its values
// (role, content, name), a name one more token, and the reply is primed with
// 3 (`<|start|>assistant<|message|>`).
//
// Tool calls and tool results are not covered by the cookbook; OpenAI does
// not document them. They follow LangChain's ChatOpenAI
// get_num_tokens_from_messages approximation: a tool call costs the tokens of
// its function name plus its arguments JSON, and a tool message's
// tool_call_id a flat 3. Expect these to differ from API usage by a few
// tokens per call.
//
// Tool schemas follow the cookbook's num_tokens_for_tools: per function
// func_init plus "name:description" (final period dropped), per property
// prop_key plus "name:type:description", per enum value enum_item plus its
// text, and func_end once. The constants are the cookbook's for gpt-4o /
// gpt-4o-mini (o200k_base) and gpt-3.5-turbo / gpt-4 (cl100k_base, also used
// for the pre-chat encodings). The cookbook reports the API's usage exactly
// for its example; it reads only top-level properties, so nested object
// schemas are undercounted (by their inner descriptions).
//
// Fields that are not sent to a model (ids, importance, round, timestamps,
// reasoning_content, tool_name, is_error) are not counted.
type chatFormat struct {
	tokensPerMessage, tokensPerName, replyPriming, toolCallID int64
	funcInit, propInit, propKey, enumInit, enumItem, funcEnd  int64
}

var (
	chatO200k  = chatFormat{3, 1, 3, 3, 7, 3, 3, -3, 3, 12}
	chatCl100k = chatFormat{3, 1, 3, 3, 10, 3, 3, -3, 3, 12}
)

func chatFormatFor(encodingName string) chatFormat {
	if encodingName == encoding.O200kBase {
		return chatO200k
	}
	return chatCl100k
}

// roleName is a role as the OpenAI chat format writes it; nothing for an
// unspecified role.
func roleName(r baagentv1.Role) string {
	name, _ := chatrole.Name(r)
	return name
}

// chatCounter counts chat requests with one encoder, caching per message.
type chatCounter struct {
	enc   encoding.Encoder
	f     chatFormat
	cache *countCache
}

// chatCount is the result of counting one chat request, before any margin.
type chatCount struct {
	messages     []int64
	tools        int64
	replyPriming int64
	hits, misses int64
}

func (c chatCount) total() int64 {
	n := c.tools + c.replyPriming
	for _, m := range c.messages {
		n += m
	}
	return n
}

func (cc chatCounter) count(msgs []*baagentv1.ChatMessage, tools []*baagentv1.ToolSchema) (chatCount, error) {
	out := chatCount{messages: make([]int64, len(msgs)), replyPriming: cc.f.replyPriming}
	var buf []byte
	for i, m := range msgs {
		buf = appendMessageKey(buf[:0], cc.enc.Name(), m)
		key := cc.cache.keyer.key(buf)
		if n, ok := cc.cache.get(key); ok {
			out.messages[i] = n
			out.hits++
			continue
		}
		n, err := cc.message(m)
		if err != nil {
			return chatCount{}, fmt.Errorf("messages[%d]: %w", i, err)
		}
		cc.cache.put(key, n)
		out.messages[i] = n
		out.misses++
	}
	if len(tools) > 0 {
		buf, err := appendToolsKey(buf[:0], cc.enc.Name(), tools)
		if err != nil {
			return chatCount{}, err
		}
		key := cc.cache.keyer.key(buf)
		n, ok := cc.cache.get(key)
		if ok {
			out.hits++
		} else {
			if n, err = cc.tools(tools); err != nil {
				return chatCount{}, err
			}
			cc.cache.put(key, n)
			out.misses++
		}
		out.tools = n
	}
	return out, nil
}

func (cc chatCounter) text(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := cc.enc.Count(s, false) // chat APIs treat special-token text as text
	return int64(n), err
}

// message counts one message with its per-message overhead.
func (cc chatCounter) message(m *baagentv1.ChatMessage) (int64, error) {
	total := cc.f.tokensPerMessage
	add := func(s string) error {
		n, err := cc.text(s)
		total += n
		return err
	}
	if err := add(roleName(m.GetRole())); err != nil {
		return 0, err
	}
	if err := add(m.GetContent()); err != nil {
		return 0, err
	}
	if m.GetName() != "" {
		if err := add(m.GetName()); err != nil {
			return 0, err
		}
		total += cc.f.tokensPerName
	}
	for _, tc := range m.GetToolCalls() {
		if err := add(tc.GetName()); err != nil {
			return 0, err
		}
		if err := add(tc.GetArguments()); err != nil {
			return 0, err
		}
	}
	if m.GetToolCallId() != "" {
		total += cc.f.toolCallID
	}
	return total, nil
}

// tools counts the tool schemas of a request.
func (cc chatCounter) tools(tools []*baagentv1.ToolSchema) (int64, error) {
	var total int64
	add := func(s string) error {
		n, err := cc.text(s)
		total += n
		return err
	}
	for _, t := range tools {
		total += cc.f.funcInit
		if err := add(t.GetName() + ":" + strings.TrimSuffix(t.GetDescription(), ".")); err != nil {
			return 0, err
		}
		props := t.GetParameters().GetFields()["properties"].GetStructValue().GetFields()
		if len(props) == 0 {
			continue
		}
		total += cc.f.propInit
		for _, name := range sortedKeys(props) {
			p := props[name].GetStructValue().GetFields()
			total += cc.f.propKey
			if enum := p["enum"].GetListValue().GetValues(); p["enum"] != nil {
				total += cc.f.enumInit
				for _, item := range enum {
					total += cc.f.enumItem
					if err := add(scalarText(item)); err != nil {
						return 0, err
					}
				}
			}
			line := name + ":" + scalarText(p["type"]) + ":" + strings.TrimSuffix(p["description"].GetStringValue(), ".")
			if err := add(line); err != nil {
				return 0, err
			}
		}
	}
	total += cc.f.funcEnd
	return total, nil
}

// scalarText is a JSON value as text: a string as itself, anything else
// (a type list such as ["string","null"], a number) as compact JSON.
func scalarText(v *structpb.Value) string {
	if v == nil {
		return ""
	}
	if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return s.StringValue
	}
	b, err := json.Marshal(v.AsInterface())
	if err != nil {
		return ""
	}
	return string(b)
}

// appendMessageKey appends the canonical bytes of what message counting
// reads (so that only those fields decide a cache hit), each length-prefixed
// so that no two messages share an encoding.
func appendMessageKey(b []byte, enc string, m *baagentv1.ChatMessage) []byte {
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, 'm')
	str(enc)
	b = binary.AppendUvarint(b, uint64(m.GetRole()))
	str(m.GetContent())
	str(m.GetName())
	b = binary.AppendUvarint(b, uint64(len(m.GetToolCalls())))
	for _, tc := range m.GetToolCalls() {
		str(tc.GetName())
		str(tc.GetArguments())
	}
	if m.GetToolCallId() != "" {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return b
}

// appendToolsKey appends the canonical bytes of a tool list: its
// deterministic protobuf encoding (map entries of the parameter schemas
// sorted), each tool length-prefixed.
func appendToolsKey(b []byte, enc string, tools []*baagentv1.ToolSchema) ([]byte, error) {
	b = append(b, 't')
	b = binary.AppendUvarint(b, uint64(len(enc)))
	b = append(b, enc...)
	opts := proto.MarshalOptions{Deterministic: true}
	for _, t := range tools {
		b = binary.AppendUvarint(b, uint64(opts.Size(t)))
		var err error
		if b, err = opts.MarshalAppend(b, t); err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
	}
	return b, nil
}
