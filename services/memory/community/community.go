// Package community groups a tenant's entities into communities (Louvain
// modularity on the RELATES_TO graph) and has a model write each
// community's name and summary.
package community

import "context"

// Member is an entity as a summary sees it.
type Member struct {
	Name, Type, Summary string
}

// Summary is a community's name and description.
type Summary struct {
	Name, Summary string
	// Tokens is what writing it cost (prompt + completion).
	Tokens int
}

// Summarizer writes a community's name and summary from its members and
// the facts among them.
type Summarizer interface {
	Summarize(ctx context.Context, members []Member, facts []string) (Summary, error)
}
