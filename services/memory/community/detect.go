package community

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/graph"
	gcommunity "gonum.org/v1/gonum/graph/community"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/simple"
)

// Defaults of detection.
const (
	// DefaultResolution is the modularity resolution γ: above 1 favours
	// smaller communities, below 1 larger ones.
	DefaultResolution = 1.0
	// DefaultMinSize is the smallest community kept.
	DefaultMinSize = 3
	// seed makes detection deterministic: the same graph always gives the
	// same communities.
	seed = 0x6d656d6f7279 // "memory"
	// maxWeight caps an edge weight so that sums stay finite.
	maxWeight = 1e6
)

// Edge is a weighted RELATES_TO edge between two entities, by id. The
// direction does not matter; repeated edges between the same pair add up.
type Edge struct {
	Source, Target string
	Weight         float64
}

// Detect groups the entities of edges into communities with the Louvain
// method (gonum's Modularize on the weighted undirected graph, seeded, so
// deterministic) at resolution (DefaultResolution when <= 0 or not
// finite), keeping communities of at least DefaultMinSize members. Each
// community lists its entity ids sorted; communities come largest first,
// ties by their first id. Edges with an empty endpoint, a self loop, or a
// weight that is not a positive finite number are ignored.
func Detect(edges []Edge, resolution float64) [][]string {
	return DetectMinSize(edges, resolution, DefaultMinSize)
}

// DetectMinSize is Detect keeping communities of at least minSize members
// (1 keeps every entity of an edge).
func DetectMinSize(edges []Edge, resolution float64, minSize int) [][]string {
	if !(resolution > 0) || math.IsInf(resolution, 0) {
		resolution = DefaultResolution
	}
	minSize = max(minSize, 1)
	g, ids := buildGraph(edges)
	if g == nil {
		return nil
	}
	reduced := gcommunity.Modularize(g, resolution, rand.NewPCG(seed, seed))
	var out [][]string
	for _, c := range reduced.Communities() {
		if len(c) < minSize {
			continue
		}
		members := make([]string, len(c))
		for i, n := range c {
			members[i] = ids[n.ID()]
		}
		slices.Sort(members)
		out = append(out, members)
	}
	slices.SortFunc(out, func(a, b []string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a[0], b[0])
	})
	return out
}

// buildGraph numbers the entities in sorted id order and merges the edges
// into a graph whose iteration order is fixed, so that Louvain sees the
// same graph, in the same order, for the same edges in any order.
func buildGraph(edges []Edge) (*weightedGraph, []string) {
	type pair struct{ a, b string }
	weights := map[pair]float64{}
	for _, e := range edges {
		w := e.Weight
		if e.Source == "" || e.Target == "" || e.Source == e.Target || !(w > 0) || math.IsInf(w, 0) {
			continue
		}
		p := pair{e.Source, e.Target}
		if p.b < p.a {
			p.a, p.b = p.b, p.a
		}
		weights[p] = math.Min(weights[p]+w, maxWeight)
	}
	if len(weights) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	var ids []string
	for p := range weights {
		for _, id := range []string{p.a, p.b} {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	index := make(map[string]int64, len(ids))
	for i, id := range ids {
		index[id] = int64(i)
	}
	g := &weightedGraph{adj: make([][]int64, len(ids)), w: make([][]float64, len(ids))}
	for p, w := range weights {
		a, b := index[p.a], index[p.b]
		g.adj[a] = append(g.adj[a], b)
		g.w[a] = append(g.w[a], w)
		g.adj[b] = append(g.adj[b], a)
		g.w[b] = append(g.w[b], w)
	}
	for i := range g.adj {
		sort.Sort(byNeighbour{g.adj[i], g.w[i]})
	}
	g.nodes = make([][]graph.Node, len(ids))
	for i, adj := range g.adj {
		ns := make([]graph.Node, len(adj))
		for j, v := range adj {
			ns[j] = simple.Node(v)
		}
		g.nodes[i] = ns
	}
	return g, ids
}

type byNeighbour struct {
	adj []int64
	w   []float64
}

func (b byNeighbour) Len() int           { return len(b.adj) }
func (b byNeighbour) Less(i, j int) bool { return b.adj[i] < b.adj[j] }
func (b byNeighbour) Swap(i, j int) {
	b.adj[i], b.adj[j] = b.adj[j], b.adj[i]
	b.w[i], b.w[j] = b.w[j], b.w[i]
}

// weightedGraph is an undirected weighted graph on the nodes 0..n-1 with
// sorted adjacency lists: a deterministic graph.WeightedUndirected.
type weightedGraph struct {
	adj   [][]int64
	w     [][]float64
	nodes [][]graph.Node
}

var (
	_ graph.Undirected = (*weightedGraph)(nil)
	_ graph.Weighted   = (*weightedGraph)(nil)
)

func (g *weightedGraph) has(id int64) bool { return id >= 0 && id < int64(len(g.adj)) }

func (g *weightedGraph) Node(id int64) graph.Node {
	if !g.has(id) {
		return nil
	}
	return simple.Node(id)
}

func (g *weightedGraph) Nodes() graph.Nodes {
	return iterator.NewImplicitNodes(0, len(g.adj), func(id int) graph.Node { return simple.Node(id) })
}

func (g *weightedGraph) From(id int64) graph.Nodes {
	if !g.has(id) {
		return graph.Empty
	}
	return iterator.NewOrderedNodes(g.nodes[id])
}

// find returns the position of v in u's adjacency list, or -1.
func (g *weightedGraph) find(u, v int64) int {
	if !g.has(u) || !g.has(v) {
		return -1
	}
	adj := g.adj[u]
	i := sort.Search(len(adj), func(i int) bool { return adj[i] >= v })
	if i < len(adj) && adj[i] == v {
		return i
	}
	return -1
}

func (g *weightedGraph) HasEdgeBetween(x, y int64) bool { return g.find(x, y) >= 0 }

func (g *weightedGraph) Edge(u, v int64) graph.Edge { return g.WeightedEdge(u, v) }

func (g *weightedGraph) EdgeBetween(x, y int64) graph.Edge { return g.WeightedEdge(x, y) }

func (g *weightedGraph) WeightedEdge(u, v int64) graph.WeightedEdge {
	i := g.find(u, v)
	if i < 0 {
		return nil
	}
	return simple.WeightedEdge{F: simple.Node(u), T: simple.Node(v), W: g.w[u][i]}
}

// Weight is the weight of the edge between x and y; a node has no weight
// to itself (no self loops).
func (g *weightedGraph) Weight(x, y int64) (float64, bool) {
	if x == y {
		return 0, g.has(x)
	}
	i := g.find(x, y)
	if i < 0 {
		return 0, false
	}
	return g.w[x][i], true
}
