// Command tiktokencount counts the o200k_base tokens of a file with
// github.com/tiktoken-go/tokenizer and prints the count: the comparison
// process of BenchmarkTokensCountFile (the go tool ignores testdata, so it is
// built only by the benchmark).
package main

import (
	"fmt"
	"os"

	"github.com/tiktoken-go/tokenizer"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tiktokencount FILE")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	n, err := codec.Count(string(data))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(n)
}
