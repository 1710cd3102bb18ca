package skills

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/skills/store"
)

// openBenchStore opens a store on js for a benchmark.
func openBenchStore(b *testing.B, js jetstream.JetStream) *store.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, js, store.Config{Logger: quietLogger(), MaxSkillsPerTenant: 2000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	return st
}

// putBench stores n skills shaped like benchRoot's for tenant acme.
func putBench(b *testing.B, st *store.Store, n int) {
	b.Helper()
	ctx := context.Background()
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				name := fmt.Sprintf("skill-%04d", i)
				files := []store.File{{Path: store.SkillFile, Data: []byte(benchSkillMD(name, i))}}
				if i%4 == 0 {
					files = append(files, store.File{Path: "references/schema.md", Data: []byte(benchSchemaMD)})
				}
				if _, _, err := st.Put(ctx, store.Key{Tenant: "acme", Name: name}, files, store.PutOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// BenchmarkStoreChange1000 is what one store change costs a replica that
// serves 1,000 stored skills: merging the view into a new snapshot, the
// unchanged revisions' parsed SKILL.md reused.
func BenchmarkStoreChange1000(b *testing.B) {
	js := storeJS(b)
	putBench(b, openBenchStore(b, js), 1000)
	s := newTestServer(b, b.TempDir(), func(o *Options) { o.Store = openBenchStore(b, js) })
	for b.Loop() {
		s.storeChanged()
	}
	if n := len(s.snap.Load().view("acme", "")); n != 1000 {
		b.Fatalf("view has %d skills", n)
	}
}

// BenchmarkListSkillsStored1000 is BenchmarkListSkills1000 with the 1,000
// skills stored for tenant acme through the store instead of files: the
// listing must cost the same (both serve an in-memory snapshot).
func BenchmarkListSkillsStored1000(b *testing.B) {
	js := storeJS(b)
	putBench(b, openBenchStore(b, js), 1000)
	// A fresh store loads the 1,000 manifests on Open, as a new replica does.
	s := newTestServer(b, b.TempDir(), func(o *Options) { o.Store = openBenchStore(b, js) })
	benchListSkills(b, s, 1000)
}

// BenchmarkUploadVisible measures an upload's time from PutSkill on one
// replica to the new revision being served by another replica's GetSkill
// (target: p99 at most 2 s on loopback). Both replicas have their own store
// on one NATS server; replica b applies the watch the way Server.Run does.
func BenchmarkUploadVisible(b *testing.B) {
	js := storeJS(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newTestServer(b, b.TempDir(), func(o *Options) { o.Store = openBenchStore(b, js) })
	stB := openBenchStore(b, js)
	sb := newTestServer(b, b.TempDir(), func(o *Options) { o.Store = stB })
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = stB.Run(ctx) })
	get := &baagentv1.GetSkillRequest{Tenant: "acme", Name: "uploaded"}
	var times []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		put, err := a.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: "uploaded",
			Content: []byte(skillMD("uploaded", fmt.Sprintf("Upload number %d.", i)))})
		if err != nil {
			b.Fatal(err)
		}
		rev := put.GetSkill().GetRevision()
		for {
			g, err := sb.GetSkill(ctx, get)
			if err == nil && g.GetMetadata().GetRevision() == rev {
				break
			}
			select {
			case <-stB.Changed():
				sb.storeChanged()
			case <-time.After(10 * time.Second):
				b.Fatalf("revision %s not visible on replica b after 10 s", rev)
			}
		}
		times = append(times, time.Since(start))
	}
	testkit.ReportPercentiles(b, times)
}
