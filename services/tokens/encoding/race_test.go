//go:build race

package encoding

// raceEnabled: the race detector's instrumentation allocates.
const raceEnabled = true
