// Package patterns holds the rules of experience accumulation: how an
// interaction trace (what a user and the agent did to reach a result)
// becomes an interaction pattern, how a new request is scored against the
// patterns a tenant has, which patterns may be offered (the quality gates),
// and how each reuse changes a pattern (evolution). It is pure: no storage,
// no clock of its own (every rule takes now), no I/O. See
// docs/concepts/patterns.md.
package patterns
