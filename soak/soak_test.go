// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment variables of the soak test (set by `make soak`).
const (
	EnableEnv   = "LLMPROBE_SOAK" // "1" runs TestSoak; anything else skips it
	DurationEnv = "SOAK_DURATION" // Go duration, default 1h
	RateEnv     = "SOAK_RATE"     // requests per second, default 200
	IntervalEnv = "SOAK_INTERVAL" // Go duration between scrapes, default 30s
)

// Thresholds of the verdict (docs/soak.md).
const (
	maxDrift        = 0.10  // growth of RSS, heap goal or goroutines over the judged span
	maxFailureShare = 0.001 // of ended requests, per non-success outcome; of scheduled, per drop reason
	minRateShare    = 0.98  // achieved / requested rate
	maxRateGap      = 0.01  // |daemon's requested rate − SOAK_RATE| / SOAK_RATE
	maxSoakRate     = 5000  // a typo guard: the load is loopback-only but real
)

// settings are the soak's parameters.
type settings struct {
	duration time.Duration // length of the measured run
	rate     float64       // requested requests per second, all targets
	interval time.Duration // between scrapes
}

// settingsFromEnv reads the settings from getenv (os.Getenv) and checks
// that they make a judgeable run.
func settingsFromEnv(getenv func(string) string) (settings, error) {
	s := settings{duration: time.Hour, rate: 200, interval: 30 * time.Second}
	var err error
	if v := getenv(DurationEnv); v != "" {
		if s.duration, err = time.ParseDuration(v); err != nil {
			return s, fmt.Errorf("$%s: %v", DurationEnv, err)
		}
	}
	if v := getenv(IntervalEnv); v != "" {
		if s.interval, err = time.ParseDuration(v); err != nil {
			return s, fmt.Errorf("$%s: %v", IntervalEnv, err)
		}
	}
	if v := getenv(RateEnv); v != "" {
		if s.rate, err = strconv.ParseFloat(v, 64); err != nil {
			return s, fmt.Errorf("$%s: %v", RateEnv, err)
		}
	}
	switch {
	case s.duration < time.Minute:
		return s, fmt.Errorf("$%s=%s: at least 1m", DurationEnv, s.duration)
	case s.interval < time.Second:
		return s, fmt.Errorf("$%s=%s: at least 1s", IntervalEnv, s.interval)
	case !(s.rate > 0) || s.rate > maxSoakRate:
		return s, fmt.Errorf("$%s=%g: must be in (0, %d] req/s", RateEnv, s.rate, maxSoakRate)
	}
	if n := int(judgedSpan(s.duration)/s.interval) + 1; n < minSpanSamples {
		return s, fmt.Errorf("$%s=%s gives %d samples over the judged %s of a %s run; need at least %d (an interval of at most %s)",
			IntervalEnv, s.interval, n, judgedSpan(s.duration), s.duration, minSpanSamples, judgedSpan(s.duration)/(minSpanSamples-1))
	}
	return s, nil
}

// The workload mix. chatShare of the requested rate goes to a chat target
// whose arrivals bring chatPerArrival requests on average (its agent class
// is multi-turn); the rest to a completions target.
const (
	chatShare      = 0.9
	chatWeight     = 0.7 // single-turn chat, shared system prompts
	ragWeight      = 0.1 // long retrieved context, shared instructions
	agentWeight    = 0.2 // multi-turn, 2–4 turns (mean 3)
	agentTurns     = 3.0
	chatPerArrival = chatWeight + ragWeight + agentWeight*agentTurns
	daemonGrace    = 10 * time.Second
	daemonWarmup   = 15 * time.Second
)

// daemonConfig is the llmprobe configuration of the soak: a production-like
// mix (heavy-tailed lengths, shared prefixes, a multi-turn class, realistic
// sampling) over both APIs, at a total of rate requests per second. The
// in-flight limits are far above what the rate needs (a few hundred
// requests in flight), so nothing should be dropped.
func daemonConfig(simURL string, rate float64) string {
	chatArrivals := rate * chatShare / chatPerArrival
	completionArrivals := rate * (1 - chatShare)
	return fmt.Sprintf(`# llmprobe soak test (soak/soak_test.go): %g req/s in all.
global:
  warmup: %s
  request_timeout: 60s
  shutdown_grace_period: %s
workloads:
  chat-mix:
    classes:
      - name: chat
        weight: %g
        prompt_tokens: {dist: lognormal, median: 120, p99: 2048, min: 4, max: 6144}
        output_tokens: {dist: lognormal, median: 60, p99: 600, min: 1, max: 1024}
        prefix: {groups: 4, tokens: 256, probability: 0.8}
        sampling: {temperature: 0.7, top_p: 0.95}
      - name: rag
        weight: %g
        prompt_tokens: {dist: empirical, quantiles: {0.5: 1500, 0.9: 3000, 0.99: 5000}, max: 6000}
        output_tokens: {dist: uniform, min: 64, max: 256}
        prefix: {groups: 2, tokens: 512, probability: 1}
        sampling: {temperature: 0.2, top_p: 1}
      - name: agent
        weight: %g
        prompt_tokens: {dist: uniform, min: 200, max: 800}
        output_tokens: {dist: lognormal, median: 80, p99: 400, min: 8, max: 1024}
        prefix: {groups: 2, tokens: 128, probability: 1}
        sampling: {temperature: 0.7, top_p: 0.95}
        turns:
          count: {dist: uniform, min: 2, max: 4}
          think_time: {dist: lognormal, median: 1s, p99: 5s}
          user_tokens: {dist: lognormal, median: 64, p99: 512, max: 1024}
  completion-mix:
    classes:
      - name: summarize
        prompt_tokens: {dist: lognormal, median: 400, p99: 3000, min: 16, max: 6000}
        output_tokens: {dist: lognormal, median: 40, p99: 300, min: 1, max: 512}
        sampling: {temperature: 0.7, top_p: 0.95}
targets:
  - name: soak-chat
    url: %s/v1
    api: chat
    model: soak-model
    workload: chat-mix
    arrival: {process: poisson, rate: %.6f}
    max_inflight: 4096
    extra_body: {ignore_eos: true}
  - name: soak-completions
    url: %s/v1
    api: completions
    model: soak-model
    workload: completion-mix
    arrival: {process: gamma, rate: %.6f, burstiness: 0.7}
    max_inflight: 4096
    extra_body: {ignore_eos: true}
`, rate, daemonWarmup, daemonGrace, chatWeight, ragWeight, agentWeight,
		simURL, chatArrivals, simURL, completionArrivals)
}

// simConfig is the simulator's configuration: vLLM-like timing, a little
// faster than the default, and a batch and KV cache large enough that the
// simulator is never the bottleneck (at the default rate it runs a few
// hundred sequences in a 10–15 ms step and its queue stays empty; the
// table's "sim wait" column shows it).
const simConfig = `# llmprobe soak test (soak/soak_test.go)
models: [soak-model]
max_model_len: 16384
max_num_seqs: 4096
max_num_batched_tokens: 32768
prefill_base: 2ms
prefill_per_token: 2us
decode_base: 10ms
decode_per_seq: 10us
num_kv_blocks: 262144
`

// scrapeRetries is how many consecutive scrapes may fail before the soak
// fails.
const scrapeRetries = 3

func TestSoak(t *testing.T) {
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("soak test: runs for an hour; run it with `make soak` (or %s=1)", EnableEnv)
	}
	cfg, err := settingsFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	// Start-up (build, readiness) and shutdown take well under this.
	budget := cfg.duration + 5*time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl) < budget {
		t.Fatalf("go test -timeout leaves %s, the soak needs %s: run it with `make soak` or -timeout %s",
			time.Until(dl).Round(time.Second), budget, (budget + 10*time.Minute).Round(time.Minute))
	}
	t.Logf("soak: %s at %g req/s, scraping every %s; judging drift over the last %s",
		cfg.duration, cfg.rate, cfg.interval, judgedSpan(cfg.duration))

	bin := soakBinary(t)
	dir := t.TempDir()
	simFile := filepath.Join(dir, "sim.yml")
	if err := os.WriteFile(simFile, []byte(simConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the daemon stops before the
	// simulator it probes.
	sim, simURL := startServer(t, bin, "llmprobe sim", "/health", func(addr string) []string {
		return []string{"sim", "--web.listen-address=" + addr, "--sim.config.file=" + simFile}
	})
	configFile := filepath.Join(dir, "llmprobe.yml")
	if err := os.WriteFile(configFile, []byte(daemonConfig(simURL, cfg.rate)), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon, daemonURL := startServer(t, bin, "llmprobe run", "/-/ready", func(addr string) []string {
		return []string{"run", "--config.file=" + configFile, "--web.listen-address=" + addr, "--log.level=info"}
	})
	start := time.Now()

	samples := collect(t, cfg, start, daemon, sim, daemonURL, simURL)
	t.Logf("samples:\n%s", formatTable(samples))
	judge(t, cfg, samples)

	// Stop explicitly to check the exits; the cleanups only stop what is
	// still running.
	stopStart := time.Now()
	if err := daemon.Stop(daemonGrace + 20*time.Second); err != nil {
		t.Error(err)
	}
	t.Logf("daemon stopped %s after SIGTERM", time.Since(stopStart).Round(time.Millisecond))
	if err := sim.Stop(stopTimeout); err != nil {
		t.Error(err)
	}
	for _, p := range []*process{daemon, sim} {
		logBytes, warn, errs, notable := p.log.Counts()
		msg := fmt.Sprintf("%s log: %d bytes, %d WARN and %d ERROR lines", p.Name(), logBytes, warn, errs)
		if len(notable) > 0 {
			msg += fmt.Sprintf(" (the first %d):\n  %s", len(notable), strings.Join(notable, "\n  "))
		}
		t.Log(msg)
	}
}

// collect scrapes the daemon (and the simulator's queue) at start,
// start+interval, ... up to start+duration, and fails t at once when a
// process exits or scrapes keep failing.
func collect(t *testing.T, cfg settings, start time.Time, daemon, sim *process, daemonURL, simURL string) []sample {
	t.Helper()
	var samples []sample
	failures := 0
	for k := 0; ; k++ {
		at := time.Duration(k) * cfg.interval
		if at > cfg.duration {
			break
		}
		timer := time.NewTimer(time.Until(start.Add(at)))
		select {
		case <-daemon.Done():
			timer.Stop()
			t.Logf("samples so far:\n%s", formatTable(samples))
			t.Fatalf("the daemon exited %s into the soak: %v", time.Since(start).Round(time.Second), daemon.Err())
		case <-sim.Done():
			timer.Stop()
			t.Logf("samples so far:\n%s", formatTable(samples))
			t.Fatalf("the simulator exited %s into the soak: %v", time.Since(start).Round(time.Second), sim.Err())
		case <-timer.C:
		}
		s, err := takeSample(daemonURL, simURL)
		if err != nil {
			failures++
			t.Logf("%s: scrape failed (%d in a row): %v", clock(at), failures, err)
			if failures >= scrapeRetries {
				t.Logf("samples so far:\n%s", formatTable(samples))
				t.Fatalf("%d scrapes in a row failed; last: %v", failures, err)
			}
			continue
		}
		failures = 0
		s.slot, s.at = at, time.Since(start)
		if n := len(samples); n > 0 {
			p := samples[n-1]
			dt := (s.at - p.at).Seconds()
			t.Logf("%s  RSS %.1f MiB  heap %.1f MiB (goal %.1f)  goroutines %.0f  inflight %.0f  sent %.0f  %.1f req/s  CPU %.2f  load %.2f",
				clock(s.at), s.rss/mib, s.heapInuse/mib, s.heapGoal/mib, s.goroutines, s.inflight,
				s.sent, (s.sent-p.sent)/dt, (s.cpu-p.cpu)/dt, s.load)
		}
		samples = append(samples, s)
	}
	return samples
}

// takeSample scrapes the daemon, and the simulator's queue and CPU use
// (best effort: they only show that the simulator kept up).
func takeSample(daemonURL, simURL string) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	f, err := scrape(ctx, daemonURL+"/metrics")
	if err != nil {
		return sample{}, err
	}
	s, err := daemonSample(f)
	if err != nil {
		return sample{}, err
	}
	if sf, err := scrape(ctx, simURL+"/metrics"); err == nil {
		if v, ok := sf.sum("vllm:num_requests_waiting"); ok {
			s.simWaiting = v
		}
		if v, ok := sf.sum("process_cpu_seconds_total"); ok {
			s.simCPU = v
		}
	}
	s.load = hostLoad()
	return s, nil
}

// hostLoad is the 1-minute load average from /proc/loadavg (NaN where
// there is none): the soak shares the machine with whatever else runs.
func hostLoad() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// judge applies the verdict to a completed run's samples, reporting every
// failure (t.Error) rather than stopping at the first.
func judge(t *testing.T, cfg settings, samples []sample) {
	t.Helper()
	if len(samples) < 2 {
		t.Fatalf("only %d samples", len(samples))
	}
	last := samples[len(samples)-1]

	// Drift over the judged span.
	span := spanSamples(samples, judgedSpan(cfg.duration))
	t.Logf("drift over the last %s (%s–%s, %d samples, windows of %d):",
		judgedSpan(cfg.duration), clock(span[0].at), clock(last.at), len(span), windowSize(len(span)))
	series := []struct {
		name   string
		unit   float64
		judged bool
		get    func(sample) float64
	}{
		{"RSS MiB", mib, true, func(s sample) float64 { return s.rss }},
		{"heap goal MiB", mib, true, func(s sample) float64 { return s.heapGoal }},
		{"goroutines", 1, true, func(s sample) float64 { return s.goroutines }},
		{"heap in-use MiB", mib, false, func(s sample) float64 { return s.heapInuse }},
		{"inflight", 1, false, func(s sample) float64 { return s.inflight }},
	}
	for _, sr := range series {
		xs := make([]float64, len(span))
		for i, s := range span {
			xs[i] = sr.get(s)
		}
		d, err := computeDrift(xs)
		if err != nil {
			t.Errorf("%s: %v", sr.name, err)
			continue
		}
		verdict := "ok"
		switch {
		case !sr.judged:
			verdict = "(not judged)"
		case d.drift > maxDrift:
			verdict = fmt.Sprintf("FAIL: grew more than %.0f%%", maxDrift*100)
			t.Errorf("%s grew %.1f%% over the judged span (%.1f → %.1f), limit %.0f%%",
				sr.name, d.drift*100, d.first/sr.unit, d.last/sr.unit, maxDrift*100)
		}
		t.Logf("  %-16s first %9.1f  last %9.1f  drift %+6.1f%%  min %9.1f  max %9.1f  spread %5.1f%%  %s",
			sr.name, d.first/sr.unit, d.last/sr.unit, d.drift*100, d.min/sr.unit, d.max/sr.unit, d.spread*100, verdict)
	}

	// Rate.
	achieved, from, window, err := achievedRate(samples, rateSettle(cfg.duration))
	if err != nil {
		t.Errorf("achieved rate: %v", err)
	} else {
		share := achieved / last.requested
		t.Logf("rate: requested %.2f req/s (daemon's llmprobe_target_request_rate; SOAK_RATE %g), achieved %.2f req/s over %s from %s (%.2f%%)",
			last.requested, cfg.rate, achieved, window.Round(time.Second), clock(from), share*100)
		if share < minRateShare {
			t.Errorf("achieved rate %.2f req/s is %.2f%% of the requested %.2f, below %.0f%%", achieved, share*100, last.requested, minRateShare*100)
		}
	}
	if gap := math.Abs(last.requested-cfg.rate) / cfg.rate; gap > maxRateGap {
		t.Errorf("the daemon reports a requested rate of %.2f req/s for a configured %g (%.1f%% off): the soak's configuration no longer yields SOAK_RATE",
			last.requested, cfg.rate, gap*100)
	}

	// Outcomes and drops, over the whole run.
	ended := last.ended()
	if ended == 0 {
		t.Errorf("no request ended")
		return
	}
	t.Logf("requests: %.0f scheduled, %.0f sent, %.0f ended, %.0f in flight at the last scrape; harness saturated at %d of %d scrapes",
		last.scheduled, last.sent, ended, last.inflight, countSaturated(samples), len(samples))
	for _, outcome := range sortedKeys(last.outcomes) {
		n := last.outcomes[outcome]
		share := n / ended
		note := ""
		if outcome != "success" && share > maxFailureShare {
			note = "  FAIL"
			t.Errorf("outcome %s: %.0f of %.0f ended requests (%.3f%%), limit %.1f%%", outcome, n, ended, share*100, maxFailureShare*100)
		}
		t.Logf("  outcome %-16s %10.0f  %8.3f%%%s", outcome, n, share*100, note)
	}
	for _, reason := range sortedKeys(last.dropped) {
		n := last.dropped[reason]
		share := n / last.scheduled
		note := ""
		if share > maxFailureShare {
			note = "  FAIL"
			t.Errorf("dropped (%s): %.0f of %.0f scheduled requests (%.3f%%), limit %.1f%%", reason, n, last.scheduled, share*100, maxFailureShare*100)
		}
		t.Logf("  dropped %-16s %10.0f  %8.3f%%%s", reason, n, share*100, note)
	}
	if max := maxSimWaiting(samples); !math.IsNaN(max) {
		t.Logf("simulator: at most %.0f requests waiting for a batch slot at a scrape", max)
	}
	if n := countSaturated(samples); n > 0 {
		t.Logf("NOTE: the daemon flagged itself saturated (llmprobe_harness_saturated=1) at %d of %d scrapes; "+
			"the host's load average reached %.2f on %d CPUs: a soak run needs a quiet machine (docs/soak.md)",
			n, len(samples), maxLoad(samples), runtime.NumCPU())
	}
}

func maxLoad(samples []sample) float64 {
	out := math.NaN()
	for _, s := range samples {
		if !math.IsNaN(s.load) && !(s.load <= out) {
			out = s.load
		}
	}
	return out
}

func countSaturated(samples []sample) int {
	n := 0
	for _, s := range samples {
		if s.saturated > 0 {
			n++
		}
	}
	return n
}

func maxSimWaiting(samples []sample) float64 {
	out := math.NaN()
	for _, s := range samples {
		if !math.IsNaN(s.simWaiting) && !(s.simWaiting <= out) {
			out = s.simWaiting
		}
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The helpers' unit tests: fast, and run by `go test ./...`.

func TestSettingsFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	s, err := settingsFromEnv(env(nil))
	if err != nil || s.duration != time.Hour || s.rate != 200 || s.interval != 30*time.Second {
		t.Errorf("defaults: %+v, %v", s, err)
	}
	s, err = settingsFromEnv(env(map[string]string{DurationEnv: "4m", IntervalEnv: "10s", RateEnv: "50"}))
	if err != nil || s.duration != 4*time.Minute || s.rate != 50 || s.interval != 10*time.Second {
		t.Errorf("4m/10s/50: %+v, %v", s, err)
	}
	for _, bad := range []map[string]string{
		{DurationEnv: "soon"},
		{DurationEnv: "30s"},
		{RateEnv: "0"},
		{RateEnv: "NaN"},
		{RateEnv: "1e6"},
		{IntervalEnv: "10ms"},
		{DurationEnv: "4m", IntervalEnv: "30s"}, // 5 samples over the last 2m
	} {
		if _, err := settingsFromEnv(env(bad)); err == nil {
			t.Errorf("%v: no error", bad)
		} else if !strings.Contains(err.Error(), "SOAK_") {
			t.Errorf("%v: error %q does not name the variable", bad, err)
		}
	}
}

func TestDaemonConfigRate(t *testing.T) {
	// The requested rate splits 90/10 between the targets, and the chat
	// target's arrivals are scaled by its requests per arrival.
	if got := chatPerArrival; math.Abs(got-1.4) > 1e-9 {
		t.Errorf("chatPerArrival = %g, want 1.4", got)
	}
	c := daemonConfig("http://127.0.0.1:1", 200)
	for _, want := range []string{"rate: 128.571429}", "rate: 20.000000,", "url: http://127.0.0.1:1/v1", "max_inflight: 4096"} {
		if !strings.Contains(c, want) {
			t.Errorf("config lacks %q:\n%s", want, c)
		}
	}
}
