package load

import (
	"fmt"
	"math"
	"time"
)

// Histogram records durations in logarithmic buckets 1% wide from 1 µs to
// about 10 minutes, so that quantiles are within 1% and its memory is fixed
// however long a soak runs.
type Histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	min, max time.Duration
	sum      time.Duration
}

const (
	histBase    = time.Microsecond
	histGrowth  = 1.01
	histBuckets = 2100 // 1.01^2100 µs ≈ 1.3e9 s: anything longer lands in the last bucket
)

var logGrowth = math.Log(histGrowth)

// Add records one duration (negative ones count as zero).
func (h *Histogram) Add(d time.Duration) {
	d = max(d, 0)
	i := 0
	if d > histBase {
		i = min(int(math.Log(float64(d)/float64(histBase))/logGrowth)+1, histBuckets-1)
	}
	h.counts[i]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// Count is the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Quantile returns the q-quantile (0 < q ≤ 1): the upper edge of the
// bucket holding it, capped by the largest duration seen.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			if i == 0 {
				return min(histBase, h.max)
			}
			return min(time.Duration(float64(histBase)*math.Pow(histGrowth, float64(i))), h.max)
		}
	}
	return h.max
}

// Mean is the average duration.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Max is the largest duration recorded.
func (h *Histogram) Max() time.Duration { return h.max }

func (h *Histogram) String() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s mean=%s", h.n,
		ms(h.Quantile(0.5)), ms(h.Quantile(0.9)), ms(h.Quantile(0.99)), ms(h.max), ms(h.Mean()))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
