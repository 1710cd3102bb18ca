//go:build !race

package rpcfuzz

const raceScale = 1
