package tokens

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestKnownModelsAreExactNamesOfTheRegistry(t *testing.T) {
	t.Parallel()

	names, err := KnownModels("")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "gpt-4o") {
		t.Errorf("built-in registry: gpt-4o missing from %v", names)
	}
	// A model known only from the price table is known too.
	if !slices.Contains(names, "claude-3-5-haiku") {
		t.Errorf("built-in registry: the priced claude-3-5-haiku missing from %v", names)
	}
	for _, n := range names {
		if isGlob(n) {
			t.Errorf("pattern %q listed as a known model", n)
		}
	}

	file := filepath.Join(t.TempDir(), "token_encoders.yaml")
	yaml := "encoders:\n  house-model-7b:\n    model_family: gpt\n    encoding_name: cl100k_base\n  house-*:\n    model_family: gpt\n    encoding_name: cl100k_base\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	names, err = KnownModels(file)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "house-model-7b") || slices.Contains(names, "house-*") {
		t.Errorf("with a file: got %v, want house-model-7b and no pattern", names)
	}
	if _, err := KnownModels(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file: no error")
	}
}
