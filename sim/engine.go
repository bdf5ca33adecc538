// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Finish codes published by the engine in seq.state.
const (
	finishNone    = 0
	finishStop    = 1 // early stop (EOS) or the empty fault
	finishLength  = 2 // max_tokens reached
	finishAborted = 3 // the engine stopped (server shutdown)
)

// seq is one request inside the engine. The handler (or the background
// traffic, background.go) fills the request fields and submits it; from
// then on the engine owns the engine fields and publishes progress
// through state and notify.
type seq struct {
	// Request, read-only once submitted.
	promptTokens int
	maxTokens    int // 0: an embedding (prefill only, no token)
	minTokens    int
	reasoning    int  // the first reasoning tokens are reasoning text
	toolCall     bool // the tokens after the reasoning are a tool call (no early stop)
	ignoreEOS    bool
	empty        bool // the empty fault: stop before the first token
	// background: injected by the background traffic; no handler waits
	// for it, so the engine records all its metrics (TTFT and e2e from
	// queuedAt) and it ends as a stop at maxTokens.
	background bool
	// engineITL: the engine observes this sequence's inter-token
	// latencies at its steps (a non-streamed response, or background
	// traffic: there is no flush to time them at).
	engineITL bool
	seed      uint64
	hasher    blockHasher // hashed prompt; continues over generated tokens
	adapter   *adapter    // the LoRA adapter the request names; nil: a model
	queuedAt  time.Time   // handed to the engine (vLLM's QUEUED event)

	// Engine-owned.
	blocks      []*kvBlock
	need        int // KV blocks committed at admission (kv_allocation reserve)
	prefillLeft int
	chunk       int // prefill tokens scheduled in the current step
	generated   int
	tokensInKV  int
	prefilled   bool // the first prefill is done (its prompt tokens counted)
	preemptions int

	// Written by the engine before its first publication (or, for the
	// token instants, before the publication of the token); the handler
	// reads them only after it has seen a published state.
	scheduledAt  time.Time // first admitted (vLLM's first SCHEDULED event)
	firstTokenAt time.Time // end of the step that produced the first token
	lastTokenAt  time.Time // end of the step that produced the latest token
	cachedTokens int

	// state is generated<<8 | finish code, published after each step.
	state     atomic.Uint64
	notify    chan struct{} // capacity 1; poked after each publication; nil for background traffic
	cancelled atomic.Bool   // set by the handler when its client went away
}

func (s *seq) load() (generated int, finish int) {
	v := s.state.Load()
	return int(v >> 8), int(v & 0xff)
}

func (s *seq) publish(finish int) {
	s.state.Store(uint64(s.generated)<<8 | uint64(finish))
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

var errEngineStopped = errors.New("engine stopped")

// engine is the continuous-batching scheduler: one goroutine that admits
// waiting sequences up to max_num_seqs (and the KV-cache capacity), runs
// chunked prefill within a per-step token budget, and advances every
// running sequence by one token per step. Steps are timed by the timing
// model against absolute deadlines.
type engine struct {
	cfg      *Config
	metrics  *metrics
	cache    *kvCache
	timing   timingSchedule // read-only after newEngine
	onDemand bool           // kv_allocation on_demand: blocks as sequences grow, preemption when none is left

	submitCh chan *seq
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// Loop-owned.
	waiting   []*seq // FIFO; waitHead indexes its head
	waitHead  int
	running   []*seq
	committed int // KV blocks committed to running sequences (kv_allocation reserve)

	// Read by the metrics.
	numWaiting atomic.Int64
	numRunning atomic.Int64
	usedBlocks atomic.Int64
	// bgInFlight counts the background requests submitted and not
	// finished (background.go bounds it).
	bgInFlight atomic.Int64
	// busy is the time the engine has spent executing steps (what the
	// DCGM utilization reads).
	busy busyClock
}

func newEngine(cfg *Config, m *metrics, start time.Time) *engine {
	return &engine{
		cfg:      cfg,
		metrics:  m,
		cache:    newKVCache(cfg.BlockSize, cfg.NumKVBlocks, cfg.EnablePrefixCaching),
		timing:   newTimingSchedule(scaleTimingSteps(cfg.TimingSteps, cfg.scheduleScale()), start),
		onDemand: cfg.KVAllocation == KVAllocationOnDemand,
		submitCh: make(chan *seq, 1024),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

func (e *engine) start() { go e.loop() }

// stop aborts every sequence and ends the loop; it returns once the loop
// has exited.
func (e *engine) stop() {
	e.stopOnce.Do(func() { close(e.quit) })
	<-e.done
}

// submit queues s. It fails when the engine has stopped or ctx ends first.
func (e *engine) submit(ctx context.Context, s *seq) error {
	select {
	case <-e.quit:
		return errEngineStopped
	default:
	}
	e.numWaiting.Add(1)
	if s.adapter != nil {
		s.adapter.waiting.Add(1)
	}
	select {
	case e.submitCh <- s:
		return nil
	case <-e.quit:
		e.unwait(s)
		return errEngineStopped
	case <-ctx.Done():
		e.unwait(s)
		return ctx.Err()
	}
}

// unwait counts s out of the waiting requests.
func (e *engine) unwait(s *seq) {
	e.numWaiting.Add(-1)
	if s.adapter != nil {
		s.adapter.waiting.Add(-1)
	}
}

func (e *engine) loop() {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var deadline time.Time
	for {
		if len(e.running) == 0 && e.waitHead == len(e.waiting) {
			e.publishGauges()
			select {
			case s := <-e.submitCh:
				e.enqueue(s)
			case <-e.quit:
				e.abortAll()
				return
			}
			deadline = time.Time{} // idle: the next step starts now
		}
	drain:
		for {
			select {
			case s := <-e.submitCh:
				e.enqueue(s)
			default:
				break drain
			}
		}
		e.dropCancelledRunning()
		// As vLLM's scheduler: the running sequences first (on demand,
		// a block for the token each adds, preempting when there is
		// none), then, unless that preempted, the waiting ones.
		if !e.onDemand || !e.allocateSlots() {
			e.admit()
		}
		e.publishGauges()
		if len(e.running) == 0 {
			continue
		}
		d := e.planStep()
		if !e.cfg.ZeroLatency {
			now := time.Now()
			e.busy.begin(now, d)
			// Absolute deadlines: a step that overslept makes the next one
			// shorter, but lateness beyond one step is not made up in a
			// burst (the clock is rebased instead).
			if deadline.IsZero() || now.Sub(deadline) > d {
				deadline = now
			}
			deadline = deadline.Add(d)
			if wait := time.Until(deadline); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-e.quit:
					timer.Stop()
					e.abortAll()
					return
				}
			}
		} else {
			select {
			case <-e.quit:
				e.abortAll()
				return
			default:
			}
		}
		e.completeStep()
		if !e.cfg.ZeroLatency {
			e.busy.end(time.Now())
		}
	}
}

func (e *engine) enqueue(s *seq) {
	if e.waitHead > 0 && (e.waitHead == len(e.waiting) || e.waitHead*2 > len(e.waiting)) {
		// Reclaim the consumed head of the queue.
		n := copy(e.waiting, e.waiting[e.waitHead:])
		clear(e.waiting[n:])
		e.waiting = e.waiting[:n]
		e.waitHead = 0
	}
	e.waiting = append(e.waiting, s)
}

// requeueFront puts a preempted sequence back at the head of the waiting
// queue (vLLM's prepend_request), counted as waiting again.
func (e *engine) requeueFront(s *seq) {
	if e.waitHead > 0 {
		e.waitHead--
		e.waiting[e.waitHead] = s
	} else {
		e.waiting = slices.Insert(e.waiting, 0, s)
	}
	e.numWaiting.Add(1)
	if s.adapter != nil {
		s.adapter.waiting.Add(1)
	}
}

func (e *engine) publishGauges() {
	e.numRunning.Store(int64(len(e.running)))
	e.usedBlocks.Store(int64(e.cache.used))
}

// admit moves waiting sequences into the running batch, in arrival order,
// while the batch has room and the KV cache can hold the head sequence
// (head-of-line blocking, as in vLLM's FCFS policy): under kv_allocation
// reserve, its prompt + max_tokens committed; on demand, the blocks of
// its prompt (and of any tokens it had generated before a preemption)
// and of its next token.
func (e *engine) admit() {
	var now time.Time
	for e.waitHead < len(e.waiting) && len(e.running) < e.cfg.MaxNumSeqs {
		s := e.waiting[e.waitHead]
		if s.cancelled.Load() {
			e.popWaiting()
			s.publish(finishAborted)
			continue
		}
		if e.onDemand {
			if !e.allocatePrompt(s) {
				return
			}
		} else {
			need := e.cache.blocksFor(s.promptTokens + s.maxTokens)
			if e.committed+need > e.cache.total {
				return
			}
			s.need = need
			e.committed += need
			e.allocatePrompt(s)
		}
		e.popWaiting()
		if s.adapter != nil {
			s.adapter.running.Add(1)
		}
		if s.scheduledAt.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			s.scheduledAt = now
		}
		e.running = append(e.running, s)
	}
}

func (e *engine) popWaiting() {
	s := e.waiting[e.waitHead]
	e.waiting[e.waitHead] = nil
	e.waitHead++
	e.unwait(s)
}

// allocatePrompt looks the sequence's tokens (its prompt, and after a
// preemption the tokens it had generated too) up in the prefix cache and
// gives them their KV blocks: cached ones are shared, the rest allocated
// (and registered when full). On demand it also allocates the block of
// the next token when the tokens fill their last block, and it allocates
// nothing and returns false when the cache cannot hold them all; under
// reserve admission has committed the blocks and it always succeeds.
func (e *engine) allocatePrompt(s *seq) bool {
	c := e.cache
	tokens := s.promptTokens + s.generated
	hashes := s.hasher.hashes // the full blocks of those tokens
	hit := c.matchPrefix(hashes)
	if hit*c.blockSize >= tokens {
		// At least one token is always computed (its logits give the
		// next output token), as in vLLM.
		hit = (tokens - 1) / c.blockSize
	}
	n := c.blocksFor(tokens)
	if e.onDemand {
		n = c.blocksFor(tokens + 1)
		// Cached blocks nothing references are free (evictable) until
		// this sequence takes them.
		if n-hit > c.free()-c.idleAmong(hashes[:hit]) {
			return false
		}
	}
	s.blocks = make([]*kvBlock, 0, max(n, s.need))
	for i := 0; i < hit; i++ {
		s.blocks = append(s.blocks, c.acquireCached(hashes[i]))
	}
	for i := hit; i < n; i++ {
		b := c.allocate()
		if b == nil {
			break // unreachable: admission checked or reserved the blocks
		}
		if i < len(hashes) {
			c.register(b, hashes[i])
		}
		s.blocks = append(s.blocks, b)
	}
	cached := hit * c.blockSize
	s.prefillLeft = tokens - cached
	s.tokensInKV = tokens
	if s.preemptions == 0 {
		// As vLLM: the usage's cached tokens and the prefix-cache
		// counters are those of the first scheduling; a recomputation
		// after a preemption is not a new query.
		s.cachedTokens = cached
		if c.caching {
			e.metrics.prefixQueries.Add(float64(s.promptTokens))
			e.metrics.prefixHits.Add(float64(cached))
		}
	}
	return true
}

// allocateSlots (kv_allocation on_demand) gives every decoding sequence
// whose blocks are full a block for the token the step adds. When the
// cache has none left, it preempts the most recently admitted running
// sequence (vLLM's recompute preemption: its blocks are freed, it goes
// back to the head of the waiting queue and its prompt and generated
// tokens are prefilled again when it is readmitted), until the block is
// found or the sequence itself was the one preempted. It returns whether
// it preempted any.
func (e *engine) allocateSlots() (preempted bool) {
	c := e.cache
	for i := 0; i < len(e.running); i++ {
		s := e.running[i]
		if s.prefillLeft > 0 || s.maxTokens == 0 || s.tokensInKV < len(s.blocks)*c.blockSize {
			continue
		}
		for {
			if b := c.allocate(); b != nil {
				s.blocks = append(s.blocks, b)
				break
			}
			last := len(e.running) - 1
			victim := e.running[last]
			e.running[last] = nil
			e.running = e.running[:last]
			e.preempt(victim)
			preempted = true
			if victim == s {
				return true // it was the last running; none is left after it
			}
		}
	}
	return preempted
}

// preempt frees a running sequence's blocks and puts it back at the head
// of the waiting queue, to be prefilled again (prompt and generated
// tokens) when readmitted. It counts in vllm:num_preemptions_total.
func (e *engine) preempt(s *seq) {
	e.releaseBlocks(s)
	s.prefillLeft, s.chunk, s.tokensInKV = 0, 0, 0
	s.preemptions++
	e.metrics.preemptions.Inc()
	if s.adapter != nil {
		s.adapter.running.Add(-1)
	}
	e.requeueFront(s)
}

// planStep assigns this step's prefill chunks within the token budget and
// returns the step's duration under the timing model, scaled by the
// timing step in force as the step starts.
func (e *engine) planStep() time.Duration {
	budget := e.cfg.MaxNumBatchedTokens
	for _, s := range e.running {
		if s.prefillLeft == 0 {
			budget--
		}
	}
	prefill, inStep := 0, 0
	adapted := false
	for _, s := range e.running {
		adapted = adapted || s.adapter != nil
		if s.prefillLeft == 0 {
			inStep++
			continue
		}
		s.chunk = min(s.prefillLeft, budget)
		if s.chunk > 0 {
			budget -= s.chunk
			prefill += s.chunk
			inStep++
		}
	}
	if e.cfg.ZeroLatency {
		return 0
	}
	d := e.cfg.DecodeBase + time.Duration(inStep)*e.cfg.DecodePerSeq
	if prefill > 0 {
		d += e.cfg.PrefillBase + time.Duration(prefill)*e.cfg.PrefillPerToken
	}
	if adapted {
		d = e.adapterStepDuration()
	}
	if len(e.timing.steps) > 0 {
		d = scaleDuration(d, e.timing.factorAt(time.Now()))
	}
	return d
}

// completeStep applies the step: prefill chunks progress, and every
// sequence whose prefill is done produces one token (or stops).
func (e *engine) completeStep() {
	now := time.Now()
	generated, prompt := 0, 0
	kept := e.running[:0]
	for _, s := range e.running {
		if s.cancelled.Load() {
			e.finish(s, finishAborted)
			continue
		}
		if s.prefillLeft > 0 {
			if s.chunk == 0 {
				kept = append(kept, s)
				continue
			}
			s.prefillLeft -= s.chunk
			s.chunk = 0
			if s.prefillLeft > 0 {
				kept = append(kept, s)
				continue
			}
			if !s.prefilled {
				// vLLM counts the whole prompt (cached tokens included)
				// once, when its first output comes.
				s.prefilled = true
				prompt += s.promptTokens
			}
			if s.maxTokens == 0 {
				// An embedding is done once prefilled.
				s.firstTokenAt, s.lastTokenAt = now, now
				e.finish(s, finishStop)
				continue
			}
		}
		fin := e.decode(s)
		if fin != finishStop {
			generated++
		}
		e.tokenOut(s, now, fin != finishStop)
		if fin != finishNone {
			e.finish(s, fin)
			continue
		}
		s.publish(finishNone)
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
	if prompt > 0 {
		e.metrics.promptTokens.Add(float64(prompt))
	}
	if generated > 0 {
		e.metrics.generationTokens.Add(float64(generated))
	}
}

// tokenOut stamps the instant of the step's output for s: a token, or
// (token false) the stop that ends it, which is not a token (the EOS
// token is not counted) and stamps only a sequence that produced none.
// It records what the engine observes itself: the inter-token latency
// of a sequence no stream times, and the time to first token of
// background traffic.
func (e *engine) tokenOut(s *seq, now time.Time, token bool) {
	m := e.metrics
	switch {
	case s.firstTokenAt.IsZero():
		s.firstTokenAt, s.lastTokenAt = now, now
		if s.background {
			m.ttft.Observe(now.Sub(s.queuedAt).Seconds())
		}
	case token:
		if s.engineITL {
			m.itl.Observe(now.Sub(s.lastTokenAt).Seconds())
		}
		s.lastTokenAt = now
	}
}

// eosSalt separates the early-stop draws from the word choice.
const eosSalt = 0x5bd1e9955bd1e995

// decode produces the next token of s, or decides that it stops first.
// It returns finishLength when the token produced was the last one.
func (e *engine) decode(s *seq) int {
	if s.empty {
		return finishStop
	}
	if !s.ignoreEOS && e.cfg.EOSProbability > 0 && s.generated >= s.minTokens && s.generated >= s.reasoning && !s.toolCall {
		u := float64(splitmix64(s.seed^eosSalt+uint64(s.generated))>>11) / (1 << 53)
		if u < e.cfg.EOSProbability {
			return finishStop
		}
	}
	c := e.cache
	if s.tokensInKV == len(s.blocks)*c.blockSize {
		// The last block is full (kv_allocation reserve: admission
		// committed this one; on demand allocateSlots has given it).
		if b := c.allocate(); b != nil {
			s.blocks = append(s.blocks, b)
		}
	}
	full := len(s.hasher.hashes)
	s.hasher.add(outputWordID[outputWord(s.seed, s.generated)])
	if len(s.hasher.hashes) > full && full < len(s.blocks) {
		c.register(s.blocks[full], s.hasher.hashes[full])
	}
	s.tokensInKV++
	s.generated++
	if s.generated >= s.maxTokens {
		return finishLength
	}
	return finishNone
}

// finish releases s's blocks and publishes its end; background traffic,
// which no handler waits for, has its finished-request metrics recorded
// here.
func (e *engine) finish(s *seq, code int) {
	if s.adapter != nil {
		s.adapter.running.Add(-1)
	}
	e.releaseBlocks(s)
	e.committed -= s.need
	s.need = 0
	if s.background && code != finishAborted {
		e.finishBackground(s)
	}
	s.publish(code)
}

// releaseBlocks drops s's references to its blocks, last block first, so
// that a sequence's tail is evicted before its prefix.
func (e *engine) releaseBlocks(s *seq) {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		e.cache.release(s.blocks[i])
	}
	s.blocks = nil
}

// abortAll ends every sequence, running, waiting or still in the channel.
func (e *engine) abortAll() {
	for _, s := range e.running {
		e.finish(s, finishAborted)
	}
	e.running = nil
	for ; e.waitHead < len(e.waiting); e.popWaiting() {
		e.waiting[e.waitHead].publish(finishAborted)
	}
	for {
		select {
		case s := <-e.submitCh:
			e.unwait(s)
			s.publish(finishAborted)
		default:
			e.publishGauges()
			return
		}
	}
}

// dropCancelledRunning frees the sequences whose clients went away, so
// they cost no step time.
func (e *engine) dropCancelledRunning() {
	kept := e.running[:0]
	for _, s := range e.running {
		if s.cancelled.Load() {
			e.finish(s, finishAborted)
			continue
		}
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
}
