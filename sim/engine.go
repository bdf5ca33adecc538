// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
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

// seq is one request inside the engine. The handler fills the request
// fields and submits it; from then on the engine owns the engine fields and
// publishes progress through state and notify.
type seq struct {
	// Request, read-only once submitted.
	promptTokens int
	maxTokens    int // 0: an embedding (prefill only, no token)
	minTokens    int
	reasoning    int  // the first reasoning tokens are reasoning text
	toolCall     bool // the tokens after the reasoning are a tool call (no early stop)
	ignoreEOS    bool
	empty        bool // the empty fault: stop before the first token
	seed         uint64
	hasher       blockHasher // hashed prompt; continues over generated tokens
	adapter      *adapter    // the LoRA adapter the request names; nil: a model

	// Engine-owned.
	blocks      []*kvBlock
	need        int // KV blocks committed at admission
	promptFull  int // full prompt blocks
	prefillLeft int
	chunk       int // prefill tokens scheduled in the current step
	generated   int
	tokensInKV  int

	// Written by the engine before its first publication; the handler
	// reads them only after it has seen a published state.
	scheduledAt  time.Time
	cachedTokens int

	// state is generated<<8 | finish code, published after each step.
	state     atomic.Uint64
	notify    chan struct{} // capacity 1; poked after each publication
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
	cfg     *Config
	metrics *metrics
	cache   *kvCache
	timing  timingSchedule // read-only after newEngine

	submitCh chan *seq
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// Loop-owned.
	waiting   []*seq // FIFO; waitHead indexes its head
	waitHead  int
	running   []*seq
	committed int // KV blocks committed to running sequences

	// Read by the metrics.
	numWaiting atomic.Int64
	numRunning atomic.Int64
	usedBlocks atomic.Int64
}

func newEngine(cfg *Config, m *metrics) *engine {
	return &engine{
		cfg:      cfg,
		metrics:  m,
		cache:    newKVCache(cfg.BlockSize, cfg.NumKVBlocks, cfg.EnablePrefixCaching),
		timing:   newTimingSchedule(cfg.TimingSteps, time.Now()),
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
		e.admit()
		e.publishGauges()
		if len(e.running) == 0 {
			continue
		}
		d := e.planStep()
		if !e.cfg.ZeroLatency {
			now := time.Now()
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

func (e *engine) publishGauges() {
	e.numRunning.Store(int64(len(e.running)))
	e.usedBlocks.Store(int64(e.cache.used))
}

// admit moves waiting sequences into the running batch, in arrival order,
// while the batch has room and the KV cache can hold the head sequence's
// prompt + max_tokens (head-of-line blocking, as in vLLM's FCFS policy).
func (e *engine) admit() {
	var now time.Time
	for e.waitHead < len(e.waiting) && len(e.running) < e.cfg.MaxNumSeqs {
		s := e.waiting[e.waitHead]
		if s.cancelled.Load() {
			e.popWaiting()
			s.publish(finishAborted)
			continue
		}
		need := e.cache.blocksFor(s.promptTokens + s.maxTokens)
		if e.committed+need > e.cache.total {
			return
		}
		e.popWaiting()
		if s.adapter != nil {
			s.adapter.running.Add(1)
		}
		if now.IsZero() {
			now = time.Now()
		}
		s.scheduledAt = now
		e.allocatePrompt(s, need)
		e.running = append(e.running, s)
	}
}

func (e *engine) popWaiting() {
	s := e.waiting[e.waitHead]
	e.waiting[e.waitHead] = nil
	e.waitHead++
	e.unwait(s)
}

// allocatePrompt looks the prompt up in the prefix cache and gives it its
// KV blocks: cached ones are shared, the rest allocated (and registered
// when full).
func (e *engine) allocatePrompt(s *seq, need int) {
	c := e.cache
	s.need = need
	e.committed += need
	s.promptFull = len(s.hasher.hashes)
	hashes := s.hasher.hashes[:s.promptFull]
	hit := c.matchPrefix(hashes)
	if hit*c.blockSize >= s.promptTokens {
		// At least one prompt token is always computed (its logits give
		// the first output token), as in vLLM.
		hit = (s.promptTokens - 1) / c.blockSize
	}
	s.blocks = make([]*kvBlock, 0, need)
	for i := 0; i < hit; i++ {
		s.blocks = append(s.blocks, c.acquireCached(hashes[i]))
	}
	for i := hit; i < c.blocksFor(s.promptTokens); i++ {
		b := c.allocate()
		if b == nil {
			break // unreachable: admission reserved the blocks
		}
		if i < s.promptFull {
			c.register(b, hashes[i])
		}
		s.blocks = append(s.blocks, b)
	}
	s.cachedTokens = hit * c.blockSize
	s.prefillLeft = s.promptTokens - s.cachedTokens
	s.tokensInKV = s.promptTokens
	if c.caching {
		e.metrics.prefixQueries.Add(float64(s.promptTokens))
		e.metrics.prefixHits.Add(float64(s.cachedTokens))
	}
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
			prompt += s.promptTokens
			if s.maxTokens == 0 {
				// An embedding is done once prefilled.
				e.finish(s, finishStop)
				continue
			}
		}
		if fin := e.decode(s); fin != finishNone {
			if fin == finishLength {
				generated++
			}
			e.finish(s, fin)
			continue
		}
		generated++
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
	if s.tokensInKV%c.blockSize == 0 {
		if b := c.allocate(); b != nil {
			s.blocks = append(s.blocks, b)
		}
	}
	full := len(s.hasher.hashes)
	s.hasher.add(outputWordID[outputWord(s.seed, s.generated)])
	if len(s.hasher.hashes) > full && len(s.blocks) > 0 {
		c.register(s.blocks[len(s.blocks)-1], s.hasher.hashes[full])
	}
	s.tokensInKV++
	s.generated++
	if s.generated >= s.maxTokens {
		return finishLength
	}
	return finishNone
}

// finish releases s's blocks (last block first, so that a sequence's tail
// is evicted before its prefix) and publishes its end.
func (e *engine) finish(s *seq, code int) {
	if s.adapter != nil {
		s.adapter.running.Add(-1)
	}
	for i := len(s.blocks) - 1; i >= 0; i-- {
		e.cache.release(s.blocks[i])
	}
	s.blocks = nil
	e.committed -= s.need
	s.need = 0
	s.publish(code)
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
