package encoding

import (
	"runtime"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"

	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
)

// benchCorpus is about 6 MB of English prose, Chinese Markdown and Go source
// in equal parts, in chunks of about 4 KB.
func benchCorpus() ([]string, int64) {
	chunks := testcorpus.Bench(1, 6<<20, 4<<10)
	var n int64
	for _, c := range chunks {
		n += int64(len(c))
	}
	return chunks, n
}

// BenchmarkCount counts the corpus with github.com/tiktoken-go/tokenizer
// (lib) and with this package's engine (ours), in the same run.
func BenchmarkCount(b *testing.B) {
	chunks, size := benchCorpus()
	set := newTestSet(b)
	for _, name := range []string{Cl100kBase, O200kBase} {
		lib, err := tokenizer.Get(tokenizer.Encoding(name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("impl=lib/enc="+name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				for _, c := range chunks {
					if _, err := lib.Count(c); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		e, _ := set.Get(name)
		b.Run("impl=ours/enc="+name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					if _, err := e.Count(c, false); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkEncode encodes the corpus to ids, library and ours.
func BenchmarkEncode(b *testing.B) {
	chunks, size := benchCorpus()
	set := newTestSet(b)
	for _, name := range []string{Cl100kBase, O200kBase} {
		lib, _ := tokenizer.Get(tokenizer.Encoding(name))
		b.Run("impl=lib/enc="+name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				for _, c := range chunks {
					if _, _, err := lib.Encode(c); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		e, _ := set.Get(name)
		b.Run("impl=ours/enc="+name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				for _, c := range chunks {
					if _, err := e.Encode(c, false); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCountWorstCase counts 1 MiB without a break: one repeated
// character, and unbroken CJK (one piece in every encoding's pattern).
func BenchmarkCountWorstCase(b *testing.B) {
	set := newTestSet(b)
	cjk := strings.Repeat("中文字符测试数据分析报告", 1<<20/36)
	for _, name := range []string{Cl100kBase, O200kBase} {
		e, _ := set.Get(name)
		for _, c := range []struct{ name, text string }{
			{"repeated-1MiB", strings.Repeat("a", 1<<20)},
			{"cjk-1MiB", cjk},
		} {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(c.text)))
				for b.Loop() {
					if _, err := e.Count(c.text, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCount64KiB: one 64 KiB call; allocs/op must be 0.
func BenchmarkCount64KiB(b *testing.B) {
	set := newTestSet(b)
	text := strings.ToValidUTF8(strings.Join(testcorpus.Bench(2, 64<<10, 64<<10), "")[:64<<10], "")
	for _, name := range []string{Cl100kBase, O200kBase} {
		e, _ := set.Get(name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			e.Count(text, false) // warm-up: a pooled state and its caches
			for b.Loop() {
				e.Count(text, false)
			}
		})
	}
}

// BenchmarkNewSet is the start-up cost: all four vocabularies loaded and
// indexed, the character classes built. heap-B is what the Set keeps.
func BenchmarkNewSet(b *testing.B) {
	var keep *Set
	var heap uint64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := NewSet()
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		keep = s
	}
	b.ReportMetric(float64(heap), "heap-B")
	runtime.KeepAlive(keep)
}
