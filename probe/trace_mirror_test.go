// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// writeJointTrace writes a Mooncake-format trace of n records with a
// strong joint structure: half RAG requests (long prompts that start with
// one of 20 shared documents, short answers), half chat (short prompts,
// long answers). It returns the records' (prompt, output) lengths.
func writeJointTrace(t *testing.T, path string, n int) (prompts, outputs []float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(20, 26))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	next := uint64(1_000_000) // unique block ids
	for i := range n {
		var in, out int
		var ids []uint64
		if r.IntN(2) == 0 { // RAG: a shared document block, then the question
			in, out = 600+r.IntN(900), 1+r.IntN(24)
			ids = append(ids, uint64(r.IntN(20)))
		} else { // chat
			in, out = 10+r.IntN(300), 30+r.IntN(90)
		}
		for len(ids)*512 < in {
			ids = append(ids, next)
			next++
		}
		idText := make([]string, len(ids))
		for j, id := range ids {
			idText[j] = fmt.Sprint(id)
		}
		fmt.Fprintf(w, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s]}`+"\n", i*10, in, out, strings.Join(idText, ", "))
		prompts, outputs = append(prompts, float64(in)), append(outputs, float64(out))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return prompts, outputs
}

// spearman is the rank correlation of x and y (ties get their mean rank).
func spearman(x, y []float64) float64 {
	rx, ry := ranks(x), ranks(y)
	n := float64(len(x))
	var mx, my float64
	for i := range rx {
		mx, my = mx+rx[i], my+ry[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy, sxx, syy = sxy+dx*dy, sxx+dx*dx, syy+dy*dy
	}
	return sxy / math.Sqrt(sxx*syy)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
	out := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && v[idx[j]] == v[idx[i]] {
			j++
		}
		for k := i; k < j; k++ {
			out[idx[k]] = float64(i+j+1) / 2 // mean of ranks i+1..j
		}
		i = j
	}
	return out
}

// The daemon's continuous mirroring keeps the trace's joint distribution:
// over 10,000 requests of a from_trace class sent by the engine to the
// simulator (zero latency, bounded in time), the rank correlation of the
// (prompt, output) lengths the simulator counted is within 0.05 of the
// trace's, and the prefix reuse the trace's hash ids imply is what the
// class exports as its intent.
func TestEngineFromTraceKeepsJointLengths(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 requests")
	}
	const want = 10_000
	dir := t.TempDir()
	prompts, outputs := writeJointTrace(t, filepath.Join(dir, "trace.jsonl"), 20_000)
	traceRho := spearman(prompts, outputs)

	_, url := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	cfgPath := filepath.Join(dir, "llmprobe.yml")
	cfgText := fmt.Sprintf(`
global: {warmup: 0s, seed: 7, late_after: 10s}
workloads:
  mirror:
    classes:
      - {name: mirror, from_trace: {file: trace.jsonl, format: mooncake}}
targets:
  - {name: t, url: %s, api: completions, model: sim-model, workload: mirror, max_inflight: 256,
     arrival: {process: constant, rate: 1000}, extra_body: {ignore_eos: true}}
`, url)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfigFile(t, cfgPath) // trace.jsonl resolves against the config's directory

	rec := newRecorder()
	e := probe.NewEngine(probe.Options{Observer: rec, Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		n := len(rec.results)
		rec.mu.Unlock()
		if n >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	status := e.Status()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	var p, o []float64
	var cached, prompt float64
	for _, res := range rec.byTarget("t") {
		if res.Outcome != wire.OutcomeSuccess {
			continue
		}
		p, o = append(p, float64(res.PromptTokens)), append(o, float64(res.OutputTokens))
		cached += float64(res.CachedTokens)
		prompt += float64(res.PromptTokens)
	}
	if len(p) < want {
		t.Fatalf("%d successful requests in 90s, want %d (dropped: %v)", len(p), want, rec.dropped)
	}
	p, o = p[:want], o[:want]
	rho := spearman(p, o)
	intent := status[0].Classes[0].ReuseIntent
	t.Logf("Spearman rho of (prompt, output): trace %.4f, %d daemon requests %.4f (difference %.4f); prefix reuse: trace intent %.3f, simulator hit ratio %.3f",
		traceRho, want, rho, rho-traceRho, intent, cached/prompt)
	if math.Abs(traceRho) < 0.3 {
		t.Fatalf("the fixture's rho %.3f is too weak to test anything", traceRho)
	}
	if math.Abs(rho-traceRho) > 0.05 {
		t.Errorf("rank correlation %.4f, the trace's %.4f: more than 0.05 apart", rho, traceRho)
	}
	if !(intent > 0.1 && intent < 0.9) {
		t.Errorf("reuse intent %.3f: the trace's RAG documents are shared blocks", intent)
	}
	// The simulator's cache holds the 20 documents: it serves what the
	// trace says was shared, and little more (a record drawn twice while
	// its blocks are still cached).
	if got := cached / prompt; math.Abs(got-intent) > 0.05 {
		t.Errorf("simulator hit ratio %.3f, the trace's reuse %.3f: more than 5 points apart", got, intent)
	}
}

func loadConfigFile(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// A trace with sessions is replayed by whole sessions: each arrival is a
// conversation whose turns are the session's records in order, each sent
// after the previous answer, with the record's lengths; the later turns
// hit the prefix cache with the history the trace's blocks (or, without
// hash ids, the session's own blocks) say they share.
func TestEngineFromTraceReplaysSessions(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	type turn struct{ in, out int }
	sessions := map[string][]turn{}
	for s := range 40 {
		id := fmt.Sprintf("s%02d", s)
		in := 100 + 10*s
		for k := range 3 {
			out := 5 + k
			ids := ""
			if s%2 == 0 { // the trace's own blocks: a growing prefix
				var parts []string
				for j := range (in + 63) / 64 {
					parts = append(parts, fmt.Sprint(s*1000+j))
				}
				ids = `, "hash_ids": [` + strings.Join(parts, ", ") + `]`
			}
			fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "session_id": %q%s}`+"\n", s*100+k*30, in, out, id, ids)
			sessions[id] = append(sessions[id], turn{in, out})
			in += out + 150
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	cfgPath := filepath.Join(dir, "llmprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
global: {warmup: 0s, seed: 3}
workloads:
  w:
    classes:
      - {name: agent, from_trace: {file: sessions.jsonl, format: mooncake, block_size: 64}}
targets:
  - {name: t, url: %s, model: sim-model, workload: w, arrival: {process: constant, rate: 20}, extra_body: {ignore_eos: true}}
`, url)), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	runEngine(t, loadConfigFile(t, cfgPath), rec, 1500*time.Millisecond)

	byConv := map[string][]*wire.Result{}
	for _, r := range rec.byTarget("t") {
		if r.ConversationID == "" {
			t.Fatalf("a session's turn without a conversation id: %+v", r)
		}
		byConv[r.ConversationID] = append(byConv[r.ConversationID], r)
	}
	if rec.conversations[probe.ConversationCompleted] < 10 {
		t.Fatalf("completed conversations: %v", rec.conversations)
	}
	complete, hits := 0, 0
	for id, turns := range byConv {
		slices.SortFunc(turns, func(a, b *wire.Result) int { return a.Turn - b.Turn })
		// Which session: the one whose first turn has this prompt length
		// and whose turns match in order.
		var want []turn
		for _, s := range sessions {
			if s[0].in == turns[0].PlannedPromptTokens {
				want = s
			}
		}
		if want == nil {
			t.Fatalf("conversation %s: first prompt of %d tokens is no session's", id, turns[0].PlannedPromptTokens)
		}
		for i, r := range turns {
			if r.Turn != i+1 || r.Outcome != wire.OutcomeSuccess {
				t.Fatalf("conversation %s: turn %d is #%d, outcome %s", id, r.Turn, i+1, r.Outcome)
			}
			if r.PlannedPromptTokens != want[i].in || r.OutputTokens != want[i].out {
				t.Errorf("conversation %s turn %d: prompt %d (planned %d), output %d; the trace's %d, %d", id, r.Turn, r.PromptTokens, r.PlannedPromptTokens, r.OutputTokens, want[i].in, want[i].out)
			}
			if i > 0 {
				if prev := turns[i-1]; !r.Start.After(prev.Start.Add(prev.E2E)) {
					t.Errorf("conversation %s turn %d started before the previous answer ended", id, r.Turn)
				}
				// The previous turn's full blocks are cached.
				if min := want[i-1].in / 64 * 64; r.CachedTokens >= min-16 {
					hits++
				} else {
					t.Errorf("conversation %s turn %d: cached %d tokens, want the previous turn's %d", id, r.Turn, r.CachedTokens, min)
				}
			}
		}
		if len(turns) == 3 {
			complete++
		}
	}
	t.Logf("%d conversations (%d of 3 turns), %d later turns hit the previous turn's blocks; outcomes %v", len(byConv), complete, hits, rec.conversations)
}

// With a trace_shape arrival the requested rate the status (and so
// llmprobe_target_request_rate) reports is the curve's value now, not its
// mean: achieved compares to what was asked at the moment.
func TestEngineTraceShapeRequestedRate(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	// Over a 2-minute trace: 30 records in the first minute, 10 in the second.
	for i := range 40 {
		ms := i * 2000
		if i >= 30 {
			ms = 60_000 + (i-30)*6000
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 20, "output_length": 2, "hash_ids": []}`+"\n", ms)
	}
	if err := os.WriteFile(filepath.Join(dir, "day.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	cfgPath := filepath.Join(dir, "llmprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w:
    classes: [{name: c, prompt_tokens: 20, output_tokens: 2}]
targets:
  - {name: t, url: %s, model: sim-model, workload: w, arrival: {process: trace_shape, rate: 4, trace: {file: day.jsonl, period: 2m, bin: 1m}}}
`, url)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfigFile(t, cfgPath)
	e := probe.NewEngine(probe.Options{Observer: newRecorder(), Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	}()
	curve := func(at time.Time) float64 { // 30:10 → 1.5 and 0.5 of the mean 4
		if at.UnixNano()%int64(2*time.Minute) < int64(time.Minute) {
			return 6
		}
		return 2
	}
	before := curve(time.Now())
	s := e.Status()[0]
	after := curve(time.Now())
	if s.RequestedRate != before && s.RequestedRate != after {
		t.Errorf("requested rate %v, want the curve's value now (%v)", s.RequestedRate, before)
	}
	if !strings.HasPrefix(s.Process, "trace_shape(rate=4/s") {
		t.Errorf("process %q", s.Process)
	}
}
