package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedDataIsGenerated regenerates the dataset and compares it with
// the committed CSV files byte for byte.
func TestCommittedDataIsGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders.csv", "customers.csv", "products.csv"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output; run go generate ./examples/data/gen", name)
		}
		if len(got) < 1000 {
			t.Errorf("%s is only %d bytes", name, len(got))
		}
	}
}
