// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

const namespace = "llmprobe"

// PromptLengthMismatchThreshold is the relative difference between the
// server-reported and the planned prompt length above which a request
// counts in llmprobe_prompt_length_mismatch_total. Tokenizers of the same
// model family differ by a token or two on a few hundred; more than 2%
// means the planned lengths (and so the workload) are not what the server
// sees.
const PromptLengthMismatchThreshold = 0.02

// Native-histogram settings shared by every histogram: ~10% relative
// resolution, a bounded bucket count (observed values come from remote
// servers), and at most one reset an hour when that bound is hit.
const (
	nativeBucketFactor    = 1.1
	nativeMaxBucketNumber = 160
	nativeMinResetPeriod  = time.Hour
)

// Classic buckets, chosen for LLM serving latencies and lengths.
var (
	// TTFT: 5 ms (cached, tiny prompt) to 60 s (long prefill under queueing).
	ttftBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60}
	// TPOT and ITL: 1 ms to 5 s per token or chunk.
	tokenLatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5}
	// E2E: 50 ms to 10 minutes.
	e2eBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600}
	// Harness delays (schedule lag, connection acquisition): 100 µs to 10 s.
	harnessBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	// Token counts: 1 to 128k, powers of two.
	tokenBuckets = prometheus.ExponentialBuckets(1, 2, 18)
	// Relative prompt-length error, around 0 on both sides.
	lengthErrorBuckets = []float64{-0.5, -0.25, -0.1, -0.05, -0.02, -0.01, -0.001, 0.001, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1}
)

// Label names.
const (
	labelTarget  = "target"
	labelModel   = "model"
	labelClass   = "class"
	labelOutcome = "outcome"
	labelReason  = "reason"
	labelKind    = "kind"
	labelCode    = "code"
	exemplarKey  = "trace_id"
)

var (
	targetLabels       = []string{labelTarget}
	targetClassLabels  = []string{labelTarget, labelClass}
	targetModelClass   = []string{labelTarget, labelModel, labelClass}
	requestsLabels     = []string{labelTarget, labelModel, labelClass, labelOutcome}
	droppedLabels      = []string{labelTarget, labelReason}
	conversationLabels = []string{labelTarget, labelClass, labelOutcome}
	anomalyLabels      = []string{labelTarget, labelKind}
	responseLabels     = []string{labelTarget, labelCode}
	finishLabels       = []string{labelTarget, labelClass, labelReason}
	hitRatioDesc       = prometheus.NewDesc(namespace+"_prefix_cache_hit_ratio", "Observed prefix-cache hit ratio: server-reported cached prompt tokens / prompt tokens, over the sliding global.hit_ratio_window, of requests whose server reported cached tokens. Absent while the window holds no such request.", targetClassLabels, nil)
	defaultRatioWindow = time.Duration(config.DefaultGlobal.HitRatioWindow)
)

// histogramWithExemplar is what a histogram child implements.
type histogramWithExemplar interface {
	prometheus.Observer
	prometheus.ExemplarObserver
}

// Metrics is the probe.Observer that maintains the llmprobe_* request
// metrics. Create it with NewMetrics and give it every configuration with
// SetConfig (through the Reloader).
//
// Events of a target or class that the current configuration does not
// know (such as a request still in flight when a reload removed its
// target) are ignored, so series deleted by SetConfig never come back.
// The hot path resolves series once per SetConfig, not per observation.
type Metrics struct {
	ttft, tpot, itl, e2e                   *prometheus.HistogramVec // target, model, class
	ttfa                                   *prometheus.HistogramVec // target, model, class
	reasoningTokens                        *prometheus.CounterVec   // target, model, class
	scheduleLag, clientWait                *prometheus.HistogramVec // target
	scheduled, sent                        *prometheus.CounterVec   // target, class
	requests                               *prometheus.CounterVec   // target, model, class, outcome
	dropped                                *prometheus.CounterVec   // target, reason
	promptTokens, outputTokens, cachedToks *prometheus.CounterVec   // target, model, class
	usageEstimated                         *prometheus.CounterVec   // target, model, class
	promptTokensHist, outputTokensHist     *prometheus.HistogramVec // target, class
	lengthError                            *prometheus.HistogramVec // target, class
	lengthMismatch                         *prometheus.CounterVec   // target, class
	conversations                          *prometheus.CounterVec   // target, class, outcome
	retries                                *prometheus.CounterVec   // target
	coalesced                              *prometheus.CounterVec   // target
	anomalies                              *prometheus.CounterVec   // target, kind
	responses                              *prometheus.CounterVec   // target, code
	finishReasons                          *prometheus.CounterVec   // target, class, reason
	slo                                    sloMetrics               // target, class
	rep                                    *replicaMetrics          // target, replica (replicas.go)

	mu    sync.Mutex // serialises SetConfig
	state atomic.Pointer[metricsState]
	now   func() time.Time // the hit-ratio window's clock; time.Now outside tests
}

// metricsState is the resolved series of one configuration. It is
// immutable once published; SetConfig replaces it.
type metricsState struct {
	targets map[string]*targetSeries
	window  time.Duration
}

type targetSeries struct {
	name                    string
	scheduleLag, clientWait prometheus.Observer
	dropped                 [len(probe.DropReasons)]prometheus.Counter
	retries                 prometheus.Counter
	coalesced               prometheus.Counter
	anomalies               [len(wire.AnomalyKinds)]prometheus.Counter
	responses               [len(wire.StatusCodes)]prometheus.Counter
	classes                 map[string]*classSeries
	classOrder              []string
}

type classSeries struct {
	model                              string // the model label: the class's model, else the target's
	ttft, tpot, itl, e2e               histogramWithExemplar
	ttfa                               histogramWithExemplar
	reasoningTokens                    prometheus.Counter
	scheduled, sent                    prometheus.Counter
	requests                           [len(wire.Outcomes)]prometheus.Counter
	promptTokens, outputTokens, cached prometheus.Counter
	usageEstimated                     prometheus.Counter
	promptTokensHist, outputTokensHist prometheus.Observer
	lengthError                        prometheus.Observer
	lengthMismatch                     prometheus.Counter
	finishReasons                      [len(wire.FinishReasons)]prometheus.Counter
	hit                                *ratioWindow
	// slo is set only for classes with an SLO (config.Config.SLO).
	slo *classSLO
	// conversations is set only for multi-turn classes.
	conversations *[len(probe.ConversationOutcomes)]prometheus.Counter
}

func histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace:                       namespace,
		Name:                            name,
		Help:                            help,
		Buckets:                         buckets,
		NativeHistogramBucketFactor:     nativeBucketFactor,
		NativeHistogramMaxBucketNumber:  nativeMaxBucketNumber,
		NativeHistogramMinResetDuration: nativeMinResetPeriod,
	}
}

func counterOpts(name, help string) prometheus.CounterOpts {
	return prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}
}

// NewMetrics creates the request metrics and registers them with reg (nil
// registers nothing, for benchmarks). It panics if registration fails, as
// promauto does: that is a wiring bug. Until SetConfig is called every
// event is ignored. llmprobe_build_info is not registered here: the daemon
// registers client_golang's collectors/version.NewCollector("llmprobe").
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{slo: newSLOMetrics(), rep: newReplicaMetrics(), now: time.Now}
	for _, h := range []struct {
		vec     **prometheus.HistogramVec
		name    string
		buckets []float64
		labels  []string
		help    string
	}{
		{&m.ttft, "ttft_seconds", ttftBuckets, targetModelClass, "Time to first token: from the request being written to the first stream event carrying generated text. Warm-up excluded."},
		{&m.ttfa, "ttfa_seconds", ttftBuckets, targetModelClass, "Time to first answer token: from the request being written to the first stream event carrying answer text or a tool call, after any reasoning (equal to TTFT without reasoning). Warm-up excluded."},
		{&m.tpot, "tpot_seconds", tokenLatencyBuckets, targetModelClass, "Time per output token after the first, (E2E - TTFT) / (output tokens - 1), of successful requests with at least 2 output tokens. Warm-up excluded."},
		{&m.itl, "itl_seconds", tokenLatencyBuckets, targetModelClass, "Inter-token latency: gaps between consecutive stream events carrying generated text. Warm-up excluded."},
		{&m.e2e, "e2e_seconds", e2eBuckets, targetModelClass, "End-to-end latency of successful requests: from the request being written to the last stream event carrying generated text. Warm-up excluded."},
		{&m.scheduleLag, "schedule_lag_seconds", harnessBuckets, targetLabels, "Delay between a request's planned instant on the open-loop arrival timeline and its hand-off to the HTTP client, for every sent request (warm-up included)."},
		{&m.clientWait, "client_wait_seconds", harnessBuckets, targetLabels, "Connection acquisition: from hand-off to the HTTP client until the request is written (dial and TLS when no idle connection is reused), for every request that got a connection (warm-up included)."},
		{&m.promptTokensHist, "prompt_tokens", tokenBuckets, targetClassLabels, "Server-reported prompt tokens per request."},
		{&m.outputTokensHist, "output_tokens", tokenBuckets, targetClassLabels, "Server-reported output tokens per request."},
		{&m.lengthError, "prompt_length_error_ratio", lengthErrorBuckets, targetClassLabels, "Relative error of the planned prompt length, (server-reported - planned) / planned, per request whose server reported usage."},
	} {
		*h.vec = prometheus.NewHistogramVec(histogramOpts(h.name, h.help, h.buckets), h.labels)
	}
	for _, c := range []struct {
		vec    **prometheus.CounterVec
		name   string
		labels []string
		help   string
	}{
		{&m.reasoningTokens, "reasoning_tokens_total", targetModelClass, "Reasoning tokens among the output tokens, as the server reported them (usage.completion_tokens_details.reasoning_tokens), of the requests counted in llmprobe_output_tokens_total."},
		{&m.scheduled, "requests_scheduled_total", targetClassLabels, "Arrivals on the target's open-loop timeline."},
		{&m.sent, "requests_sent_total", targetClassLabels, "Requests handed to the HTTP client; scheduled minus sent minus dropped is the number waiting to be sent."},
		{&m.requests, "requests_total", requestsLabels, "Requests that ended, by outcome (warm-up included)."},
		{&m.dropped, "requests_dropped_total", droppedLabels, "Scheduled requests that were never sent, by reason."},
		{&m.promptTokens, "prompt_tokens_total", targetModelClass, "Prompt tokens of requests the server processed (it reported usage or streamed a token): server-reported, else the planned length."},
		{&m.outputTokens, "output_tokens_total", targetModelClass, "Output tokens of requests the server processed: server-reported, else the number of token-bearing stream events."},
		{&m.cachedToks, "cached_prompt_tokens_total", targetModelClass, "Prompt tokens the server reported as served from its prefix cache (usage.prompt_tokens_details.cached_tokens)."},
		{&m.usageEstimated, "usage_estimated_total", targetModelClass, "Requests counted in the token counters with estimated lengths because the server reported no usage."},
		{&m.lengthMismatch, "prompt_length_mismatch_total", targetClassLabels, "Requests whose server-reported prompt length differs from the planned one by more than 2%."},
		{&m.conversations, "conversations_total", conversationLabels, "Multi-turn conversations that ended, by outcome: completed (every turn succeeded), failed (a turn did not succeed, or the history passed its bound), dropped (a turn could not be sent)."},
		{&m.retries, "client_retries_total", targetLabels, "Requests re-sent on a new connection because the server closed or reset a reused kept-alive connection before any byte of the response arrived (the keep-alive race; never after a response byte, never for a fresh connection)."},
		{&m.coalesced, "harness_coalesced_chunks_total", targetLabels, "Token-bearing stream events that arrived in the same read as the previous one (an ITL of 0: the bytes had queued up). Over llmprobe_itl_seconds_count it is the share of gaps the client could not time; with a high llmprobe_harness_timestamp_inflation_seconds it means the client reads late, alone it may be the server or a proxy batching."},
		{&m.anomalies, "server_anomalies_total", anomalyLabels, "Responses whose server reported something that cannot be right, by kind: cached_exceeds_prompt (clamped), output_exceeds_max_tokens, invalid_usage (a count that is not one; ignored)."},
		{&m.responses, "http_responses_total", responseLabels, "Requests that got an HTTP response, by its status: 2xx, 3xx (a redirect llmprobe refused to follow), 400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504, other 4xx and 5xx, other."},
		{&m.finishReasons, "finish_reasons_total", finishLabels, "Requests that got a response stream, by the server's finish_reason: stop, length, tool_calls, content_filter, function_call, other (any other value), none (the stream carried none)."},
	} {
		*c.vec = prometheus.NewCounterVec(counterOpts(c.name, c.help), c.labels)
	}
	m.state.Store(&metricsState{targets: map[string]*targetSeries{}, window: defaultRatioWindow})
	if reg != nil {
		reg.MustRegister(m.collectors()...)
		reg.MustRegister(hitRatioCollector{m})
	}
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{
		m.ttft, m.tpot, m.itl, m.e2e, m.ttfa, m.reasoningTokens, m.scheduleLag, m.clientWait,
		m.scheduled, m.sent, m.requests, m.dropped,
		m.promptTokens, m.outputTokens, m.cachedToks, m.usageEstimated,
		m.promptTokensHist, m.outputTokensHist, m.lengthError, m.lengthMismatch,
		m.conversations, m.retries, m.coalesced, m.anomalies, m.responses, m.finishReasons,
	}, append(m.slo.collectors(), m.rep.collectors()...)...)
}

// SetConfig makes cfg the configuration events are judged against: every
// label set it implies (targets × their workload's classes × outcomes,
// targets × drop reasons) exists from now on, starting at 0, and the series
// of targets, classes or models no longer configured are deleted. Series
// that stay keep their values. Safe to call concurrently with events; call
// it before the engine applies cfg, so that the first events of a new
// target are not ignored (see NewReloader).
func (m *Metrics) SetConfig(cfg *config.Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.state.Load()
	next := &metricsState{targets: map[string]*targetSeries{}, window: time.Duration(cfg.Global.HitRatioWindow)}
	if next.window <= 0 {
		next.window = defaultRatioWindow
	}
	for _, t := range cfg.Targets {
		if t == nil || cfg.Workload(t) == nil {
			continue // impossible after validation
		}
		w := cfg.Workload(t)
		prev := old.targets[t.Name]
		ts := &targetSeries{
			name:        t.Name,
			scheduleLag: m.scheduleLag.WithLabelValues(t.Name),
			clientWait:  m.clientWait.WithLabelValues(t.Name),
			classes:     map[string]*classSeries{},
		}
		for i, r := range probe.DropReasons {
			ts.dropped[i] = m.dropped.WithLabelValues(t.Name, string(r))
		}
		ts.retries = m.retries.WithLabelValues(t.Name)
		ts.coalesced = m.coalesced.WithLabelValues(t.Name)
		for i, a := range wire.AnomalyKinds {
			ts.anomalies[i] = m.anomalies.WithLabelValues(t.Name, a.Name)
		}
		for i, c := range wire.StatusCodes {
			ts.responses[i] = m.responses.WithLabelValues(t.Name, c)
		}
		for _, c := range w.Classes {
			if c == nil {
				continue
			}
			cs := m.newClassSeries(t.Name, config.ModelFor(t, c), c.Name)
			if c.Turns != nil {
				cs.conversations = new([len(probe.ConversationOutcomes)]prometheus.Counter)
				for i, o := range probe.ConversationOutcomes {
					cs.conversations[i] = m.conversations.WithLabelValues(t.Name, c.Name, string(o))
				}
			}
			var prevSLO *classSLO
			if prev != nil && prev.classes[c.Name] != nil {
				prevSLO = prev.classes[c.Name].slo
			}
			if obj := cfg.SLO(t, c); obj != nil {
				cs.slo = m.slo.series(t.Name, c.Name, obj, prevSLO)
			} else if prevSLO != nil {
				m.deletePartial(prometheus.Labels{labelTarget: t.Name, labelClass: c.Name}, m.slo.vecs()...)
			}
			if prev != nil && prev.classes[c.Name] != nil && old.window == next.window {
				cs.hit = prev.classes[c.Name].hit // keep the window's data across reloads
			} else {
				cs.hit = newRatioWindow(next.window)
			}
			ts.classes[c.Name] = cs
			ts.classOrder = append(ts.classOrder, c.Name)
		}
		next.targets[t.Name] = ts
	}
	m.state.Store(next)

	// Delete what the new configuration no longer implies. Events still
	// arriving for it hit the old, detached children and vanish.
	var removed []string
	for name, ot := range old.targets {
		nt := next.targets[name]
		if nt == nil {
			m.deletePartial(prometheus.Labels{labelTarget: name}, m.allVecs()...)
			removed = append(removed, name)
			continue
		}
		for class, oc := range ot.classes {
			switch nc := nt.classes[class]; {
			case nc == nil:
				m.deletePartial(prometheus.Labels{labelTarget: name, labelClass: class}, m.classVecs()...)
			case nc.model != oc.model:
				m.deletePartial(prometheus.Labels{labelTarget: name, labelClass: class, labelModel: oc.model}, m.modelVecs()...)
			}
		}
	}
	m.dropTargets(removed)
}

type partialDeleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

func (m *Metrics) deletePartial(l prometheus.Labels, vecs ...partialDeleter) {
	for _, v := range vecs {
		v.DeletePartialMatch(l)
	}
}

func (m *Metrics) allVecs() []partialDeleter {
	return append(m.classVecs(), m.scheduleLag, m.clientWait, m.dropped, m.retries, m.coalesced, m.anomalies, m.responses)
}

// modelVecs carry a model label.
func (m *Metrics) modelVecs() []partialDeleter {
	return []partialDeleter{m.ttft, m.tpot, m.itl, m.e2e, m.ttfa, m.reasoningTokens, m.requests, m.promptTokens, m.outputTokens, m.cachedToks, m.usageEstimated}
}

// classVecs carry a class label.
func (m *Metrics) classVecs() []partialDeleter {
	return append(append(m.modelVecs(), m.scheduled, m.sent, m.promptTokensHist, m.outputTokensHist, m.lengthError, m.lengthMismatch, m.conversations, m.finishReasons), m.slo.vecs()...)
}

func (m *Metrics) newClassSeries(target, model, class string) *classSeries {
	cs := &classSeries{
		model:            model,
		ttft:             m.ttft.WithLabelValues(target, model, class).(histogramWithExemplar),
		tpot:             m.tpot.WithLabelValues(target, model, class).(histogramWithExemplar),
		itl:              m.itl.WithLabelValues(target, model, class).(histogramWithExemplar),
		e2e:              m.e2e.WithLabelValues(target, model, class).(histogramWithExemplar),
		ttfa:             m.ttfa.WithLabelValues(target, model, class).(histogramWithExemplar),
		reasoningTokens:  m.reasoningTokens.WithLabelValues(target, model, class),
		scheduled:        m.scheduled.WithLabelValues(target, class),
		sent:             m.sent.WithLabelValues(target, class),
		promptTokens:     m.promptTokens.WithLabelValues(target, model, class),
		outputTokens:     m.outputTokens.WithLabelValues(target, model, class),
		cached:           m.cachedToks.WithLabelValues(target, model, class),
		usageEstimated:   m.usageEstimated.WithLabelValues(target, model, class),
		promptTokensHist: m.promptTokensHist.WithLabelValues(target, class),
		outputTokensHist: m.outputTokensHist.WithLabelValues(target, class),
		lengthError:      m.lengthError.WithLabelValues(target, class),
		lengthMismatch:   m.lengthMismatch.WithLabelValues(target, class),
	}
	for i, o := range wire.Outcomes {
		cs.requests[i] = m.requests.WithLabelValues(target, model, class, string(o))
	}
	for i, r := range wire.FinishReasons {
		cs.finishReasons[i] = m.finishReasons.WithLabelValues(target, class, r)
	}
	return cs
}

func (m *Metrics) target(name string) *targetSeries {
	return m.state.Load().targets[name]
}

func (m *Metrics) class(target, class string) *classSeries {
	if ts := m.target(target); ts != nil {
		return ts.classes[class]
	}
	return nil
}

// Scheduled implements probe.Observer. An event of a replica (replica not
// "") counts in the target's series, as every event, and in the replica's.
func (m *Metrics) Scheduled(target, replica, class string) {
	ts := m.target(target)
	if ts == nil || ts.classes[class] == nil {
		return
	}
	ts.classes[class].scheduled.Inc()
	if rs := m.replica(ts, replica); rs != nil {
		rs.scheduled.Inc()
	}
}

// Sent implements probe.Observer.
func (m *Metrics) Sent(target, replica, class string) {
	ts := m.target(target)
	if ts == nil || ts.classes[class] == nil {
		return
	}
	ts.classes[class].sent.Inc()
	if rs := m.replica(ts, replica); rs != nil {
		rs.sent.Inc()
	}
}

// Dropped implements probe.Observer.
func (m *Metrics) Dropped(target, replica, class string, reason probe.DropReason) {
	ts := m.target(target)
	if ts == nil || ts.classes[class] == nil {
		return
	}
	for i, r := range probe.DropReasons {
		if r == reason {
			ts.dropped[i].Inc()
			if rs := m.replica(ts, replica); rs != nil {
				rs.drop(reason)
			}
			return
		}
	}
}

// ConversationEnded implements probe.Observer.
func (m *Metrics) ConversationEnded(target, replica, class string, outcome probe.ConversationOutcome) {
	cs := m.class(target, class)
	if cs == nil || cs.conversations == nil {
		return
	}
	for i, o := range probe.ConversationOutcomes {
		if o == outcome {
			cs.conversations[i].Inc()
			return
		}
	}
}

// Observe implements probe.Observer. What each metric observes, and the
// warm-up rules, are documented in docs/metrics.md:
//   - schedule lag: every sent request; client wait: every request that got
//     a connection (both warm-up included: they judge the harness);
//   - requests_total and the token metrics: warm-up included;
//   - TTFT whenever a first token arrived, ITL for every gap, TPOT for
//     successes with at least 2 output tokens, E2E for successes; all four
//     exclude warm-up and carry a trace_id exemplar when the request was
//     traced (ITL: on the request's longest gap only);
//   - a replica's request (r.Replica not "") counts in the target's series
//     and, by the same rules, in the replica's (replicaSeries.observe).
func (m *Metrics) Observe(r *wire.Result) {
	if r == nil {
		return
	}
	ts := m.target(r.Target)
	if ts == nil {
		return
	}
	cs := ts.classes[r.Class]
	if cs == nil || cs.model != r.Model {
		return
	}

	ts.scheduleLag.Observe(seconds(r.ScheduleLag))
	if !r.Start.IsZero() {
		ts.clientWait.Observe(seconds(r.ClientWait))
	}
	for i, o := range wire.Outcomes {
		if o == r.Outcome {
			cs.requests[i].Inc()
			break
		}
	}
	addCount(ts.retries, r.Retries)
	addCount(ts.coalesced, r.CoalescedChunks)
	for i, a := range wire.AnomalyKinds {
		if r.Anomalies.Has(a.Anomaly) {
			ts.anomalies[i].Inc()
		}
	}
	if r.StatusCode != 0 {
		label := wire.StatusCodeLabel(r.StatusCode)
		for i, c := range wire.StatusCodes {
			if c == label {
				ts.responses[i].Inc()
				break
			}
		}
	}
	if r.StatusCode >= 200 && r.StatusCode <= 299 {
		label := wire.FinishReasonLabel(r.FinishReason)
		for i, fr := range wire.FinishReasons {
			if fr == label {
				cs.finishReasons[i].Inc()
				break
			}
		}
	}

	// Token counters: only for requests the server demonstrably processed;
	// a refused or unanswered request consumed nothing.
	if r.UsageReported || r.FirstToken {
		addCount(cs.promptTokens, r.PromptTokens)
		addCount(cs.outputTokens, r.OutputTokens)
		if r.ReasoningReported {
			addCount(cs.reasoningTokens, r.ReasoningTokens)
		}
		if r.CachedTokensReported {
			addCount(cs.cached, r.CachedTokens)
		}
		if !r.UsageReported {
			cs.usageEstimated.Inc()
		}
	}
	if r.UsageReported {
		if r.PromptTokens >= 0 {
			cs.promptTokensHist.Observe(float64(r.PromptTokens))
		}
		if r.OutputTokens >= 0 {
			cs.outputTokensHist.Observe(float64(r.OutputTokens))
		}
		if r.PlannedPromptTokens > 0 && r.PromptTokens >= 0 && r.Images == 0 { // image tokens are not planned
			e := float64(r.PromptTokens-r.PlannedPromptTokens) / float64(r.PlannedPromptTokens)
			cs.lengthError.Observe(e)
			if math.Abs(e) > PromptLengthMismatchThreshold {
				cs.lengthMismatch.Inc()
			}
		}
		if r.CachedTokensReported && r.PromptTokens > 0 && r.CachedTokens >= 0 {
			cs.hit.add(m.now(), r.CachedTokens, r.PromptTokens)
		}
	}

	var ex prometheus.Labels
	if validTraceID(r.TraceID) {
		ex = prometheus.Labels{exemplarKey: r.TraceID}
	}
	if rs := m.replica(ts, r.Replica); rs != nil {
		rs.observe(r, ex)
	}
	if r.Warmup {
		return
	}
	if r.FirstToken {
		observe(cs.ttft, seconds(r.TTFT), ex)
	}
	if r.FirstAnswer {
		observe(cs.ttfa, seconds(r.TTFA), ex)
	}
	if len(r.ITLs) > 0 {
		longest := 0
		for i, d := range r.ITLs {
			if d > r.ITLs[longest] {
				longest = i
			}
		}
		for i, d := range r.ITLs {
			if i == longest {
				observe(cs.itl, seconds(d), ex)
			} else {
				cs.itl.Observe(seconds(d))
			}
		}
	}
	if r.Outcome == wire.OutcomeSuccess {
		if r.OutputTokens >= 2 {
			observe(cs.tpot, seconds(r.TPOT), ex)
		}
		observe(cs.e2e, seconds(r.E2E), ex)
	}
	if cs.slo != nil {
		cs.slo.observe(r)
	}
}

func observe(h histogramWithExemplar, v float64, ex prometheus.Labels) {
	if ex != nil {
		h.ObserveWithExemplar(v, ex)
	} else {
		h.Observe(v)
	}
}

// seconds converts a duration, clamping negatives (a clock step) to 0.
func seconds(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}

// addCount adds n to a counter; negative counts (from a hostile or buggy
// server's usage) are ignored rather than panicking.
func addCount(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// validTraceID accepts what an exemplar label can carry without
// client_golang panicking: a non-empty hex id of at most 64 characters
// (W3C trace ids are 32).
func validTraceID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// HitRatio returns the observed prefix-cache hit ratio of a target's class
// over the hit-ratio window, and false when the window holds no request
// whose server reported cached tokens (or the pair is not configured).
func (m *Metrics) HitRatio(target, class string) (float64, bool) {
	cs := m.class(target, class)
	if cs == nil {
		return 0, false
	}
	return cs.hit.ratio(m.now())
}

// hitRatioCollector exports llmprobe_prefix_cache_hit_ratio at scrape
// time, omitting series whose window is empty: a 0 would claim "no cache
// hits", and NaN breaks aggregations.
type hitRatioCollector struct{ m *Metrics }

func (c hitRatioCollector) Describe(ch chan<- *prometheus.Desc) { ch <- hitRatioDesc }

func (c hitRatioCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.state.Load()
	now := c.m.now()
	for _, ts := range st.targets {
		for _, class := range ts.classOrder {
			if v, ok := ts.classes[class].hit.ratio(now); ok {
				ch <- prometheus.MustNewConstMetric(hitRatioDesc, prometheus.GaugeValue, v, ts.name, class)
			}
		}
	}
}
