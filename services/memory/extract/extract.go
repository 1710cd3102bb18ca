// Package extract turns an episode's text into entities and relations
// through an OpenAI-compatible chat model with JSON-schema structured
// output, with an optional second "reflexion" pass for missed entities.
package extract

import "context"

// Entity is an entity the model found.
type Entity struct {
	Name       string
	Type       string
	Summary    string
	Attributes map[string]string
}

// Relation is a relation the model found, between two of the result's
// entities by name.
type Relation struct {
	Source     string
	Target     string
	Type       string // upper snake case
	Fact       string
	Confidence float64 // in (0, 1]
}

// Usage is the model tokens extraction spent.
type Usage struct {
	Calls                          int
	PromptTokens, CompletionTokens int
}

// Result is what the model found in one episode, validated: names are
// non-empty and unique per type, relations name entities of the result.
type Result struct {
	Entities  []Entity
	Relations []Relation
	Usage     Usage
}

// Extractor extracts entities and relations from text.
type Extractor interface {
	Extract(ctx context.Context, content string) (*Result, error)
	// Model names the model used.
	Model() string
}
