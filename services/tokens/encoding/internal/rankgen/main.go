// Command rankgen writes the rank files embedded by package bpe: for each
// encoding, every token's bytes in rank order, each preceded by its length as
// a uvarint (0 marks a rank with no token). They are taken from the
// vocabularies compiled into github.com/tiktoken-go/tokenizer; bpe's tests
// check each file against OpenAI's published SHA-256 of the .tiktoken file it
// re-serialises to, so a wrong source cannot slip through.
//
//	go run ./services/tokens/encoding/internal/rankgen -out services/tokens/encoding/bpe/ranks
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"unsafe"

	"github.com/tiktoken-go/tokenizer"
)

func main() {
	out := flag.String("out", "ranks", "directory to write <encoding>.ranks files to")
	flag.Parse()
	for _, name := range []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"} {
		ranks, err := vocabulary(name)
		if err != nil {
			log.Fatal(err)
		}
		byRank := map[uint][]byte{}
		maxRank, maxLen := uint(0), 0
		for tok, r := range ranks {
			if _, dup := byRank[r]; dup {
				log.Fatalf("%s: rank %d twice", name, r)
			}
			byRank[r] = []byte(tok)
			maxRank = max(maxRank, r)
			maxLen = max(maxLen, len(tok))
		}
		var buf []byte
		holes := 0
		for r := uint(0); r <= maxRank; r++ {
			tok := byRank[r]
			if tok == nil {
				holes++
			}
			buf = binary.AppendUvarint(buf, uint64(len(tok)))
			buf = append(buf, tok...)
		}
		path := filepath.Join(*out, name+".ranks")
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d tokens, %d holes, longest %d bytes, %d bytes written\n", path, len(ranks), holes, maxLen, len(buf))
	}
}

// vocabulary reads the engine's unexported token -> rank map.
func vocabulary(name string) (map[string]uint, error) {
	c, err := tokenizer.Get(tokenizer.Encoding(name))
	if err != nil {
		return nil, err
	}
	f := reflect.ValueOf(c).Elem().FieldByName("vocabulary")
	if !f.IsValid() || f.Kind() != reflect.Map || f.Type().Key().Kind() != reflect.String || f.Type().Elem().Kind() != reflect.Uint {
		return nil, fmt.Errorf("%s: engine has no vocabulary map[string]uint", name)
	}
	return *(*map[string]uint)(unsafe.Pointer(f.UnsafeAddr())), nil
}
