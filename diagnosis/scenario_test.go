// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosis

import (
	"math"
	"math/rand/v2"
	"time"
)

// A scenario generates the Intervals a vLLM engine under background
// production traffic, probed at 1 req/s, would give the judge: every
// request of an interval drawn (Poisson arrivals, log-normal lengths and
// latencies), the engine's histogram sums and counts over all of them
// (the probe's own requests included, as the engine cannot tell them
// apart), its gauges at the read with noise.
//
// The engine follows vLLM's semantics where they matter
// (/work/notes/engine-metrics.md, vllm/v1/metrics/stats.py):
//   - vllm:time_to_first_token_seconds runs from arrival and includes the
//     queue (TTFTIncludesQueue), the frontend's few milliseconds and the
//     prefill; the gateway's delay in front of it is outside it;
//   - request_queue_time_seconds is queued → first scheduled,
//     request_prefill_time_seconds first scheduled → first token;
//   - inter_token_latency_seconds is one sample per decode step of a
//     request, so its count is the output tokens generated;
//   - num_requests_waiting counts preempted requests; a preempted request
//     is recomputed (V1), which stalls its decode: larger ITL samples;
//   - prefix_cache_hits/queries are in tokens;
//   - kv_cache_usage_perc is a fraction 0–1.
//
// The steady engine (the baseline every scenario starts from) is a
// mid-size deployment at half its capacity: 8 req/s of production plus
// the probe's 1 req/s, prompts log-normal with mean 1000 tokens (σ 0.6),
// outputs mean 200, prefill 20 ms + 50 µs per prompt token (an 8B model
// on one H100 prefills ~20k tokens/s), ITL 12 ms + 0.25 ms per running
// sequence, running by Little's law (~46), KV capacity 200k tokens
// (usage ~25%), GPU utilization 0.25 + 0.005 per running sequence
// (~48%), a queue of a few milliseconds, waiting > 0 in ~8% of reads,
// 0.002 preemptions per request, the engine's prefix hit ratio 30%, the
// probe's 50% of an intended 50%. Load wanders by an AR(1) factor of
// about ±7% (ρ 0.9 per read), so the steady server is not flat.
type scenario struct {
	name  string
	cause Cause
	kind  string
	onset time.Duration // when the change starts
	// change sets the engine's state after onset (nil: steady); size is
	// drawn once per run, uniform in [0, 1), for changes of a range of
	// sizes.
	change func(e *engineState, size float64)
	noView bool // no server view at all
	// setup sets the engine's configuration for the whole run (nil: the
	// baseline's).
	setup func(e *engineState)
}

// engineState is the engine's condition at one read.
type engineState struct {
	bgRate          float64 // production req/s
	promptMean      float64 // production prompt tokens
	probePromptMean float64 // the probe's prompt tokens (mirrors production)
	outMean         float64 // output tokens
	gateway         float64 // s, in front of the engine
	queueMean       float64 // s; 0: the model's few ms
	waitingMean     float64 // Poisson mean of the waiting gauge
	maxSeqs         float64
	runningFixed    float64 // >0: running pinned (at a limit)
	runningNoise    float64 // relative noise of running (0: Poisson)
	kvCap           float64 // tokens
	kvFixed         float64 // >0: KV usage pinned
	gpuFixed        float64 // >0: GPU pinned
	gpuKnown        bool
	preemptPerReq   float64
	itlMult         float64
	prefillMult     float64
	serverHit       float64
	probeHit        float64
	intent          float64
	identity        string
}

func baseline() engineState {
	return engineState{
		bgRate: 8, promptMean: 1000, probePromptMean: 1000, outMean: 200,
		waitingMean: 0.08, maxSeqs: 256, kvCap: 200000, gpuKnown: true,
		preemptPerReq: 0.002, itlMult: 1, prefillMult: 1,
		serverHit: 0.3, probeHit: 0.5, intent: 0.5, identity: "build-1",
	}
}

// generator draws one scenario's intervals.
type generator struct {
	sc      scenario
	rng     *rand.Rand
	load    float64 // AR(1) log load factor
	step    time.Duration
	t0      time.Time
	elapsed time.Duration
	size    float64
}

const readEvery = 15 * time.Second

func newGenerator(sc scenario, seed uint64) *generator {
	g := &generator{sc: sc, rng: rand.New(rand.NewPCG(seed, 0x5eed)), step: readEvery,
		t0: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	g.size = g.rng.Float64()
	return g
}

func (g *generator) lognormal(mean, sigma float64) float64 {
	// A log-normal of the given mean.
	return mean * math.Exp(sigma*g.rng.NormFloat64()-sigma*sigma/2)
}

func (g *generator) poisson(mean float64) int {
	if mean <= 0 {
		return 0
	}
	if mean > 50 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*g.rng.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= g.rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// next draws the next interval.
func (g *generator) next() Interval {
	g.elapsed += g.step
	e := baseline()
	if g.sc.setup != nil {
		g.sc.setup(&e)
	}
	if g.sc.change != nil && g.elapsed > g.sc.onset {
		g.sc.change(&e, g.size)
	}
	g.load = 0.9*g.load + 0.03*g.rng.NormFloat64()
	load := math.Exp(g.load)
	rate := e.bgRate*load + 1

	// The engine's means by Little's law, solved by iteration.
	prefill := e.prefillMult * (0.020 + 50e-6*e.promptMean)
	running, itl := 40.0, 0.02
	queue := e.queueMean
	if queue == 0 {
		queue = 0.004 * load
	}
	for range 5 {
		itl = e.itlMult * (0.012 + 0.00025*running)
		running = min(e.maxSeqs, rate*(0.005+queue+prefill+e.outMean*itl))
	}
	if e.runningFixed > 0 {
		running = e.runningFixed
		itl = e.itlMult * (0.012 + 0.00025*running)
	}

	in := Interval{End: g.t0.Add(g.elapsed), Identity: e.identity, ReuseIntent: e.intent}
	srv := &ServerFigures{Engine: "vllm", TTFTIncludesQueue: true}
	// Requests: production and the probe's, each drawn.
	request := func(promptMean float64) (ttft, q, pf, tpot, pl float64) {
		pl = max(1, g.lognormal(promptMean, 0.6))
		q = g.rng.ExpFloat64() * queue
		pf = g.lognormal(e.prefillMult*(0.020+50e-6*pl), 0.15)
		ttft = 0.005 + q + pf
		tpot = g.lognormal(itl, 0.12)
		return
	}
	bg := g.poisson(e.bgRate * load * g.step.Seconds())
	probe := g.poisson(g.step.Seconds())
	var tokensOut float64
	observe := func(ttft, q, pf, tpot, pl float64) {
		out := max(2, g.lognormal(e.outMean, 0.5))
		tokensOut += out
		srv.TTFT = srv.TTFT.Plus(Mean{ttft, 1})
		srv.Queue = srv.Queue.Plus(Mean{q, 1})
		srv.Prefill = srv.Prefill.Plus(Mean{pf, 1})
		srv.Decode = srv.Decode.Plus(Mean{tpot * (out - 1), 1})
		srv.PromptLen = srv.PromptLen.Plus(Mean{pl, 1})
	}
	for range bg {
		observe(request(e.promptMean))
	}
	var promptSum float64
	for range probe {
		ttft, q, pf, tpot, pl := request(e.probePromptMean)
		observe(ttft, q, pf, tpot, pl)
		gap := e.gateway + g.lognormal(0.003, 0.3)
		in.Probe.Requests++
		in.Probe.TTFT = in.Probe.TTFT.Plus(Mean{ttft + gap, 1})
		in.Probe.TTFTSample = append(in.Probe.TTFTSample, ttft+gap)
		in.Probe.TPOT = in.Probe.TPOT.Plus(Mean{tpot, 1})
		promptSum += math.Round(pl)
	}
	in.Probe.PromptTokens = promptSum
	in.Probe.CachedTokens = math.Round(promptSum * min(1, max(0, e.probeHit+0.03*g.rng.NormFloat64())))
	// ITL: one sample per decode step, its mean over thousands of them.
	srv.ITL = Mean{tokensOut * itl * (1 + 0.02*g.rng.NormFloat64()), tokensOut}
	n := float64(bg + probe)
	srv.Finished = n
	srv.Preemptions = float64(g.poisson(e.preemptPerReq * n))
	queries := srv.PromptLen.Sum
	srv.PrefixQueries = math.Round(queries)
	srv.PrefixHits = math.Round(queries * min(1, max(0, e.serverHit+0.02*g.rng.NormFloat64())))
	// Gauges at the read.
	if e.runningFixed > 0 {
		srv.Running = e.runningFixed
		if e.runningNoise > 0 {
			srv.Running = math.Round(min(e.maxSeqs, running*(1+e.runningNoise*g.rng.NormFloat64())))
		}
	} else {
		srv.Running = float64(min(int(e.maxSeqs), g.poisson(running)))
	}
	srv.Waiting = float64(g.poisson(e.waitingMean))
	srv.KVUsage = min(1, srv.Running*(e.promptMean+e.outMean/2)/e.kvCap)
	if e.kvFixed > 0 {
		srv.KVUsage = min(1, e.kvFixed+0.015*g.rng.NormFloat64())
	}
	if e.gpuKnown {
		u := min(0.99, 0.25+0.005*srv.Running+0.02*g.rng.NormFloat64())
		if e.gpuFixed > 0 {
			u = min(1, e.gpuFixed+0.01*g.rng.NormFloat64())
		}
		in.GPUUtil = &u
	}
	if !g.sc.noView {
		in.Server = srv
	} else {
		in.Why = "connection refused"
	}
	return in
}

// onset is when every cause scenario changes: 40 minutes of a steady
// server first (history enough, as a daemon has).
const onset = 40 * time.Minute

// causeScenarios are one scenario per cause, each alone. The seed's own
// draws pick each change's size within a plausible range.
func causeScenarios() []scenario {
	return []scenario{
		{name: "path: a gateway adds 30–150 ms in front", cause: Path, onset: onset,
			change: func(e *engineState, size float64) {
				e.gateway = 0.03 + 0.12*size
			}},
		{name: "queueing at the batch limit (max_num_seqs 64)", cause: Queueing, kind: KindBatch, onset: onset,
			setup: func(e *engineState) { e.maxSeqs = 64 },
			change: func(e *engineState, size float64) {
				e.bgRate, e.runningFixed = 14, 64
				e.waitingMean, e.queueMean = 4+10*size, 0.3+0.9*size
			}},
		{name: "queueing at the KV cache's limit", cause: Queueing, kind: KindKV, onset: onset,
			change: func(e *engineState, size float64) {
				e.bgRate, e.outMean = 12, 500
				e.runningFixed, e.runningNoise = 90, 0.08
				e.kvFixed, e.waitingMean, e.queueMean = 0.97, 4+10*size, 0.3+0.9*size
				e.preemptPerReq = 0.03
			}},
		{name: "queueing at the GPUs' limit (prefill-heavy, batch and KV below theirs)", cause: Queueing, kind: KindGPU, onset: onset,
			change: func(e *engineState, size float64) {
				e.bgRate = 13
				e.runningFixed, e.runningNoise = 60, 0.1
				e.gpuFixed, e.waitingMean, e.queueMean = 0.97, 4+10*size, 0.3+0.9*size
			}},
		{name: "prefill: prompts grow 1.5–2.5×, GPU < 60%", cause: Prefill, onset: onset,
			change: func(e *engineState, size float64) {
				f := 1.5 + size
				e.promptMean, e.probePromptMean = 1000*f, 1000*f
				e.kvCap = 600000
				e.gpuFixed = 0.5
			}},
		{name: "decode: outputs grow 1.8–2.5×, the running batch and TPOT with them (KV capacity 400k tokens: it stays under 90%)", cause: Decode, onset: onset,
			setup: func(e *engineState) { e.kvCap = 400000 },
			change: func(e *engineState, size float64) {
				e.outMean = 200 * (1.8 + 0.7*size)
			}},
		{name: "kv_pressure: preemptions rise to 0.08–0.2 per request, KV 93%", cause: KVPressure, onset: onset,
			change: func(e *engineState, size float64) {
				e.outMean = 350
				e.kvFixed, e.preemptPerReq, e.itlMult = 0.93, 0.08+0.12*size, 1.15+0.15*size
				e.waitingMean, e.queueMean = 0.6, 0.02
			}},
		{name: "prefix_cache: the probe's hit ratio falls from 50% to 10–30% (affinity lost)", cause: PrefixCache, onset: onset,
			change: func(e *engineState, size float64) {
				e.probeHit, e.serverHit = 0.1+0.2*size, 0.15
				// The tokens no longer cached are prefilled: 20–40% more
				// prefill work for the prompts that lost their prefix.
				e.prefillMult = 1.4 - 0.2*size
			}},
		{name: "deploy: a new build, prefill 1.4–1.8× slower", cause: Deploy, onset: onset,
			change: func(e *engineState, size float64) {
				e.identity = "build-2"
				e.prefillMult = 1.4 + 0.4*size
			}},
	}
}
