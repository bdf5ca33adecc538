// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/diagnosis"
	"github.com/llmprobe/llmprobe/discovery"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/servermetrics"
)

// The server view (docs/design.md "Diagnosis"): for a target with
// server_metrics, a reader goroutine per target (per replica on a
// discovery target with path) reads the engine's exposition every
// interval, through its own HTTP client (server_metrics'
// http_client_config, never the target's), bounded in size and time by
// servermetrics' reader. It pairs each window between two successful
// reads with the probe's own TTFTs over the same window (the results the
// runners observe, warm-up excluded) and keeps the last window's figures
// and the path gap for Engine.Status. A reader never touches a runner
// but through probeAcc: a slow, huge or hostile /metrics, or a
// Prometheus that is down, leaves the probing as it is and says why.

// probeSampleMax bounds the probe TTFTs a window keeps for its quantiles
// (a reservoir sample: at 1 req/s and 15 s, every request).
const probeSampleMax = 512

// ServerStatus is a target's (or replica's) server view.
type ServerStatus struct {
	URL      string // the metrics URL, credentials and query removed
	Engine   string // the engine recognised at the last successful read
	Interval time.Duration
	// LastRead is when the last read ended, LastSuccess the last
	// successful one (zero before one).
	LastRead, LastSuccess time.Time
	// Reads counts the reads by outcome (servermetrics.Outcomes).
	Reads map[string]uint64
	// Up: the last read succeeded and an engine was recognised.
	Up bool
	// Why says why there is no window ("" with one): "not read yet", the
	// last read's error, "one successful read: ...".
	Why string
	// Window is the server's figures between the last two successful
	// reads; Probe the probe's TTFTs that ended in it.
	Window *servermetrics.Window
	Probe  ProbeTTFT
	// Gap is the path gap over Window (nil: GapWhy says why).
	Gap    *PathGap
	GapWhy string
	// GPUUtil is the GPUs' mean utilisation 0–1 over the window
	// (global.diagnosis.prometheus; nil: GPUWhy says why).
	GPUUtil *float64
	GPUWhy  string
}

// ProbeTTFT is the probe's TTFTs (seconds) over a window: their number
// and mean, and p50/p99 of a bounded sample of them.
type ProbeTTFT struct {
	Count         int
	Mean          float64
	P50, P99      float64
	SampleBounded bool // more requests than the sample holds
}

// PathGap is the probe's TTFT minus the server's, in seconds: of the p50s
// and p99s (the server's estimated from its buckets, whose error the
// Error fields state) and of the means (from the server's _sum/_count).
// Where the engine's TTFT leaves the queue out, its mean queue time is
// subtracted too (QueueSubtracted), so that queueing is never called
// path.
type PathGap struct {
	P50, P99, Mean          float64
	P50Error, P99Error      float64
	ServerP50, ServerP99    servermetrics.Quantile
	ServerMean              float64
	QueueSubtracted         float64
	ServerTTFTIncludesQueue bool
	ServerCount, ProbeCount float64
}

// probeAcc gathers the probe's TTFTs between two successful reads.
type probeAcc struct {
	mu     sync.Mutex
	n      int
	sum    float64
	sample [probeSampleMax]float64
	rng    uint64
	// d is the judge's interval: every read takes it (diagnose.go).
	d diagAcc
}

func (a *probeAcc) add(ttft time.Duration) {
	v := ttft.Seconds()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n < probeSampleMax {
		a.sample[a.n] = v
	} else {
		// Algorithm R: each request is in the sample with the same odds.
		a.rng ^= a.rng << 13
		a.rng ^= a.rng >> 7
		a.rng ^= a.rng << 17
		if j := a.rng % uint64(a.n+1); j < probeSampleMax {
			a.sample[j] = v
		}
	}
	a.n++
	a.sum += v
}

// take returns the window's figures and starts the next.
func (a *probeAcc) take() ProbeTTFT {
	a.mu.Lock()
	n, sum := a.n, a.sum
	s := slices.Clone(a.sample[:min(n, probeSampleMax)])
	a.n, a.sum = 0, 0
	a.mu.Unlock()
	p := ProbeTTFT{Count: n, SampleBounded: n > probeSampleMax}
	if n == 0 {
		return p
	}
	slices.Sort(s)
	p.Mean = sum / float64(n)
	p.P50, p.P99 = sampleQuantile(s, 0.5), sampleQuantile(s, 0.99)
	return p
}

// sampleQuantile is the q-quantile of sorted s, interpolated between the
// closest ranks.
func sampleQuantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (s[i+1]-s[i])*(pos-float64(i))
}

// pathGap is the gap over w, or why there is none.
func pathGap(w *servermetrics.Window, p ProbeTTFT) (*PathGap, string) {
	switch {
	case p.Count == 0:
		return nil, "no probe request with a first token in the window"
	case w.TTFT == nil:
		return nil, "no server TTFT: " + w.Missing[servermetrics.FigureTTFT]
	case w.TTFT.Count <= 0:
		return nil, "the server observed no first token in the window"
	}
	g := &PathGap{ServerTTFTIncludesQueue: w.TTFTIncludesQueue, ServerCount: w.TTFT.Count, ProbeCount: float64(p.Count)}
	if !w.TTFTIncludesQueue {
		q, ok := 0.0, false
		if w.Queue != nil {
			q, ok = w.Queue.Value()
		}
		if !ok {
			return nil, fmt.Sprintf("%s's TTFT leaves the queue out and its queue time is missing: %s", w.Engine,
				cmpOr(w.Missing[servermetrics.FigureQueue], "no request finished in the window"))
		}
		g.QueueSubtracted = q
	}
	g.ServerP50, g.ServerP99 = w.TTFT.Quantile(0.5), w.TTFT.Quantile(0.99)
	g.ServerMean, _ = w.TTFT.Mean()
	g.P50 = p.P50 - g.ServerP50.Value - g.QueueSubtracted
	g.P99 = p.P99 - g.ServerP99.Value - g.QueueSubtracted
	g.Mean = p.Mean - g.ServerMean - g.QueueSubtracted
	g.P50Error, g.P99Error = g.ServerP50.Error(), g.ServerP99.Error()
	return g, ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// readerSpec is everything a reader's behaviour depends on: a reload that
// leaves it unchanged keeps the reader and its last reading.
type readerSpec struct {
	URL      string
	Model    string
	Interval time.Duration
	Timeout  time.Duration
	HTTP     commoncfg.HTTPClientConfig
	// GPU: the Prometheus asked for the GPUs' series (nil: none), and
	// the selector with the replica's join labels.
	GPU         *config.DiagnosisPrometheus
	GPUSelector string
	Name        string // for the HTTP client's metrics and logs: target[/replica]
}

// newReaderSpec is the spec of a reader of u for target t.
func newReaderSpec(t *config.Target, sm *config.ServerMetrics, gpu *config.DiagnosisPrometheus, u string, labels map[string]string, name string) readerSpec {
	s := readerSpec{URL: u, Model: t.Model, Interval: time.Duration(sm.Interval), Timeout: sm.ReadTimeout(), HTTP: sm.HTTPClientConfig, Name: name}
	if gpu != nil {
		c := *gpu
		s.GPU = &c
		s.GPUSelector = gpuSelector(gpu.Selector, labels)
	}
	return s
}

// gpuSelector adds a replica's join labels to the selector: dcgm-exporter
// labels a GPU with the pod and namespace using it (Kubernetes mapping)
// and its node as Hostname.
func gpuSelector(base string, labels map[string]string) string {
	parts := []string{}
	if b := strings.Trim(strings.TrimSpace(base), "{}"); b != "" {
		parts = append(parts, b)
	}
	for _, k := range []struct{ from, to string }{{"namespace", "namespace"}, {"pod", "pod"}, {"node", "Hostname"}} {
		if v := labels[k.from]; v != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", k.to, v))
		}
	}
	return strings.Join(parts, ", ")
}

// serverReader reads one metrics URL every interval until stopped.
type serverReader struct {
	spec    readerSpec
	acc     probeAcc
	cancel  context.CancelFunc
	done    chan struct{}
	stopped atomic.Bool

	mu   sync.Mutex
	st   ServerStatus
	prev *servermetrics.Reading
	diag *Diagnosis // the latest verdict (diagnose.go)

	// judge is the target's (or replica's) diagnosis, and lastOK whether
	// the last read succeeded: the reader's goroutine alone uses them.
	judge  *diagnosis.Judge
	lastOK bool
}

// startReader starts reading spec's URL.
func startReader(spec readerSpec) *serverReader {
	ctx, cancel := context.WithCancel(context.Background())
	sr := &serverReader{spec: spec, cancel: cancel, done: make(chan struct{}), judge: diagnosis.NewJudge()}
	sr.acc.rng = uint64(time.Now().UnixNano()) | 1
	sr.st = ServerStatus{URL: scrub.URL(spec.URL), Interval: spec.Interval, Reads: map[string]uint64{}, Why: "not read yet"}
	go sr.run(ctx)
	return sr
}

// stop ends the reader (without waiting: a read in flight is cancelled).
func (sr *serverReader) stop() {
	if sr != nil {
		sr.stopped.Store(true)
		sr.cancel()
	}
}

// wait waits for the reader's goroutine to end.
func (sr *serverReader) wait() {
	if sr != nil {
		<-sr.done
	}
}

func (sr *serverReader) run(ctx context.Context) {
	defer close(sr.done)
	client, err := wire.NewHTTPClient(sr.spec.HTTP, sr.spec.Name+"_server_metrics", 0)
	if err != nil {
		sr.mu.Lock()
		sr.st.Why = "http_client_config: " + scrub.URLs(err.Error())
		sr.mu.Unlock()
		return
	}
	defer client.CloseIdleConnections()
	var gpuClient *http.Client
	if sr.spec.GPU != nil {
		if gpuClient, err = wire.NewHTTPClient(sr.spec.GPU.HTTPClientConfig, sr.spec.Name+"_diagnosis_prometheus", 0); err != nil {
			sr.mu.Lock()
			sr.st.GPUWhy = "diagnosis.prometheus.http_client_config: " + scrub.URLs(err.Error())
			sr.mu.Unlock()
			gpuClient = nil
		} else {
			defer gpuClient.CloseIdleConnections()
		}
	}
	t := time.NewTicker(sr.spec.Interval)
	defer t.Stop()
	v := time.NewTicker(time.Duration(verdictEvery.Load()))
	defer v.Stop()
	sr.read(ctx, client, gpuClient)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sr.read(ctx, client, gpuClient)
		case <-v.C:
			// Now, not the tick's time: a slow read may have held it.
			sr.decide(time.Now())
		}
	}
}

// read reads once and updates the status.
func (sr *serverReader) read(ctx context.Context, client, gpuClient *http.Client) {
	cur := servermetrics.Read(ctx, client, sr.spec.URL, sr.spec.Model, sr.spec.Timeout)
	if ctx.Err() != nil {
		return // stopped: not a failure of the server
	}
	var gpu *float64
	gpuWhy := ""
	if gpuClient != nil && cur.Outcome == servermetrics.OutcomeOK {
		gctx, cancel := context.WithTimeout(ctx, sr.spec.Timeout)
		g := servermetrics.QueryGPUWith(gctx, gpuClient, sr.spec.GPU.URL, sr.spec.GPUSelector, time.Now(), sr.spec.Interval)
		cancel()
		if v, ok := g.MeanUtil(); ok {
			gpu = &v
		} else {
			gpuWhy = cmpOr(strings.Join(g.Errors, "; "), "no GPU series")
		}
	}
	end := time.Now()
	var (
		window *servermetrics.Window
		first  bool
	)
	defer func() { sr.addInterval(end, cur, window, first, gpu) }()
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := &sr.st
	st.Reads[cur.Outcome]++
	st.LastRead = end
	if cur.Outcome != servermetrics.OutcomeOK {
		// No figures while the server cannot be read; the probe's
		// requests go on counting towards the next window.
		st.Up, st.Why, st.Window, st.Gap, st.GapWhy, st.GPUUtil = false, cur.Err, nil, nil, "", nil
		return
	}
	probe := sr.acc.take()
	st.Up, st.Engine, st.LastSuccess = true, cur.Engine, cur.At
	if sr.spec.GPU != nil {
		st.GPUUtil, st.GPUWhy = gpu, gpuWhy
	} else {
		st.GPUWhy = "no global.diagnosis.prometheus"
	}
	prev := sr.prev
	sr.prev = cur
	if prev == nil {
		st.Why, first = "one successful read: the figures need two", true
		return
	}
	w := servermetrics.Delta(prev, cur)
	window = w
	st.Why, st.Window, st.Probe = "", w, probe
	st.Gap, st.GapWhy = pathGap(w, probe)
}

// snapshot is a copy of the reader's status (nil reader: nil).
func (sr *serverReader) snapshot() *ServerStatus {
	if sr == nil {
		return nil
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	s := sr.st
	s.Reads = make(map[string]uint64, len(sr.st.Reads))
	for k, v := range sr.st.Reads {
		s.Reads[k] = v
	}
	return &s
}

// keepOrStart returns old when it reads spec, else stops it and starts a
// reader of spec.
func keepOrStart(old *serverReader, spec readerSpec) *serverReader {
	if old != nil && !old.stopped.Load() && reflect.DeepEqual(old.spec, spec) {
		return old
	}
	old.stop()
	return startReader(spec)
}

// feed makes r count its TTFTs into sr's window (nil: none).
func (r *runner) feed(sr *serverReader) {
	if sr == nil {
		r.srv.Store(nil)
		return
	}
	r.srv.Store(&sr.acc)
}

// observeServerView counts a result into the server view's window (its
// TTFT: those without a first token are left out) and the judge's
// interval; warm-up requests are left out of both.
func (r *runner) observeServerView(res *wire.Result) {
	a := r.srv.Load()
	if a == nil || res.Warmup {
		return
	}
	if ttft := res.TTFT; ttft > 0 && !math.IsNaN(ttft.Seconds()) {
		a.add(ttft)
	}
	a.observeResult(res)
}

// replicaReaderSpec is the reader spec of a replica of a pool reading
// path, or false.
func (p *pool) replicaReaderSpec(rep discovery.Replica) (readerSpec, bool) {
	sm := p.serverMetrics
	if sm == nil || sm.Path == "" {
		return readerSpec{}, false
	}
	return newReaderSpec(&p.template.Target, sm, p.gpu, sm.ReplicaURL(rep.Address), rep.Labels, p.name+"_"+rep.Name), true
}

// syncReaders gives every live replica of p its reader (path: its own,
// kept when its spec is unchanged; url: the target's) and stops those of
// replicas no longer live. e.mu is held.
func (p *pool) syncReaders() {
	for name, lr := range p.live {
		spec, ok := p.replicaReaderSpec(lr.rep)
		switch {
		case ok:
			sr := keepOrStart(p.readers[name], spec)
			p.readers[name] = sr
			lr.r.feed(sr)
		default:
			p.readers[name].stop()
			delete(p.readers, name)
			lr.r.feed(p.targetReader)
		}
	}
	for name, sr := range p.readers {
		if p.live[name] == nil {
			sr.stop() // retired: its state goes with dropRetired
		}
	}
}
