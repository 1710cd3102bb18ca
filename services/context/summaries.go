package contextsvc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
)

// Background summaries (docs/concepts/context-compression.md: SUMMARIZE runs off
// the request path, writes the SummaryCache, and the window uses EXTRACT until
// the summary is ready).
const (
	// failureBackoff is how long a failed summary is not retried; the window
	// uses extracts meanwhile.
	failureBackoff = time.Minute
	// maxSummaryDepth bounds summaries of summaries.
	maxSummaryDepth = 6
)

// summaryJob asks for the summary of one segment of a conversation.
type summaryJob struct {
	key       contentHash
	conv      convKey
	model     string
	maxTokens int
	ttl       time.Duration
	msgs      []*baagentv1.ChatMessage
	queued    time.Time
}

type cachedSummary struct {
	conv convKey
	text string
}

type hourSpend struct {
	hour int64
	usd  float64
}

// summaries owns the summary cache, the queue of summary jobs and the workers
// that run them (started by Server.Run).
type summaries struct {
	sum         Summarizer
	counter     *counter
	log         *slog.Logger
	m           *metrics
	now         func() time.Time
	callTimeout time.Duration
	workers     int

	cache   *lru.Cache[contentHash, cachedSummary]
	failed  *lru.Cache[contentHash, string]
	spend   *lru.Cache[string, *hourSpend]
	deleted *lru.Cache[convKey, time.Time]
	queue   chan *summaryJob
	running atomic.Int32

	mu       sync.Mutex
	inflight map[contentHash]bool // at most cap(queue) + workers entries
	spendMu  sync.Mutex
}

func newSummaries(sum Summarizer, c *counter, log *slog.Logger, m *metrics, o Options) *summaries {
	return &summaries{
		sum:         sum,
		counter:     c,
		log:         log,
		m:           m,
		now:         time.Now,
		callTimeout: o.SummaryCallTimeout,
		workers:     o.SummaryWorkers,
		cache:       lru.New[contentHash, cachedSummary](lru.Options{MaxEntries: o.SummaryCacheEntries}),
		failed:      lru.New[contentHash, string](lru.Options{MaxEntries: o.SummaryCacheEntries}),
		spend:       lru.New[string, *hourSpend](lru.Options{MaxEntries: 4096}),
		deleted:     lru.New[convKey, time.Time](lru.Options{MaxEntries: 4096}),
		queue:       make(chan *summaryJob, o.SummaryQueue),
		inflight:    map[contentHash]bool{},
	}
}

// available reports whether summaries can be computed: a summarizer is
// configured and Run is working the queue.
func (s *summaries) available() bool { return s.sum != nil && s.running.Load() > 0 }

func (s *summaries) get(k contentHash) (string, bool) {
	v, ok := s.cache.Get(k)
	return v.text, ok
}

// forget drops a deleted conversation's summaries and discards the results
// of its jobs still running.
func (s *summaries) forget(conv convKey) {
	s.deleted.Put(conv, s.now(), 0, 0)
	s.cache.RemoveIf(func(_ contentHash, v cachedSummary) bool { return v.conv == conv })
}

// segmentKey is a segment's summary cache key: its content, the
// conversation (summaries never cross conversations or tenants) and how it
// is summarized.
func segmentKey(conv convKey, cfg compressionConfig, msgs []*storedMsg) contentHash {
	h := sha256.New()
	for _, s := range []string{"summary/1", conv.tenant, conv.id, cfg.summarizerModel} {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	h.Write(binary.AppendUvarint(nil, uint64(cfg.summaryMax)))
	for _, m := range msgs {
		h.Write(m.hash[:])
	}
	var k contentHash
	h.Sum(k[:0])
	return k
}

// request queues the summaries of segments a window wanted. pending is
// true when at least one is being computed; notes say why others are not.
func (s *summaries) request(conv convKey, cfg compressionConfig, segs []*segment) (pending bool, notes []string) {
	noted := map[string]bool{}
	note := func(n string) {
		if !noted[n] {
			noted[n] = true
			notes = append(notes, n)
		}
	}
	for _, seg := range segs {
		if _, ok := s.cache.Get(seg.key); ok {
			pending = true // finished since the window was planned
			continue
		}
		if why, ok := s.failed.Get(seg.key); ok {
			note("summarizer failed (" + why + "); extract used")
			continue
		}
		if !s.available() {
			note("no summarizer is running; extract used")
			continue
		}
		s.mu.Lock()
		if s.inflight[seg.key] {
			s.mu.Unlock()
			pending = true
			continue
		}
		cost := estimateCost(baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE, seg.raw)
		if !s.reserve(conv.tenant, cost, cfg.maxCostPerHour) {
			s.mu.Unlock()
			note(fmt.Sprintf("hourly compression cost cap of %.4g USD reached; extract used", cfg.maxCostPerHour))
			continue
		}
		job := &summaryJob{key: seg.key, conv: conv, model: cfg.summarizerModel, maxTokens: cfg.summaryMax, ttl: cfg.cacheTTL, queued: s.now()}
		for _, m := range seg.msgs {
			job.msgs = append(job.msgs, m.msg)
		}
		select {
		case s.queue <- job:
			s.inflight[seg.key] = true
			pending = true
		default:
			s.reserve(conv.tenant, -cost, cfg.maxCostPerHour)
			s.m.summaryQueueFull.Inc()
			note("summary queue full; extract used")
		}
		s.mu.Unlock()
	}
	return pending, notes
}

// reserve adds usd to the tenant's spend in the current hour when it stays
// within limit (max_compression_cost_per_hour); a negative usd returns
// a reservation.
func (s *summaries) reserve(tenant string, usd, limit float64) bool {
	s.spendMu.Lock()
	defer s.spendMu.Unlock()
	hour := s.now().Unix() / 3600
	sp, ok := s.spend.Get(tenant)
	if !ok || sp.hour != hour {
		sp = &hourSpend{hour: hour}
		s.spend.Put(tenant, sp, 0, 0)
	}
	if usd > 0 && sp.usd+usd > limit {
		return false
	}
	sp.usd = max(0, sp.usd+usd)
	return true
}

// run works the queue with the configured number of workers until ctx is
// done.
func (s *summaries) run(ctx context.Context) {
	if s.sum == nil {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	for range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.running.Add(1)
			defer s.running.Add(-1)
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-s.queue:
					s.process(ctx, job)
				}
			}
		}()
	}
	wg.Wait()
}

func (s *summaries) process(ctx context.Context, job *summaryJob) {
	defer func() {
		s.mu.Lock()
		delete(s.inflight, job.key)
		s.mu.Unlock()
	}()
	text, err := s.summarize(ctx, job)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: not the model's fault
		}
		s.m.summarizerFailures.Inc()
		s.failed.Put(job.key, err.Error(), 0, failureBackoff)
		s.log.Warn("summary failed; extract is used instead", "tenant", job.conv.tenant, "conversation_id", job.conv.id,
			"model", job.model, "messages", len(job.msgs), "err", err)
		return
	}
	if at, ok := s.deleted.Get(job.conv); ok && !at.Before(job.queued) {
		return // the conversation was deleted while we worked
	}
	s.m.summaries.Inc()
	s.cache.Put(job.key, cachedSummary{conv: job.conv, text: text}, 0, job.ttl)
}

// The summarizer prompts.
const (
	summarySystem = "You summarize part of a conversation between a user and an AI agent that uses tools, " +
		"so that the agent can continue the task without the full history. Write plain text only."
	summaryFocus = "Focus on:\n1. The user's goals and requests\n2. The tool calls made and their key results " +
		"(figures, names, files, errors)\n3. Decisions and conclusions reached\n4. The current state of the task\n"
)

func conversationPrompt(body string, maxTokens int) string {
	return "Summarize the conversation excerpt below. " + summaryFocus +
		fmt.Sprintf("Keep the summary under %d tokens.\n\n<excerpt>\n", maxTokens) + body + "\n</excerpt>"
}

func mergePrompt(body string, maxTokens int) string {
	return "The texts below summarize consecutive parts of one conversation, oldest first. Merge them into one summary. " +
		summaryFocus + fmt.Sprintf("Keep the summary under %d tokens.\n\n<summaries>\n", maxTokens) + body + "\n</summaries>"
}

// errWindowTooSmall is returned when the summarizer model cannot hold even a
// couple of summaries.
var errWindowTooSmall = errors.New("summarizer model window too small")

// summarize computes a job's summary. The prompt never exceeds the
// summarizer model's own window: the excerpt is split into chunks that fit,
// each chunk is summarized, and the partial summaries are merged the same
// way until one remains.
func (s *summaries) summarize(ctx context.Context, job *summaryJob) (string, error) {
	mi, err := s.counter.modelInfo(ctx, job.model)
	if err != nil {
		return "", err
	}
	sc := &summaryCall{s: s, job: job, mi: mi, mg: newMarginer(mi.GetSafetyMargin())}
	fixed, err := s.counter.fixedCount(ctx, job.model, mi, nil)
	if err != nil {
		return "", err
	}
	sc.priming = fixed.priming
	sc.limit = sc.mg.rawFor(mi.GetMetadata().GetContextLength() - int64(job.maxTokens))
	lines := make([]string, len(job.msgs))
	for i, m := range job.msgs {
		lines[i] = summaryLine(m)
	}
	return sc.texts(ctx, lines, false, 0)
}

// summaryCall is one job's walk through chunks.
type summaryCall struct {
	s       *summaries
	job     *summaryJob
	mi      *baagentv1.ModelInfo
	mg      marginer
	priming int64
	limit   int64 // raw tokens a prompt may have
}

func (c *summaryCall) prompt(parts []string, merge bool) string {
	if merge {
		body := ""
		for i, p := range parts {
			if i > 0 {
				body += "\n\n"
			}
			body += fmt.Sprintf("[Part %d]\n%s", i+1, p)
		}
		return mergePrompt(body, c.job.maxTokens)
	}
	body := ""
	for i, p := range parts {
		if i > 0 {
			body += "\n"
		}
		body += p
	}
	return conversationPrompt(body, c.job.maxTokens)
}

// size is the raw count of a prompt as the summarizer model would see it.
func (c *summaryCall) size(ctx context.Context, prompt string) (int64, error) {
	msgs := []countable{textMessage(baagentv1.Role_ROLE_SYSTEM, summarySystem), textMessage(baagentv1.Role_ROLE_USER, prompt)}
	n, err := c.s.counter.rawCounts(ctx, c.job.model, c.mi, msgs)
	if err != nil {
		return 0, err
	}
	return n[0] + n[1] + c.priming, nil
}

func (c *summaryCall) texts(ctx context.Context, parts []string, merge bool, depth int) (string, error) {
	if depth > maxSummaryDepth {
		return "", fmt.Errorf("summary did not converge after %d levels", maxSummaryDepth)
	}
	prompt := c.prompt(parts, merge)
	n, err := c.size(ctx, prompt)
	if err != nil {
		return "", err
	}
	if n <= c.limit {
		return c.call(ctx, prompt)
	}
	if len(parts) == 1 {
		cut, err := c.shrink(ctx, parts[0], merge)
		if err != nil {
			return "", err
		}
		return c.call(ctx, c.prompt([]string{cut}, merge))
	}
	chunks, err := c.chunk(ctx, parts, merge)
	if err != nil {
		return "", err
	}
	partial := make([]string, 0, len(chunks))
	for _, ch := range chunks {
		text, err := c.texts(ctx, ch, merge, depth+1)
		if err != nil {
			return "", err
		}
		partial = append(partial, text)
	}
	return c.texts(ctx, partial, true, depth+1)
}

// chunk splits parts into consecutive groups whose prompts fit, greedily; a
// group is never empty and always smaller than parts.
func (c *summaryCall) chunk(ctx context.Context, parts []string, merge bool) ([][]string, error) {
	empty, err := c.size(ctx, c.prompt(nil, merge))
	if err != nil {
		return nil, err
	}
	room := c.limit - empty
	if room < int64(2*c.job.maxTokens) {
		return nil, fmt.Errorf("%w: model %q has %d tokens, a prompt needs %d plus room for %d-token summaries",
			errWindowTooSmall, c.job.model, c.mi.GetMetadata().GetContextLength(), c.mg.apply(empty), c.job.maxTokens)
	}
	cs := make([]countable, len(parts))
	for i, p := range parts {
		cs[i] = textMessage(baagentv1.Role_ROLE_USER, p)
	}
	sizes, err := c.s.counter.rawCounts(ctx, c.job.model, c.mi, cs)
	if err != nil {
		return nil, err
	}
	var out [][]string
	var cur []string
	var used int64
	for i, p := range parts {
		if len(cur) > 0 && used+sizes[i] > room {
			out = append(out, cur)
			cur, used = nil, 0
		}
		cur = append(cur, p)
		used += sizes[i]
	}
	out = append(out, cur)
	if len(out) == 1 && len(parts) > 1 {
		// Per-part counts said it fits but the whole prompt did not: halve.
		mid := len(parts) / 2
		out = [][]string{parts[:mid], parts[mid:]}
	}
	return out, nil
}

// shrink cuts one part until its prompt fits.
func (c *summaryCall) shrink(ctx context.Context, part string, merge bool) (string, error) {
	runes := []rune(part)
	for range 8 {
		n, err := c.size(ctx, c.prompt([]string{string(runes)}, merge))
		if err != nil {
			return "", err
		}
		if n <= c.limit {
			return string(runes), nil
		}
		keep := int(float64(len(runes)) * float64(c.limit) / float64(n) * 0.9)
		if keep <= 0 {
			break
		}
		runes = append(runes[:keep:keep], []rune("...")...)
	}
	return "", fmt.Errorf("%w: model %q cannot hold one message of the excerpt", errWindowTooSmall, c.job.model)
}

func (c *summaryCall) call(ctx context.Context, prompt string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.callTimeout)
	defer cancel()
	return c.s.sum.Summarize(ctx, SummaryRequest{Model: c.job.model, System: summarySystem, Prompt: prompt, MaxTokens: c.job.maxTokens})
}

func textMessage(role baagentv1.Role, text string) countable {
	m := &baagentv1.ChatMessage{Role: role, Content: text}
	return countable{msg: m, hash: hashContent(m)}
}
