package pricing

import (
	"math"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func ptr(v float64) *float64 { return &v }

func meta(input, cached, output *float64, limit int64) *baagentv1.ModelMetadata {
	return &baagentv1.ModelMetadata{InputCostPer_1M: input, CachedInputCostPer_1M: cached, OutputCostPer_1M: output, PriceMaxPromptTokens: limit}
}

func usage(prompt, cached, completion int64) *baagentv1.Usage {
	return &baagentv1.Usage{PromptTokens: prompt, CachedPromptTokens: cached, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func TestCost(t *testing.T) {
	p := ptr
	gpt4o := meta(p(2.5), p(1.25), p(10), 0)
	tiered := meta(p(1.25), p(0.31), p(10), 200_000)
	for _, tc := range []struct {
		name  string
		meta  *baagentv1.ModelMetadata
		usage *baagentv1.Usage
		want  float64
		known bool
	}{
		{"no cache", gpt4o, usage(1_000_000, 0, 1_000_000), 12.5, true},
		{"part cached", gpt4o, usage(1000, 400, 200), (600*2.5 + 400*1.25 + 200*10) / 1e6, true},
		{"all cached", gpt4o, usage(1000, 1000, 0), 1000 * 1.25 / 1e6, true},
		{"cached above prompt is capped", gpt4o, usage(1000, 5000, 0), 1000 * 1.25 / 1e6, true},
		{"negative counts are zero", gpt4o, usage(-5, -1, -7), 0, true},
		{"nil usage", gpt4o, nil, 0, true},
		{"zero usage", gpt4o, usage(0, 0, 0), 0, true},
		{"no cached price bills input", meta(p(3), nil, p(15), 0), usage(1000, 1000, 100), (1000*3 + 100*15) / 1e6, true},
		{"free model", meta(p(0), p(0), p(0), 0), usage(1000, 10, 100), 0, true},
		{"within tier", tiered, usage(200_000, 0, 10), (200_000*1.25 + 10*10) / 1e6, true},
		{"beyond tier", tiered, usage(200_001, 0, 10), 0, false},
		{"beyond tier though cached", tiered, usage(250_000, 250_000, 0), 0, false},
		{"nil meta", nil, usage(10, 0, 10), 0, false},
		{"no prices", &baagentv1.ModelMetadata{}, usage(10, 0, 10), 0, false},
		{"no output price", meta(p(1), nil, nil, 0), usage(10, 0, 0), 0, false},
		{"no input price", meta(nil, p(1), p(1), 0), usage(0, 0, 10), 0, false},
		{"negative price", meta(p(-1), nil, p(1), 0), usage(10, 0, 10), 0, false},
		{"NaN price", meta(p(1), nil, p(math.NaN()), 0), usage(10, 0, 10), 0, false},
		{"infinite cached price", meta(p(1), p(math.Inf(1)), p(1), 0), usage(10, 5, 10), 0, false},
		{"overflowing cost", meta(p(math.MaxFloat64), nil, p(math.MaxFloat64), 0), usage(math.MaxInt64, 0, math.MaxInt64), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := Cost(tc.meta, tc.usage)
			if known != tc.known || math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("Cost = %v, %v; want %v, %v", got, known, tc.want, tc.known)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		u    *baagentv1.Usage
		want Tokens
	}{
		{nil, Tokens{}},
		{usage(100, 30, 7), Tokens{Input: 70, CachedInput: 30, Output: 7}},
		{usage(100, 300, 7), Tokens{Input: 0, CachedInput: 100, Output: 7}},
		{usage(-1, 5, -2), Tokens{}},
	} {
		if got := Split(tc.u); got != tc.want {
			t.Errorf("Split(%v) = %+v, want %+v", tc.u, got, tc.want)
		}
	}
}

func TestPriced(t *testing.T) {
	p := ptr
	if Priced(nil) || Priced(&baagentv1.ModelMetadata{}) || Priced(meta(p(1), nil, nil, 0)) {
		t.Fatal("a model without both prices is priced")
	}
	if !Priced(meta(p(1), nil, p(2), 0)) || !Priced(meta(p(1), p(0.5), p(2), 10)) {
		t.Fatal("a model with input and output prices is not priced")
	}
	if Priced(meta(p(1), p(-0.5), p(2), 0)) {
		t.Fatal("a negative cached price is accepted")
	}
}

// FuzzCost checks the invariants of any price and usage: no panic, an
// unknown cost is 0, a known cost is finite and non-negative, the split is
// non-negative, and a prompt beyond the tier limit is never priced.
func FuzzCost(f *testing.F) {
	f.Add(2.5, 1.25, 10.0, int64(0), int64(1000), int64(100), int64(50), true)
	f.Add(1.25, 0.31, 10.0, int64(200_000), int64(200_001), int64(0), int64(0), true)
	f.Add(3.0, 0.0, 15.0, int64(0), int64(-1), int64(5), int64(-3), false)
	f.Fuzz(func(t *testing.T, in, cached, out float64, limit, prompt, cachedTok, completion int64, hasCached bool) {
		m := meta(&in, nil, &out, limit)
		if hasCached {
			m.CachedInputCostPer_1M = &cached
		}
		usd, known := Cost(m, usage(prompt, cachedTok, completion))
		if !known {
			if usd != 0 {
				t.Fatalf("unknown cost %v is not 0", usd)
			}
			return
		}
		if math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0 {
			t.Fatalf("known cost %v", usd)
		}
		s := Split(usage(prompt, cachedTok, completion))
		if s.Input < 0 || s.CachedInput < 0 || s.Output < 0 {
			t.Fatalf("negative split %+v", s)
		}
		if limit > 0 && s.Input+s.CachedInput > limit {
			t.Fatalf("priced a prompt of %d beyond the tier limit %d", s.Input+s.CachedInput, limit)
		}
	})
}

// BenchmarkCost is the cost of one model call from its metadata and usage.
func BenchmarkCost(b *testing.B) {
	m := meta(ptr(2.5), ptr(1.25), ptr(10), 0)
	u := usage(12_000, 8_000, 400)
	b.ReportAllocs()
	var sum float64
	for b.Loop() {
		usd, _ := Cost(m, u)
		sum += usd
	}
	if sum <= 0 {
		b.Fatal("no cost")
	}
}
