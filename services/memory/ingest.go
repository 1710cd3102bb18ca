package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

// releaseTimeout bounds giving an episode back after Run's context ended.
const releaseTimeout = 5 * time.Second

// runIngest is the claim loop: it leases as many pending episodes as it has
// free workers, processes each on its own goroutine, and looks again when
// AddEpisode signals work, a worker frees up, or PollInterval passes (for
// episodes added through other replicas and leases that ran out). When ctx
// ends it waits for the workers, which give their episodes back.
func (s *Server) runIngest(ctx context.Context) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inflight int
	)
	defer wg.Wait()
	freed := make(chan struct{}, 1)
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	failures := 0
	for {
		mu.Lock()
		free := s.opts.Workers - inflight
		mu.Unlock()
		claimed := 0
		if free > 0 {
			eps, err := s.store.ClaimEpisodes(ctx, s.opts.ReplicaID, free, s.opts.Lease)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				failures++
				s.log.ErrorContext(ctx, "claiming episodes", "err", err, "failures", failures)
				if !retry.Sleep(ctx, s.opts.Backoff.Jittered(min(failures-1, 10))) {
					return nil
				}
				continue
			}
			failures = 0
			claimed = len(eps)
			for _, ep := range eps {
				mu.Lock()
				inflight++
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.process(ctx, ep)
					mu.Lock()
					inflight--
					mu.Unlock()
					select {
					case freed <- struct{}{}:
					default:
					}
				}()
			}
		}
		if claimed > 0 && claimed == free {
			continue // there may be more: claim again as workers free up
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-freed:
		case <-poll.C:
		}
	}
}

// process takes one claimed episode to SYNCED or FAILED, or gives it back
// (shutdown, or its lease nearly spent) for another claim.
func (s *Server) process(ctx context.Context, ep *store.Episode) {
	start := time.Now()
	log := s.log.With("tenant", ep.Tenant, "episode", ep.ID, "claim", ep.Attempts)
	defer func() { s.metrics.ingestDuration.Observe(time.Since(start).Seconds()) }()
	switch {
	case ep.Attempts > s.opts.MaxClaims:
		msg := fmt.Sprintf(abandonedAttemptsTemplate, s.opts.MaxClaims, lastError(ep.Error))
		s.fail(ctx, log, ep, msg, true)
		return
	case s.opts.Extractor == nil:
		s.fail(ctx, log, ep, noExtractorMessage, true)
		return
	}
	// Stay within the lease: past it another replica may claim the episode.
	pctx, cancel := context.WithTimeout(ctx, s.opts.Lease*9/10)
	defer cancel()
	var err error
	for attempt := 0; attempt < s.opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			s.metrics.episodes.WithLabelValues(outcomeRetried).Inc()
			log.WarnContext(ctx, "episode attempt failed, retrying", "attempt", attempt, "err", err)
			if !retry.Sleep(pctx, s.opts.Backoff.Jittered(attempt-1)) {
				break
			}
		}
		var out store.IngestOutcome
		out, err = s.ingest(pctx, ep)
		switch {
		case err == nil:
			s.metrics.episodes.WithLabelValues(outcomeSynced).Inc()
			log.InfoContext(ctx, "episode synced", "entities", len(out.EntityIDs), "new_entities", len(out.CreatedIDs),
				"relations", len(out.RelationIDs), "duration", time.Since(start))
			s.waiters.notify(ep.ID)
			return
		case errors.Is(err, store.ErrConflict):
			// Our lease ran out and another replica holds the episode now.
			s.metrics.episodes.WithLabelValues(outcomeConflict).Inc()
			log.WarnContext(ctx, "episode lease lost to another replica", "err", err)
			return
		case errors.Is(err, store.ErrNotFound):
			// Deleted while we worked on it.
			log.InfoContext(ctx, "episode deleted while processed")
			s.waiters.notify(ep.ID)
			return
		}
		if pctx.Err() != nil || !retryable(err) {
			break
		}
	}
	if pctx.Err() != nil {
		// Shutdown, or the lease is nearly spent: another claim finishes
		// it.
		s.fail(ctx, log, ep, errorMessage(err), false)
		return
	}
	s.fail(ctx, log, ep, errorMessage(err), true)
}

// fail marks ep FAILED (final) or gives it back to pending. It works after
// ctx ended (shutdown), within releaseTimeout.
func (s *Server) fail(ctx context.Context, log interface {
	WarnContext(context.Context, string, ...any)
	ErrorContext(context.Context, string, ...any)
}, ep *store.Episode, msg string, final bool) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := s.store.FailEpisode(wctx, ep.Tenant, ep.ID, s.opts.ReplicaID, msg, final)
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		s.metrics.episodes.WithLabelValues(outcomeConflict).Inc()
		log.WarnContext(ctx, "episode no longer ours to fail", "err", err)
		return
	case err != nil:
		log.ErrorContext(ctx, "failing episode", "final", final, "err", err)
		return
	}
	if final {
		s.metrics.episodes.WithLabelValues(outcomeFailed).Inc()
		log.WarnContext(ctx, "episode failed", "error", msg)
		s.waiters.notify(ep.ID)
	} else {
		s.metrics.episodes.WithLabelValues(outcomeReleased).Inc()
		log.WarnContext(ctx, "episode given back", "error", msg)
	}
}

func errorMessage(err error) string {
	if err == nil {
		return "stopped before processing"
	}
	return err.Error()
}

func lastError(msg string) string {
	if msg == "" {
		return "the replicas processing it stopped"
	}
	return msg
}

// retryable reports whether another attempt may succeed: errors that say
// so themselves (extraction's, the model client's) decide; a permanent error does not;
// anything else (network, a timeout, a model that answered badly) does.
func retryable(err error) bool {
	var xe *extract.Error
	if errors.As(err, &xe) {
		return xe.Kind == extract.Retryable
	}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		return r.Retryable()
	}
	var p *permanentError
	return !errors.As(err, &p)
}

// permanentError is a failure another attempt would repeat.
type permanentError struct{ msg string }

func (e *permanentError) Error() string { return e.msg }

// ingest runs one attempt: extract, resolve against the graph, write.
func (s *Server) ingest(ctx context.Context, ep *store.Episode) (store.IngestOutcome, error) {
	xctx, cancel := context.WithTimeout(ctx, s.opts.ExtractTimeout)
	res, err := s.opts.Extractor.Extract(xctx, ep.Content)
	cancel()
	if err != nil {
		return store.IngestOutcome{}, fmt.Errorf("extraction: %w", err)
	}
	if res == nil {
		return store.IngestOutcome{}, errors.New("extraction: no result")
	}
	s.metrics.extractionTokens.WithLabelValues("prompt").Add(float64(max(res.Usage.PromptTokens, 0)))
	s.metrics.extractionTokens.WithLabelValues("completion").Add(float64(max(res.Usage.CompletionTokens, 0)))
	ir, err := s.resolve(ctx, ep.Tenant, res)
	if err != nil {
		return store.IngestOutcome{}, err
	}
	return s.store.CompleteEpisode(ctx, ep.Tenant, ep.ID, s.opts.ReplicaID, ir)
}

// entityText is what an entity's embedding is made of.
func entityText(name, typ, summary string) string {
	var b strings.Builder
	b.WriteString(name)
	if typ != "" {
		b.WriteString(" (")
		b.WriteString(typ)
		b.WriteString(")")
	}
	if summary != "" {
		b.WriteString(": ")
		b.WriteString(summary)
	}
	return b.String()
}

func entityKey(name, typ string) string {
	return strings.ToLower(strings.TrimSpace(name)) + "\x00" + strings.ToLower(strings.TrimSpace(typ))
}

// Resolutions of an extracted entity, the values of
// baagent_memory_extracted_entities_total{resolution}.
const (
	resolvedNew     = "new"
	resolvedName    = "name"
	resolvedVector  = "vector"
	resolvedEpisode = "episode"
)

// resolve deduplicates an extraction against the tenant's graph and
// itself. Each entity, in order, is
//   - the same as an earlier entity of the episode with its name and type
//     (or merged into the same existing entity under the same name, or,
//     when both are new, as similar as the threshold with a compatible
//     name): folded into it;
//   - an existing entity with that name or alias and type: merged into it;
//   - else the nearest of the 3 most similar entities of its type whose
//     cosine similarity reaches the threshold and whose name is compatible
//     (see namesCompatible): merged into it;
//   - else new.
//
// Several names of one episode merging into one existing entity are kept
// as separate merges, so that each becomes an alias.
//
// The entities' texts are embedded in one batch. Relations are mapped to
// the resolved entities; a relation folded onto itself is dropped, and
// duplicates keep the highest confidence.
func (s *Server) resolve(ctx context.Context, tenant string, res *extract.Result) (store.IngestResult, error) {
	var ir store.IngestResult
	if len(res.Entities) == 0 {
		return ir, nil
	}
	texts := make([]string, len(res.Entities))
	for i, e := range res.Entities {
		texts[i] = entityText(e.Name, e.Type, e.Summary)
	}
	vecs, err := s.embed.Embed(ctx, texts)
	if err != nil {
		return ir, fmt.Errorf("embedding entities: %w", err)
	}
	if len(vecs) != len(texts) {
		return ir, &permanentError{fmt.Sprintf("embedding entities: %d vectors for %d texts", len(vecs), len(texts))}
	}
	into := make([]int, len(res.Entities)) // extracted index → ir.Entities index
	byKey := make(map[string]int)
	byTarget := make(map[string]int)
	for i, e := range res.Entities {
		key := entityKey(e.Name, e.Type)
		if j, ok := byKey[key]; ok {
			into[i] = j
			foldInto(&ir.Entities[j], e)
			s.metrics.entities.WithLabelValues(resolvedEpisode).Inc()
			continue
		}
		target, how, err := s.existing(ctx, tenant, e, vecs[i])
		if err != nil {
			return ir, err
		}
		j := -1
		if target == "" {
			// A new entity close to another new one of this episode.
			for k := range ir.Entities {
				x := &ir.Entities[k]
				if x.MergeInto == "" && strings.EqualFold(x.Type, e.Type) && namesCompatible(x.Name, e.Name) &&
					cosine(x.Embedding, vecs[i]) >= s.opts.DedupeThreshold {
					j, how = k, resolvedEpisode
					break
				}
			}
		} else if k, ok := byTarget[target]; ok && strings.EqualFold(ir.Entities[k].Name, e.Name) {
			j, how = k, resolvedEpisode
		}
		if j >= 0 {
			into[i] = j
			byKey[key] = j
			foldInto(&ir.Entities[j], e)
			s.metrics.entities.WithLabelValues(how).Inc()
			continue
		}
		// A new entity, or a merge (several names of one episode may merge
		// into one entity: each becomes an alias).
		j = len(ir.Entities)
		into[i], byKey[key] = j, j
		if _, ok := byTarget[target]; target != "" && !ok {
			byTarget[target] = j
		}
		ir.Entities = append(ir.Entities, store.ExtractedEntity{
			MergeInto: target, Name: e.Name, Type: e.Type, Summary: e.Summary,
			Attributes: cloneAttrs(e.Attributes), Embedding: vecs[i],
		})
		s.metrics.entities.WithLabelValues(how).Inc()
	}

	byName := make(map[string]int, len(res.Entities))
	for i, e := range res.Entities {
		n := strings.ToLower(strings.TrimSpace(e.Name))
		if _, ok := byName[n]; !ok {
			byName[n] = into[i]
		}
	}
	type relKey struct {
		src, dst int
		typ      string
	}
	seen := make(map[relKey]int)
	for _, r := range res.Relations {
		src, ok1 := byName[strings.ToLower(strings.TrimSpace(r.Source))]
		dst, ok2 := byName[strings.ToLower(strings.TrimSpace(r.Target))]
		if !ok1 || !ok2 || src == dst || r.Type == "" {
			continue
		}
		conf := r.Confidence
		switch {
		case math.IsNaN(conf) || conf <= 0:
			conf = 0.5 // not given: a neutral weight
		case conf > 1:
			conf = 1
		}
		k := relKey{src, dst, r.Type}
		if i, ok := seen[k]; ok {
			if conf > ir.Relations[i].Confidence {
				ir.Relations[i].Confidence = conf
				ir.Relations[i].Fact = r.Fact
			}
			continue
		}
		seen[k] = len(ir.Relations)
		ir.Relations = append(ir.Relations, store.ExtractedRelation{Source: src, Target: dst, Type: r.Type, Fact: r.Fact, Confidence: conf})
	}
	return ir, nil
}

// existing finds the graph entity e is: by name or alias and type, else
// by embedding similarity within its type.
func (s *Server) existing(ctx context.Context, tenant string, e extract.Entity, vec []float32) (string, string, error) {
	found, err := s.store.FindEntity(ctx, tenant, e.Name, e.Type)
	switch {
	case err == nil:
		return found.ID, resolvedName, nil
	case !errors.Is(err, store.ErrNotFound):
		return "", "", fmt.Errorf("finding entity %q: %w", e.Name, err)
	}
	hits, err := s.store.VectorSearch(ctx, tenant, vec, 3, []string{e.Type})
	if err != nil {
		return "", "", fmt.Errorf("similar entities of %q: %w", e.Name, err)
	}
	var close []string
	for _, h := range hits {
		if h.Score >= s.opts.DedupeThreshold {
			close = append(close, h.ID)
		}
	}
	if len(close) == 0 {
		return "", resolvedNew, nil
	}
	ents, err := s.store.GetEntities(ctx, tenant, close)
	if err != nil {
		return "", "", fmt.Errorf("similar entities of %q: %w", e.Name, err)
	}
	for _, id := range close { // best first
		for _, c := range ents {
			if c.ID == id && (namesCompatible(c.Name, e.Name) || slices.ContainsFunc(c.Aliases, func(a string) bool { return namesCompatible(a, e.Name) })) {
				return c.ID, resolvedVector, nil
			}
		}
	}
	return "", resolvedNew, nil
}

// nameWords are a name's lower-cased words, punctuation trimmed.
func nameWords(name string) []string {
	return queryWords(strings.ToLower(name))
}

// namesCompatible is the guard on merging by similarity: descriptions
// alike are not enough (two customers of one segment and region read the
// same), the names must be compatible too — every word of the shorter
// name begins a word of the longer one (`Acme Labs` and `Acme Labs Inc`,
// `Globex Corp` and `Globex Corporation`), or the shorter is the longer's
// initials (`IBM`, `International Business Machines`).
func namesCompatible(a, b string) bool {
	wa, wb := nameWords(a), nameWords(b)
	if len(wa) == 0 || len(wb) == 0 {
		return false
	}
	// The shorter name by word count, then length, then text: a total
	// order, so that the test does not depend on the argument order.
	ka, kb := strings.Join(wa, " "), strings.Join(wb, " ")
	if c := cmp.Or(cmp.Compare(len(wa), len(wb)), cmp.Compare(len(ka), len(kb)), strings.Compare(ka, kb)); c > 0 {
		wa, wb = wb, wa
	}
	if len(wa) == 1 && len(wb) > 1 && len([]rune(wa[0])) == len(wb) {
		initials := make([]rune, 0, len(wb))
		for _, w := range wb {
			initials = append(initials, []rune(w)[0])
		}
		if string(initials) == wa[0] {
			return true
		}
	}
	for _, w := range wa {
		if !slices.ContainsFunc(wb, func(x string) bool { return strings.HasPrefix(x, w) }) {
			return false
		}
	}
	return true
}

// foldInto merges a later mention of the same entity within one episode:
// attributes are added (later values win) and the longer summary is kept.
func foldInto(x *store.ExtractedEntity, e extract.Entity) {
	if len(e.Summary) > len(x.Summary) {
		x.Summary = e.Summary
	}
	for k, v := range e.Attributes {
		if x.Attributes == nil {
			x.Attributes = make(map[string]string, len(e.Attributes))
		}
		x.Attributes[k] = v
	}
}

func cloneAttrs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cosine is the cosine similarity of two L2-normalised vectors (their dot
// product); 0 when their lengths differ.
func cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}
