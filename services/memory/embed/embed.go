// Package embed turns text into vectors for the memory service: an
// OpenAI-compatible /v1/embeddings client, and an offline lexical
// embedding (feature hashing of word and character n-grams) that needs no
// model and says so in its name.
package embed

import "context"

// Embedder embeds texts. Vectors are L2-normalised and Dims long; the
// result has one vector per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the embedding (`text-embedding-3-small`,
	// `lexical-hash-v1`); vectors of different models are not comparable.
	Model() string
	Dims() int
}
