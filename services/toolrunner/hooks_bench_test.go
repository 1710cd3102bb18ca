package toolrunner

import (
	"context"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// BenchmarkHookOverhead measures what a no-op pre hook plus a no-op post
// hook, both ToolHookService servers on loopback gRPC, add to one call
// (target: ≤ 200 µs p50). `none` is the pipeline alone, `grpc-pre+post`
// the same call with the two hooks, `chain` the two hook calls alone.
// p50-ns and p99-ns are reported beside the mean.
func BenchmarkHookOverhead(b *testing.B) {
	addr := startHookServer(b, &hookServer{})
	hooked := "hooks:\n" + grpcHookYAML("pre-noop", "pre", `["*"]`, addr, "") + grpcHookYAML("post-noop", "post", `["*"]`, addr, "")
	for _, bc := range []struct{ name, yaml string }{{"none", "hooks: []\n"}, {"grpc-pre+post", hooked}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _, _ := hookedServer(b, bc.yaml)
			r := req("echo", map[string]any{"x": "y"})
			ctx := context.Background()
			for range 100 { // connect and warm up
				if res, err := s.invoke(ctx, r); err != nil || !res.GetSuccess() {
					b.Fatalf("%v %v", res, err)
				}
			}
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := s.invoke(ctx, r)
				times = append(times, time.Since(start))
				if err != nil || !res.GetSuccess() {
					b.Fatalf("%v %v", res, err)
				}
			}
			testkit.ReportPercentiles(b, times)
		})
	}
	b.Run("chain", func(b *testing.B) {
		s, _, _ := hookedServer(b, hooked)
		r := req("echo", map[string]any{"x": "y"})
		args := r.GetParameters().AsMap()
		data := map[string]any{"x": "y", "note": "n"}
		ctx := context.Background()
		check := func(map[string]any) error { return nil }
		var times []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			a, te, err := s.hooks.runPre(ctx, r, "echo", args, check)
			if err != nil || te != nil || a == nil {
				b.Fatal(err, te)
			}
			if _, _, te, err := s.hooks.runPost(ctx, r, "echo", a, data); err != nil || te != nil {
				b.Fatal(err, te)
			}
			if i >= 100 { // the first calls connect
				times = append(times, time.Since(start))
			}
		}
		testkit.ReportPercentiles(b, times)
	})
}
