package scripted

import (
	"encoding/json"
	"hash/maphash"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// TokenCounter counts the tokens of a text. The encoders of
// services/tokens/encoding satisfy it; cmd/baagent/app passes one in (this
// package does not import services).
type TokenCounter interface {
	Name() string
	Count(text string, allowSpecial bool) (int, error)
}

// usageCounter counts usage the way OpenAI's chat format is documented to
// (the cookbook rule services/tokens also uses): every message costs 3
// tokens plus its role, content and name (+1 for a name), and the reply is
// primed with 3 more. Tool calls in the prompt count their name and
// argument text; the tool definitions count as their JSON text, an
// approximation since providers do not document how they render them.
// Completion tokens are the reasoning, content, tool names and arguments.
//
// Without a TokenCounter, texts are counted as ceil(bytes/4), the usual
// rule of thumb for English; responses then carry the header
// X-Scripted-Usage: approximate.
type usageCounter struct {
	counter TokenCounter
	cache   *countCache
}

const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensReplyPrime = 3
)

func (u usageCounter) exact() bool { return u.counter != nil }

func (u usageCounter) label() string {
	if u.counter == nil {
		return "approximate (bytes/4)"
	}
	return "exact (" + u.counter.Name() + ")"
}

func (u usageCounter) text(s string) int {
	if s == "" {
		return 0
	}
	if u.counter == nil {
		return (len(s) + 3) / 4
	}
	if n, ok := u.cache.get(s); ok {
		return n
	}
	n, err := u.counter.Count(s, false)
	if err != nil {
		return (len(s) + 3) / 4
	}
	u.cache.put(s, n)
	return n
}

func (u usageCounter) prompt(msgs []openai.ChatCompletionMessage, tools []openai.Tool) int {
	n := tokensReplyPrime
	for i := range msgs {
		m := &msgs[i]
		n += tokensPerMessage + u.text(m.Role) + u.text(text(m))
		if m.Name != "" {
			n += tokensPerName + u.text(m.Name)
		}
		for _, tc := range m.ToolCalls {
			n += u.text(tc.Function.Name) + u.text(tc.Function.Arguments)
		}
	}
	if len(tools) > 0 {
		if b, err := json.Marshal(tools); err == nil {
			n += u.text(string(b))
		}
	}
	return n
}

func (u usageCounter) completion(r *reply) int {
	n := u.text(r.reasoning) + u.text(r.text)
	for _, c := range r.calls {
		n += u.text(c.name) + u.text(c.arguments)
	}
	return n
}

// countCache remembers the counts of recent texts: the prompts of one
// conversation repeat every earlier message at each step. Bounded: when
// full it is emptied and refills with what is in use.
type countCache struct {
	mu   sync.Mutex
	seed maphash.Seed
	m    map[uint64]int
	max  int
}

// countCacheEntries bounds countCache (about 100 KiB).
const countCacheEntries = 8192

func newCountCache() *countCache {
	return &countCache{seed: maphash.MakeSeed(), m: make(map[uint64]int), max: countCacheEntries}
}

func (c *countCache) key(s string) uint64 { return maphash.String(c.seed, s) }

func (c *countCache) get(s string) (int, bool) {
	if c == nil {
		return 0, false
	}
	k := c.key(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[k]
	return n, ok
}

func (c *countCache) put(s string, n int) {
	if c == nil {
		return
	}
	k := c.key(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = n
}
