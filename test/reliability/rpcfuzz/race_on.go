//go:build race

package rpcfuzz

// raceScale shrinks the huge requests under the race detector, which makes
// building and decoding them about 25 times slower.
const raceScale = 10
