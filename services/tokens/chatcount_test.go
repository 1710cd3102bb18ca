package tokens

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/tokens/encoding"
)

func newTestChatCounter(t testing.TB, encName string) chatCounter {
	t.Helper()
	set, err := encoding.NewSet()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := set.Get(encName)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := newMetrics(nil)
	return chatCounter{enc: enc, f: chatFormatFor(encName), cache: newCountCache(1024, m)}
}

func sys(content, name string) *baagentv1.ChatMessage {
	return &baagentv1.ChatMessage{Role: baagentv1.Role_ROLE_SYSTEM, Content: content, Name: name}
}

func user(content string) *baagentv1.ChatMessage {
	return &baagentv1.ChatMessage{Role: baagentv1.Role_ROLE_USER, Content: content}
}

// cookbookMessages is the example conversation of the OpenAI cookbook "How to
// count tokens with tiktoken" (section 6, "Counting tokens for chat
// completions API calls").
var cookbookMessages = []*baagentv1.ChatMessage{
	sys("You are a helpful, pattern-following assistant that translates corporate jargon into plain English.", ""),
	sys("New synergies will help drive top-line growth.", "example_user"),
	sys("Things working well together will increase revenue.", "example_assistant"),
	sys("Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.", "example_user"),
	sys("Let's talk later when we're less busy about how to do better.", "example_assistant"),
	user("This late pivot means we don't have time to boil the ocean for the client deliverable."),
}

// TestCookbookMessages reproduces the cookbook's published result: 129
// prompt tokens for gpt-3.5-turbo and gpt-4 (cl100k_base) and 124 for gpt-4o
// and gpt-4o-mini (o200k_base), each equal to the usage the API returned.
//
// Worked for cl100k_base (string counts from tiktoken):
//
//	per message    6 x 3                                  = 18
//	roles          "system" x5, "user" x1, 1 token each    =  6
//	names          example_user 2 x2 + example_assistant 3 x2
//	               + tokens_per_name 1 x4                   = 14
//	contents       18 + 10 + 8 + 18 + 15 + 19               = 88
//	reply priming                                           =  3
//	                                                         ---
//	                                                         129
//
// o200k_base differs only in the contents: 17 + 10 + 8 + 17 + 13 + 18 = 83,
// total 124.
func TestCookbookMessages(t *testing.T) {
	t.Parallel()

	for enc, want := range map[string]int64{encoding.Cl100kBase: 129, encoding.O200kBase: 124} {
		cc := newTestChatCounter(t, enc)
		got, err := cc.count(cookbookMessages, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.total() != want {
			t.Errorf("%s: %d tokens (messages %v), cookbook and API say %d", enc, got.total(), got.messages, want)
		}
	}
}

// cookbookTools is the cookbook's function-calling example (section 7,
// "Counting tokens for chat completions with tool calls").
func cookbookTools(t testing.TB) []*baagentv1.ToolSchema {
	return []*baagentv1.ToolSchema{{
		Name:        "get_current_weather",
		Description: "Get the current weather in a given location",
		Parameters: vt.MustStruct(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
				"unit":     map[string]any{"type": "string", "description": "The unit of temperature to return", "enum": []any{"celsius", "fahrenheit"}},
			},
			"required": []any{"location"},
		}),
	}}
}

var cookbookToolMessages = []*baagentv1.ChatMessage{
	sys("You are a helpful assistant that can answer to questions about the weather.", ""),
	user("What's the weather like in San Francisco?"),
}

// TestCookbookTools reproduces the cookbook's function-calling result: 105
// prompt tokens for gpt-3.5-turbo and gpt-4, 101 for gpt-4o and
// gpt-4o-mini, each equal to the API's usage.
//
// Worked for cl100k_base:
//
//	messages   2 x 3 + roles 2 + contents 14 + 9      = 31
//	reply priming                                     =  3
//	tools      func_init 10
//	           "get_current_weather:Get the current weather in a given location" 11
//	           prop_init 3
//	           location: prop_key 3 + "location:string:The city and state, e.g. San Francisco, CA" 14
//	           unit: prop_key 3 + enum_init -3 + (3 + "celsius" 2) + (3 + "fahrenheit" 2)
//	                 + "unit:string:The unit of temperature to return" 8
//	           func_end 12                            = 71
//	                                                   ---
//	                                                   105
//
// o200k_base: func_init 7 (tools 68) and the user message is 8 tokens
// (messages 30): 30 + 3 + 68 = 101.
func TestCookbookTools(t *testing.T) {
	t.Parallel()

	for enc, want := range map[string]int64{encoding.Cl100kBase: 105, encoding.O200kBase: 101} {
		cc := newTestChatCounter(t, enc)
		got, err := cc.count(cookbookToolMessages, cookbookTools(t))
		if err != nil {
			t.Fatal(err)
		}
		if got.total() != want {
			t.Errorf("%s: %d tokens (messages %v, tools %d), cookbook and API say %d", enc, got.total(), got.messages, got.tools, want)
		}
	}
}
