// Package load drives the whole suite (-target=all, in this process, with
// the scripted model) with many concurrent multi-step runs submitted
// through the gateway's gRPC API, and measures what a platform team asks of
// it before trusting it in production: every run completes with the right
// answer, how long each ReAct step takes under load, and whether
// goroutines, heap, resident memory and file descriptors stay bounded and
// return to their baseline afterwards.
//
// TestLoad (in `make test`) submits 1,000 runs at once; TestSoak (not in
// CI, BAAGENT_SOAK=30m) keeps a steady rate for a duration and fails on
// growth between the first and last windows after warm-up.
package load
