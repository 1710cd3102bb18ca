package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// BenchmarkRunVersion is the fixed cost of one invocation: building the
// command tree, parsing the line and running the cheapest command.
func BenchmarkRunVersion(b *testing.B) {
	ctx := context.Background()
	getenv := func(string) string { return "" }
	for b.Loop() {
		if code := run(ctx, []string{"version", "--json"}, strings.NewReader(""), io.Discard, io.Discard, getenv); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
