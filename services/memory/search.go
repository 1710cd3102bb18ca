package memory

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/store"
)

// searchPlan is a validated search with its defaults applied.
type searchPlan struct {
	tenant, query string
	mode          baagentv1.SearchMode
	topK, rrfK    int
	candidates    int
	types         []string
	weights       map[string]float64 // channels to run and their weights
}

func (s *Server) plan(req *baagentv1.SearchRequest) searchPlan {
	p := searchPlan{
		tenant: req.GetTenant(), query: req.GetQuery(), mode: req.GetMode(),
		topK: int(req.GetTopK()), rrfK: DefaultRRFK, types: req.GetEntityTypes(),
	}
	if p.mode == baagentv1.SearchMode_SEARCH_MODE_UNSPECIFIED {
		p.mode = baagentv1.SearchMode_SEARCH_MODE_HYBRID
	}
	if p.topK == 0 {
		p.topK = DefaultTopK
	}
	if req.RrfK != nil {
		p.rrfK = int(req.GetRrfK())
	}
	p.candidates = max(s.opts.ChannelCandidates, p.topK)
	switch p.mode {
	case baagentv1.SearchMode_SEARCH_MODE_VECTOR:
		p.weights = map[string]float64{channelVector: 1}
	case baagentv1.SearchMode_SEARCH_MODE_KEYWORD:
		p.weights = map[string]float64{channelKeyword: 1}
	case baagentv1.SearchMode_SEARCH_MODE_GRAPH:
		p.weights = map[string]float64{channelGraph: 1}
	default:
		p.weights = map[string]float64{
			channelVector:  weightOr(req.VectorWeight, DefaultVectorWeight),
			channelKeyword: weightOr(req.KeywordWeight, DefaultKeywordWeight),
			channelGraph:   weightOr(req.GraphWeight, DefaultGraphWeight),
		}
	}
	return p
}

func weightOr(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}

func modeLabel(m baagentv1.SearchMode) string {
	switch m {
	case baagentv1.SearchMode_SEARCH_MODE_VECTOR:
		return "vector"
	case baagentv1.SearchMode_SEARCH_MODE_KEYWORD:
		return "keyword"
	case baagentv1.SearchMode_SEARCH_MODE_GRAPH:
		return "graph"
	default:
		return "hybrid"
	}
}

// Search recalls entities: the vector, keyword and graph channels run
// concurrently and are fused by weighted reciprocal rank fusion (see
// fuse); the best top_k are hydrated with their strongest relations and
// community. In a hybrid search a channel that fails for want of the
// embedding model is left out (and logged); in a vector search it fails
// the call with Unavailable.
func (s *Server) Search(ctx context.Context, req *baagentv1.SearchRequest) (*baagentv1.SearchResponse, error) {
	if err := validateSearch(req); err != nil {
		return nil, err
	}
	start := time.Now()
	p := s.plan(req)
	lists, err := s.channels(ctx, p)
	if err != nil {
		return nil, err
	}
	fused := fuse(lists, p.rrfK)
	if len(fused) > p.topK {
		fused = fused[:p.topK]
	}
	hits, err := s.hydrate(ctx, p.tenant, fused)
	if err != nil {
		return nil, s.storeError(ctx, "Search", "entities", err)
	}
	s.metrics.searchDuration.WithLabelValues(modeLabel(p.mode)).Observe(time.Since(start).Seconds())
	return &baagentv1.SearchResponse{Hits: hits, EmbeddingModel: s.embed.Model()}, nil
}

// channels runs the channels p weighs and returns their rank lists.
func (s *Server) channels(ctx context.Context, p searchPlan) ([]rankList, error) {
	useVector := p.weights[channelVector] > 0
	useKeyword := p.weights[channelKeyword] > 0
	useGraph := p.weights[channelGraph] > 0
	var (
		vecHits, kwHits []store.Scored
		anchors         []string
		vecErr          error
	)
	g, gctx := errgroup.WithContext(ctx)
	if useVector {
		g.Go(func() error {
			vecs, err := s.embed.Embed(gctx, []string{p.query})
			if err == nil && len(vecs) != 1 {
				err = errors.New("embedder returned no vector")
			}
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				vecErr = err
				return nil
			}
			vecHits, err = s.store.VectorSearch(gctx, p.tenant, vecs[0], p.candidates, p.types)
			return err
		})
	}
	if useKeyword || useGraph {
		g.Go(func() error {
			var err error
			kwHits, err = s.store.KeywordSearch(gctx, p.tenant, p.query, p.candidates, p.types)
			return err
		})
	}
	if useGraph {
		g.Go(func() error {
			var err error
			anchors, err = s.namedEntities(gctx, p.tenant, p.query)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, s.storeError(ctx, "Search", "search", err)
	}
	if vecErr != nil {
		if p.mode == baagentv1.SearchMode_SEARCH_MODE_VECTOR {
			s.log.ErrorContext(ctx, "embedding a query", "err", vecErr)
			return nil, status.Error(codes.Unavailable, "the embedding model is unavailable")
		}
		s.log.WarnContext(ctx, "embedding a query failed; searching without the vector channel", "err", vecErr)
	}
	if p.mode == baagentv1.SearchMode_SEARCH_MODE_HYBRID {
		vecHits = cutWeak(vecHits, s.opts.VectorCutoff)
		kwHits = cutWeak(kwHits, s.opts.KeywordCutoff)
	}
	var lists []rankList
	if useVector {
		lists = append(lists, rankList{Channel: channelVector, Weight: p.weights[channelVector], Hits: vecHits})
		s.metrics.channelHits.WithLabelValues(channelVector).Add(float64(len(vecHits)))
	}
	if useKeyword {
		lists = append(lists, rankList{Channel: channelKeyword, Weight: p.weights[channelKeyword], Hits: kwHits})
		s.metrics.channelHits.WithLabelValues(channelKeyword).Add(float64(len(kwHits)))
	}
	if useGraph {
		if len(anchors) == 0 {
			// kwHits is cut in a hybrid search: its best hits stay.
			for _, h := range kwHits[:min(len(kwHits), DefaultKeywordAnchors)] {
				anchors = append(anchors, h.ID)
			}
		}
		graphHits, err := s.graphChannel(ctx, p, anchors)
		if err != nil {
			return nil, s.storeError(ctx, "Search", "graph", err)
		}
		lists = append(lists, rankList{Channel: channelGraph, Weight: p.weights[channelGraph], Hits: graphHits})
		s.metrics.channelHits.WithLabelValues(channelGraph).Add(float64(len(graphHits)))
	}
	return lists, nil
}

// cutWeak keeps the hits scoring at least cutoff times the best one. A
// vector search returns its k nearest entities however far they are, and a
// keyword search matches any word of the query; in a fusion their weak
// tail would outrank another channel's strong hits, so only the hits near
// the channel's best take part.
func cutWeak(hits []store.Scored, cutoff float64) []store.Scored {
	if len(hits) == 0 || !(cutoff > 0) || !(hits[0].Score > 0) {
		return hits
	}
	floor := hits[0].Score * cutoff
	for i, h := range hits {
		if h.Score < floor {
			return hits[:i]
		}
	}
	return hits
}

// graphChannel ranks the anchors first (path weight 1) and then the
// entities a depth-2 traversal reaches from them, strongest path first,
// keeping only entities of the requested types.
func (s *Server) graphChannel(ctx context.Context, p searchPlan, anchors []string) ([]store.Scored, error) {
	if len(anchors) == 0 {
		return nil, nil
	}
	reached, err := s.store.Traverse(ctx, p.tenant, anchors, DefaultGraphDepth, p.candidates)
	if err != nil {
		return nil, err
	}
	hits := make([]store.Scored, 0, len(anchors)+len(reached))
	for _, id := range anchors {
		hits = append(hits, store.Scored{ID: id, Score: 1})
	}
	for _, r := range reached {
		hits = append(hits, store.Scored{ID: r.ID, Score: r.Weight})
	}
	if len(p.types) == 0 {
		return hits, nil
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	ents, err := s.store.GetEntities(ctx, p.tenant, ids)
	if err != nil {
		return nil, err
	}
	keep := make(map[string]bool, len(ents))
	for _, e := range ents {
		if slices.Contains(p.types, e.Type) {
			keep[e.ID] = true
		}
	}
	return slices.DeleteFunc(hits, func(h store.Scored) bool { return !keep[h.ID] }), nil
}

// maxPhraseWords is the longest phrase of the query looked up as an
// entity name.
const maxPhraseWords = 4

// stopwords are words never looked up alone as entity names.
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"did": true, "do": true, "does": true, "for": true, "from": true, "has": true, "have": true,
	"how": true, "in": true, "is": true, "it": true, "its": true, "me": true, "my": true, "of": true,
	"on": true, "or": true, "our": true, "that": true, "the": true, "their": true, "this": true,
	"to": true, "was": true, "we": true, "were": true, "what": true, "when": true, "where": true,
	"which": true, "who": true, "whom": true, "why": true, "with": true, "you": true, "your": true,
	"about": true, "all": true, "any": true, "tell": true, "show": true, "list": true, "give": true,
}

// queryWords splits a query into words, trimming the punctuation around
// each (inner punctuation stays: `ORD-1001`, `A&B`).
func queryWords(q string) []string {
	fields := strings.Fields(q)
	out := fields[:0]
	for _, f := range fields {
		f = strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// namedEntities finds the entities the query names: phrases of up to
// maxPhraseWords words, longest first, looked up by exact name or alias;
// the words of a matched phrase are not looked up again. At most
// DefaultMaxAnchorLookups phrases are looked up.
//
// The phrases are looked up in batches (store.FindEntitiesByNames), one
// round trip for most queries: a batch is the next phrases not yet
// covered, as many as the lookups left; the covering rule then runs over
// the answers in the same order as one lookup at a time would, so the
// result is the same. A phrase a match covers before its turn was looked
// up for nothing; when the answers run out before the lookups do, the
// next batch is read.
func (s *Server) namedEntities(ctx context.Context, tenant, query string) ([]string, error) {
	words := queryWords(query)
	// The phrases in lookup order, without allocating them all (a long
	// goal has tens of thousands): next is the one after p, false at the
	// end; one-word stop words and one-letter words are no phrases.
	type phrase struct{ i, n int }
	next := func(p phrase) (phrase, bool) {
		for {
			p.i++
			if p.i+p.n > len(words) {
				p.n, p.i = p.n-1, 0
			}
			if p.n < 1 {
				return p, false
			}
			if p.n == 1 && (stopwords[strings.ToLower(words[p.i])] || len([]rune(words[p.i])) < 2) {
				continue
			}
			return p, true
		}
	}
	text := func(p phrase) string { return strings.Join(words[p.i:p.i+p.n], " ") }
	covered := make([]bool, len(words))
	isCovered := func(p phrase) bool { return slices.Contains(covered[p.i:p.i+p.n], true) }
	var (
		found   []string
		known   = map[string]*store.Entity{} // answers read so far, by store.NameKey
		fetched = 0                          // the phrases of ordinal < fetched have been asked for
		lookups = 0
	)
	ord := -1 // the ordinal of p among the phrases
	for p, ok := next(phrase{i: -1, n: min(maxPhraseWords, len(words))}); ok; p, ok = next(p) {
		ord++
		if isCovered(p) {
			continue
		}
		if lookups >= DefaultMaxAnchorLookups {
			break
		}
		lookups++
		if ord >= fetched {
			// The next uncovered phrases, as many as lookups are left
			// (this one included).
			var batch []string
			k := ord
			for q, more := p, true; more && len(batch) < min(DefaultMaxAnchorLookups-lookups+1, store.MaxFindNames); q, more = next(q) {
				if !isCovered(q) {
					batch = append(batch, text(q))
				}
				k++
			}
			fetched = k
			got, err := s.store.FindEntitiesByNames(ctx, tenant, batch)
			if err != nil {
				return nil, err
			}
			maps.Copy(known, got)
		}
		e := known[store.NameKey(text(p))]
		if e == nil {
			continue
		}
		for k := p.i; k < p.i+p.n; k++ {
			covered[k] = true
		}
		if !slices.Contains(found, e.ID) {
			found = append(found, e.ID)
		}
	}
	return found, nil
}

// hydrate reads the fused hits' strongest relations (at most
// DefaultHitRelations each), then the hits' entities and the related
// entities' names in one read, and their communities. Hits whose entity is gone (deleted meanwhile) are
// left out.
func (s *Server) hydrate(ctx context.Context, tenant string, fused []fusedHit) ([]*baagentv1.SearchHit, error) {
	if len(fused) == 0 {
		return nil, nil
	}
	ids := make([]string, len(fused))
	isHit := make(map[string]bool, len(fused))
	for i, f := range fused {
		ids[i] = f.ID
		isHit[f.ID] = true
	}
	// The relations first, so that the hits and the entities at the other
	// ends of their relations are read in one call.
	rels, err := s.store.Relations(ctx, tenant, ids, DefaultHitRelations)
	if err != nil {
		return nil, err
	}
	perEntity := make(map[string][]*store.Relation, len(ids))
	toRead := slices.Clone(ids)
	wanted := make(map[string]bool)
	for _, r := range rels {
		for _, end := range [2]string{r.SourceID, r.TargetID} {
			switch {
			case isHit[end]:
				if len(perEntity[end]) < DefaultHitRelations {
					perEntity[end] = append(perEntity[end], r)
				}
			case !wanted[end]:
				wanted[end] = true
				toRead = append(toRead, end)
			}
		}
	}
	ents, err := s.store.GetEntities(ctx, tenant, toRead)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.Entity, len(ids))
	names := make(map[string]string, len(ents))
	var communityIDs []string
	for _, e := range ents {
		names[e.ID] = e.Name
		if !isHit[e.ID] {
			continue
		}
		byID[e.ID] = e
		if e.CommunityID != "" && !slices.Contains(communityIDs, e.CommunityID) {
			communityIDs = append(communityIDs, e.CommunityID)
		}
	}
	communities := make(map[string]*store.Community, len(communityIDs))
	if len(communityIDs) > 0 {
		cs, err := s.store.GetCommunities(ctx, tenant, communityIDs)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			communities[c.ID] = c
		}
	}
	hits := make([]*baagentv1.SearchHit, 0, len(fused))
	for _, f := range fused {
		e := byID[f.ID]
		if e == nil {
			continue
		}
		h := &baagentv1.SearchHit{Entity: entityProto(e), Score: f.Score}
		for _, c := range f.Channels {
			h.Channels = append(h.Channels, &baagentv1.ChannelRank{Channel: c.Channel, Rank: clamp32(c.Rank), Score: c.Score})
		}
		for _, r := range perEntity[e.ID] {
			h.Relations = append(h.Relations, relationProto(r))
			other := r.TargetID
			if other == e.ID {
				other = r.SourceID
			}
			if n, ok := names[other]; ok {
				if h.RelatedNames == nil {
					h.RelatedNames = make(map[string]string)
				}
				h.RelatedNames[other] = n
			}
		}
		if c := communities[e.CommunityID]; c != nil {
			h.Community = communityProto(c)
		}
		hits = append(hits, h)
	}
	return hits, nil
}
