package encoding

import (
	"fmt"
	"runtime"
	"unicode/utf8"

	"github.com/baagent/baagent/services/tokens/encoding/bpe"
	"github.com/baagent/baagent/services/tokens/encoding/pretok"
)

// engine is tiktoken's CoreBPE: special tokens found first (only when
// allowed), each ordinary stretch cut by the encoding's pre-tokenizer, each
// piece looked up whole and otherwise merged by byte-pair encoding.
type engine struct {
	name     string
	vocab    *bpe.Vocabulary
	split    pretok.Splitter
	specials specials
	// states holds idle per-call states (merge buffers, piece cache), so
	// that Count does not allocate once warm. Bounded: a state finding it
	// full is dropped.
	states chan *state
}

// patternOf maps each encoding to its split pattern.
var patternOf = map[string]pretok.Pattern{
	O200kBase: pretok.O200k, Cl100kBase: pretok.Cl100k, P50kBase: pretok.GPT2, R50kBase: pretok.GPT2,
}

func newEngine(name string, classes *pretok.Classes) (*engine, error) {
	p, ok := patternOf[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownEncoding, name)
	}
	v, err := bpe.Load(name)
	if err != nil {
		return nil, err
	}
	return &engine{
		name:     name,
		vocab:    v,
		split:    pretok.New(classes, p),
		specials: newSpecials(name),
		states:   make(chan *state, 2*runtime.GOMAXPROCS(0)),
	}, nil
}

func (e *engine) Name() string { return e.name }

func (e *engine) Encode(text string, allowSpecial bool) ([]uint32, error) {
	st := e.getState()
	defer e.putState(st)
	ids := make([]uint32, 0, len(text)/4+1)
	_, ids = e.run(text, allowSpecial, st, ids, false)
	return ids, nil
}

func (e *engine) Count(text string, allowSpecial bool) (int, error) {
	st := e.getState()
	defer e.putState(st)
	n, _ := e.run(text, allowSpecial, st, nil, true)
	return n, nil
}

// run counts the tokens of text (count) or appends them to ids.
func (e *engine) run(text string, allowSpecial bool, st *state, ids []uint32, count bool) (int, []uint32) {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	n := 0
	for allowSpecial {
		at, length, id := e.specials.next(text)
		if at < 0 {
			break
		}
		var k int
		k, ids = e.ordinary(text[:at], st, ids, count)
		n += k + 1
		if !count {
			ids = append(ids, id)
		}
		text = text[at+length:]
	}
	k, ids := e.ordinary(text, st, ids, count)
	return n + k, ids
}

// ordinary counts or encodes text, valid UTF-8 without special tokens.
func (e *engine) ordinary(text string, st *state, ids []uint32, count bool) (int, []uint32) {
	n := 0
	for i := 0; i < len(text); {
		j := e.split.Next(text, i)
		piece := text[i:j]
		i = j
		if len(piece) <= 2 { // one or two bytes: the merge's tables answer
			st.ids = e.vocab.Merge(piece, &st.scratch, st.ids[:0])
			n += len(st.ids)
			if !count {
				ids = append(ids, st.ids...)
			}
			continue
		}
		// The piece cache first: it answers the frequent pieces, tokens or
		// not, from a few cache lines, where the vocabulary's index is
		// megabytes away in memory.
		h := e.vocab.Hash(piece)
		toks, hit := st.cache.get(piece, h)
		if !hit {
			if r, ok := e.vocab.RankHashed(piece, h); ok { // most pieces of real text
				st.ids = append(st.ids[:0], r)
			} else {
				st.ids = e.vocab.Merge(piece, &st.scratch, st.ids[:0])
			}
			toks = st.ids
			st.cache.put(piece, h, toks)
		}
		n += len(toks)
		if !count {
			ids = append(ids, toks...)
		}
	}
	return n, ids
}

func (e *engine) Decode(ids []uint32) ([]byte, error) {
	out := make([]byte, 0, len(ids)*4)
	for i, id := range ids {
		if e.vocab.Valid(id) {
			out = append(out, e.vocab.Token(id)...)
			continue
		}
		text, ok := e.specials.byID[id]
		if !ok {
			return nil, fmt.Errorf("%w %d at index %d for %s", ErrInvalidToken, id, i, e.name)
		}
		out = append(out, text...)
	}
	return out, nil
}

// state is one call's working memory.
type state struct {
	scratch bpe.Scratch
	ids     []uint32
	cache   pieceCache
}

// maxPooledPiece bounds the merge buffers a pooled state keeps: a state that
// merged a longer piece (megabytes without a space) gives them back.
const maxPooledPiece = 64 << 10

func (e *engine) getState() *state {
	select {
	case st := <-e.states:
		return st
	default:
		return &state{cache: newPieceCache()}
	}
}

func (e *engine) putState(st *state) {
	if cap(st.ids) > maxPooledPiece {
		st.ids = nil
	}
	st.scratch.Shrink(maxPooledPiece)
	select {
	case e.states <- st:
	default:
	}
}
