package sqlite

import (
	"context"
	"errors"
	"time"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
)

// errPatternsPending: the pattern tables are being built (this file is
// replaced by the implementation before the capability ships).
var errPatternsPending = errors.New("memory sqlite: interaction patterns are not stored by this build")

func (s *Store) LearnTrace(context.Context, *store.TraceRecord, string, string, store.LearnFunc) (store.LearnOutcome, error) {
	return store.LearnOutcome{}, errPatternsPending
}
func (s *Store) PatternCandidates(context.Context, string, string, []string, int) ([]*store.PatternRecord, error) {
	return nil, errPatternsPending
}
func (s *Store) TouchPatterns(context.Context, string, []string, time.Time) error {
	return errPatternsPending
}
func (s *Store) GetPattern(context.Context, string, string) (*store.PatternRecord, error) {
	return nil, errPatternsPending
}
func (s *Store) GetPatterns(context.Context, string, []string) ([]*store.PatternRecord, error) {
	return nil, errPatternsPending
}
func (s *Store) ListPatterns(context.Context, string, store.PatternFilter, store.Page) ([]*store.PatternRecord, string, error) {
	return nil, "", errPatternsPending
}
func (s *Store) UpdatePattern(context.Context, string, string, int64, func(*patterns.Pattern) error) (*store.PatternRecord, error) {
	return nil, errPatternsPending
}
func (s *Store) DeletePattern(context.Context, string, string) error { return errPatternsPending }
func (s *Store) SuppressSignature(context.Context, string, patterns.Signature, time.Time) error {
	return errPatternsPending
}
func (s *Store) SuppressedSignatures(context.Context, string, time.Time) ([]patterns.Signature, error) {
	return nil, errPatternsPending
}
func (s *Store) GrantPattern(context.Context, store.PatternGrant) (store.PatternGrant, error) {
	return store.PatternGrant{}, errPatternsPending
}
func (s *Store) RevokePatternGrant(context.Context, string, string, string) error {
	return errPatternsPending
}
func (s *Store) ListPatternGrants(context.Context, string, string, int) ([]store.PatternGrant, error) {
	return nil, errPatternsPending
}
func (s *Store) GetTrace(context.Context, string, string) (*store.TraceRecord, error) {
	return nil, errPatternsPending
}
func (s *Store) PruneTraces(context.Context, time.Time) (int, error) { return 0, errPatternsPending }
