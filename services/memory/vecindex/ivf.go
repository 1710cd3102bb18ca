package vecindex

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
)

// list is one inverted list: its vectors stored contiguously.
type list struct {
	ids   []string
	types []int32
	vecs  []float32 // len(ids) * dims
}

type loc struct{ list, pos int32 }

// tenantIndex is one tenant's vectors. Without centroids it is one list
// searched exactly; with them, an IVF.
type tenantIndex struct {
	mu     sync.RWMutex
	loaded bool
	seq    int64

	dims      int
	centroids []float32 // nlist * dims; nil when exact
	top       []float32 // coarse centroids grouping the lists
	topStart  []int     // lists of top centroid c: topStart[c]..topStart[c+1]
	lists     []list
	where     map[string]loc
	typeIDs   map[string]int32
	trainedN  int // size when the centroids were trained
}

func newTenantIndex() *tenantIndex {
	t := &tenantIndex{}
	t.reset()
	return t
}

func (t *tenantIndex) reset() {
	t.loaded, t.seq, t.dims = false, 0, 0
	t.centroids, t.top, t.topStart, t.trainedN = nil, nil, nil, 0
	t.lists = []list{{}}
	t.where = map[string]loc{}
	t.typeIDs = map[string]int32{}
}

// cost estimates the bytes held.
func (t *tenantIndex) cost() int64 {
	n := int64(len(t.where))
	return 256 + n*int64(t.dims*4+96) + int64(len(t.centroids)*4)
}

func (t *tenantIndex) typeID(s string) int32 {
	if id, ok := t.typeIDs[s]; ok {
		return id
	}
	id := int32(len(t.typeIDs))
	t.typeIDs[s] = id
	return id
}

// apply sets or removes one vector.
func (t *tenantIndex) apply(c Change) {
	t.remove(c.ID)
	if len(c.Vec) == 0 {
		return
	}
	if t.dims == 0 {
		t.dims = len(c.Vec)
	}
	if len(c.Vec) != t.dims {
		return // another model's vectors are not comparable
	}
	var n float64
	for _, x := range c.Vec {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return
	}
	inv := 1 / math.Sqrt(n)
	li := 0
	if t.centroids != nil {
		li = t.nearestList(c.Vec) // the norm does not change the nearest
	}
	l := &t.lists[li]
	t.where[c.ID] = loc{int32(li), int32(len(l.ids))}
	l.ids = append(l.ids, c.ID)
	l.types = append(l.types, t.typeID(c.Type))
	for _, x := range c.Vec {
		l.vecs = append(l.vecs, float32(float64(x)*inv))
	}
}

func (t *tenantIndex) remove(id string) {
	at, ok := t.where[id]
	if !ok {
		return
	}
	delete(t.where, id)
	l := &t.lists[at.list]
	last := len(l.ids) - 1
	p := int(at.pos)
	if p != last {
		l.ids[p] = l.ids[last]
		l.types[p] = l.types[last]
		copy(l.vecs[p*t.dims:(p+1)*t.dims], l.vecs[last*t.dims:])
		t.where[l.ids[p]] = loc{at.list, at.pos}
	}
	l.ids = l.ids[:last]
	l.types = l.types[:last]
	l.vecs = l.vecs[:last*t.dims]
}

// maintain switches between exact and IVF and retrains the centroids when
// the size has changed a lot since they were trained; true when it trained.
func (t *tenantIndex) maintain(exactBelow int) bool {
	n := len(t.where)
	switch {
	case n < exactBelow/2 && t.centroids != nil:
		t.rebuild(nil, nil, nil)
	case n >= exactBelow && (t.centroids == nil || n > 2*t.trainedN || n < t.trainedN/2):
		t.rebuild(t.train(n))
		return true
	}
	return false
}

// all returns every vector's id, type and vector, in list order.
func (t *tenantIndex) all() ([]string, []int32, []float32) {
	n := len(t.where)
	ids := make([]string, 0, n)
	types := make([]int32, 0, n)
	vecs := make([]float32, 0, n*t.dims)
	for i := range t.lists {
		ids = append(ids, t.lists[i].ids...)
		types = append(types, t.lists[i].types...)
		vecs = append(vecs, t.lists[i].vecs...)
	}
	return ids, types, vecs
}

// rebuild redistributes the vectors over centroids (one exact list when
// nil).
func (t *tenantIndex) rebuild(centroids, top []float32, topStart []int) {
	ids, types, vecs := t.all()
	nl := 1
	if centroids != nil {
		nl = len(centroids) / t.dims
	}
	t.centroids, t.top, t.topStart = centroids, top, topStart
	t.trainedN = len(ids)
	t.lists = make([]list, nl)
	t.where = make(map[string]loc, len(ids))
	d := t.dims
	assign := make([]int, len(ids))
	counts := make([]int, nl)
	for i := range ids {
		if centroids != nil {
			assign[i] = t.nearestList(vecs[i*d : (i+1)*d])
		}
		counts[assign[i]]++
	}
	for li := range t.lists {
		t.lists[li] = list{ids: make([]string, 0, counts[li]), types: make([]int32, 0, counts[li]), vecs: make([]float32, 0, counts[li]*d)}
	}
	for i, id := range ids {
		l := &t.lists[assign[i]]
		t.where[id] = loc{int32(assign[i]), int32(len(l.ids))}
		l.ids = append(l.ids, id)
		l.types = append(l.types, types[i])
		l.vecs = append(l.vecs, vecs[i*d:(i+1)*d]...)
	}
}

// train runs k-means (two levels, so that training and assignment stay
// cheap) over a sample of the vectors and returns about √n centroids.
func (t *tenantIndex) train(n int) (centroids, top []float32, topStart []int) {
	_, _, vecs := t.all()
	d := t.dims
	nt := max(2, int(math.Ceil(math.Sqrt(math.Sqrt(float64(n)))))) // √n lists as nt×nt
	rng := rand.New(rand.NewPCG(uint64(n), uint64(d)))
	sampleN := min(n, nt*nt*32)
	sample := make([]float32, 0, sampleN*d)
	for _, i := range rng.Perm(n)[:sampleN] {
		sample = append(sample, vecs[i*d:(i+1)*d]...)
	}
	first := kmeans(sample, d, nt, 8, rng)
	nt = len(first) / d
	// Split each coarse cluster into up to nt lists.
	groups := make([][]float32, nt)
	for i := 0; i < sampleN; i++ {
		v := sample[i*d : (i+1)*d]
		c := nearest(first, d, v)
		groups[c] = append(groups[c], v...)
	}
	for c, g := range groups {
		m := len(g) / d
		if m == 0 {
			continue
		}
		top = append(top, first[c*d:(c+1)*d]...)
		topStart = append(topStart, len(centroids)/d)
		kk := max(1, min(nt, m/8))
		centroids = append(centroids, kmeans(g, d, kk, 8, rng)...)
	}
	topStart = append(topStart, len(centroids)/d)
	return centroids, top, topStart
}

// kmeans clusters the rows of data (d wide) into k centroids, normalised
// (spherical k-means, since the vectors are compared by cosine).
func kmeans(data []float32, d, k, iters int, rng *rand.Rand) []float32 {
	n := len(data) / d
	if k > n {
		k = n
	}
	cent := make([]float32, 0, k*d)
	for _, i := range rng.Perm(n)[:k] {
		cent = append(cent, data[i*d:(i+1)*d]...)
	}
	assign := make([]int, n)
	sums := make([]float64, k*d)
	counts := make([]int, k)
	for range iters {
		for i := 0; i < n; i++ {
			assign[i] = nearest(cent, d, data[i*d:(i+1)*d])
		}
		clear(sums)
		clear(counts)
		for i := 0; i < n; i++ {
			c := assign[i]
			counts[c]++
			row := data[i*d : (i+1)*d]
			s := sums[c*d : (c+1)*d]
			for j, v := range row {
				s[j] += float64(v)
			}
		}
		for c := 0; c < k; c++ {
			if counts[c] == 0 {
				// an empty cluster takes a random point
				i := rng.IntN(n)
				copy(cent[c*d:(c+1)*d], data[i*d:(i+1)*d])
				continue
			}
			s := sums[c*d : (c+1)*d]
			var norm float64
			for _, v := range s {
				norm += v * v
			}
			if norm == 0 {
				continue
			}
			inv := 1 / math.Sqrt(norm)
			for j, v := range s {
				cent[c*d+j] = float32(v * inv)
			}
		}
	}
	return cent
}

// nearest is the index of the row of cent (d wide) with the largest dot
// product with v.
func nearest(cent []float32, d int, v []float32) int {
	best, bi := float32(math.Inf(-1)), 0
	for c := 0; c*d < len(cent); c++ {
		if s := dot(cent[c*d:(c+1)*d], v); s > best {
			best, bi = s, c
		}
	}
	return bi
}

// nearestList picks the list of a vector: the nearest list of the
// coarseProbe coarse centroids nearest to it (all the lists would cost
// √n dot products per vector; this costs about 4·⁴√n).
func (t *tenantIndex) nearestList(v []float32) int {
	d := t.dims
	nt := len(t.top) / d
	var best [coarseProbe]int
	var bs [coarseProbe]float32
	for i := range bs {
		bs[i], best[i] = float32(math.Inf(-1)), -1
	}
	for c := 0; c < nt; c++ {
		s := dot(t.top[c*d:(c+1)*d], v)
		for i := range bs {
			if s > bs[i] {
				copy(bs[i+1:], bs[i:coarseProbe-1])
				copy(best[i+1:], best[i:coarseProbe-1])
				bs[i], best[i] = s, c
				break
			}
		}
	}
	bl, bsc := 0, float32(math.Inf(-1))
	for _, c := range best {
		if c < 0 {
			continue
		}
		for l := t.topStart[c]; l < t.topStart[c+1]; l++ {
			if s := dot(t.centroids[l*d:(l+1)*d], v); s > bsc {
				bl, bsc = l, s
			}
		}
	}
	return bl
}

const coarseProbe = 3

// dot is the dot product of two equally long vectors.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// search scores the probed lists and keeps the best k. When a type filter
// leaves fewer than k hits it probes more lists, up to all of them.
func (t *tenantIndex) search(q []float32, k int, types []string, probe float64) []Hit {
	if len(q) != t.dims || len(t.where) == 0 {
		return nil
	}
	var allow []bool
	if len(types) > 0 {
		allow = make([]bool, len(t.typeIDs))
		some := false
		for _, s := range types {
			if id, ok := t.typeIDs[s]; ok {
				allow[id] = true
				some = true
			}
		}
		if !some {
			return nil
		}
	}
	h := &topK{k: k}
	order := []int{0}
	nprobe := 1
	if t.centroids != nil {
		nl := len(t.lists)
		type cs struct {
			i int
			s float32
		}
		sc := make([]cs, nl)
		for i := 0; i < nl; i++ {
			sc[i] = cs{i, dot(t.centroids[i*t.dims:(i+1)*t.dims], q)}
		}
		sort.Slice(sc, func(a, b int) bool { return sc[a].s > sc[b].s })
		order = make([]int, nl)
		for i, c := range sc {
			order[i] = c.i
		}
		nprobe = min(nl, max(8, int(math.Ceil(float64(nl)*probe))))
	}
	done := 0
	for done < len(order) {
		for _, li := range order[done:min(nprobe, len(order))] {
			t.scan(&t.lists[li], q, allow, h)
		}
		done = min(nprobe, len(order))
		if h.Len() >= k || allow == nil {
			break
		}
		nprobe *= 2
	}
	out := make([]Hit, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		e := heap.Pop(h).(scored)
		out[i] = Hit{ID: e.id, Score: float64(e.s)}
	}
	return out
}

func (t *tenantIndex) scan(l *list, q []float32, allow []bool, h *topK) {
	d := t.dims
	for i, id := range l.ids {
		if len(allow) > 0 && !allow[l.types[i]] {
			continue
		}
		s := dot(l.vecs[i*d:(i+1)*d], q)
		if h.Len() < h.k {
			heap.Push(h, scored{id, s})
		} else if better(scored{id, s}, h.items[0]) {
			h.items[0] = scored{id, s}
			heap.Fix(h, 0)
		}
	}
}

type scored struct {
	id string
	s  float32
}

// better orders hits: higher score, then smaller id.
func better(a, b scored) bool {
	if a.s != b.s {
		return a.s > b.s
	}
	return a.id < b.id
}

// topK is a min-heap of the best k (worst at the root).
type topK struct {
	k     int
	items []scored
}

func (h *topK) Len() int           { return len(h.items) }
func (h *topK) Less(i, j int) bool { return better(h.items[j], h.items[i]) }
func (h *topK) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *topK) Push(x any)         { h.items = append(h.items, x.(scored)) }
func (h *topK) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
