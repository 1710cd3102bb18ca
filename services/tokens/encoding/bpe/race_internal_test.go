//go:build race

package bpe

// raceEnabled: the race detector makes the whole-vocabulary checks minutes
// long; under it they sample.
const raceEnabled = true
