// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// mooncakeRecord is one line of a Mooncake trace.
type mooncakeRecord struct {
	Timestamp    int64    `json:"timestamp"` // ms
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// mooncakeTrace generates a Mooncake-format trace of n records with the
// reuse structure of chat traffic, deterministically from seed: Poisson
// arrivals at rate req/s; each request belongs to a conversation, which
// opens with one of 32 system prompts (1 to 3 blocks, picked by a Zipf
// law, so a few are shared by many conversations) and whose every turn
// resends the previous turn's full blocks and adds 200 to 1,700 new
// tokens in new blocks (the last one partial, so unique to the request);
// up to 32 conversations run at once, a quarter of the requests opening
// a new one, each lasting 1 to 8 turns or until the prompt would pass
// maxPrompt tokens. Outputs are 1 to 40 tokens. Hash ids are chain ids as
// in Mooncake: an equal id at block k means an equal prefix through k.
func mooncakeTrace(n int, seed uint64, rate float64, maxPrompt int) []mooncakeRecord {
	rng := rand.New(rand.NewPCG(seed, 7))
	var id uint64
	fresh := func() uint64 { id++; return id }
	systems := make([][]uint64, 32)
	zipf := make([]float64, len(systems))
	total := 0.0
	for i := range systems {
		for range 1 + rng.IntN(3) {
			systems[i] = append(systems[i], fresh())
		}
		total += 1 / math.Pow(float64(i+1), 1.1)
		zipf[i] = total
	}
	type conv struct {
		blocks []uint64
		left   int
	}
	var active []*conv
	open := func() *conv {
		u := rng.Float64() * total
		i, _ := slices.BinarySearch(zipf, u)
		c := &conv{blocks: slices.Clone(systems[min(i, len(systems)-1)]), left: 1 + rng.IntN(8)}
		active = append(active, c)
		return c
	}
	out := make([]mooncakeRecord, 0, n)
	at := 0.0
	for range n {
		at += rng.ExpFloat64() / rate * 1000
		var c *conv
		if len(active) == 0 || (len(active) < 32 && rng.Float64() < 0.25) {
			c = open()
		} else {
			c = active[rng.IntN(len(active))]
		}
		add := 200 + rng.IntN(1500)
		if 512*len(c.blocks)+add > maxPrompt {
			c.left = 0
			active = slices.DeleteFunc(active, func(x *conv) bool { return x == c })
			c = open()
		}
		input := 512*len(c.blocks) + add
		ids := slices.Clone(c.blocks)
		for len(ids) < (input+511)/512 {
			ids = append(ids, fresh())
		}
		out = append(out, mooncakeRecord{Timestamp: int64(at), InputLength: input, OutputLength: 1 + rng.IntN(40), HashIDs: ids})
		c.blocks = ids[:input/512]
		if c.left--; c.left <= 0 {
			active = slices.DeleteFunc(active, func(x *conv) bool { return x == c })
		}
	}
	return out
}

func writeMooncake(t testing.TB, recs []mooncakeRecord) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// refCache mirrors the simulator's prefix cache (sim/cache.go,
// sim/engine.go) on the trace's requests taken one after another: a
// fixed number of blocks of blockSize tokens; a request looks up the
// leading full blocks of its prompt by their content (here: the trace's
// hash ids, see simBlockKeys), takes the cached ones (at least one prompt
// token is always computed), allocates the rest from blank blocks or by
// evicting the least recently freed cached block, registers every full
// block of its prompt and its output (unless one with the same content is
// cached), and frees its blocks last first, so that a sequence's tail is
// evicted before its prefix.
type refCache struct {
	blockSize, blank int
	byKey            map[blockKey]*list.Element
	lru              *list.List // of blockKey; front: least recently freed
	cached, queried  int
}

// blockKey names a simulator block by the content of the tokens up to
// its end: the hash id of the trace block holding its last token and the
// block's index, with the request's content length when the block
// reaches the content's last token (a cut trace block's last word may
// differ) or past it (the template's closing tokens); out is set for
// output blocks, unique per request.
type blockKey struct {
	hash       uint64
	index, cut int
	out        int
}

func newRefCache(blocks, blockSize int) *refCache {
	return &refCache{blockSize: blockSize, blank: blocks, byKey: map[blockKey]*list.Element{}, lru: list.New()}
}

// The simulator's chat template (sim/tokenizer.go): 3 tokens before the
// message's content (start, role, separator), 4 after it (end, and the
// generation prompt's start, role, separator).
const (
	templateBefore = 3
	templateTokens = 7
)

// simBlockKeys are the keys of the full simulator blocks of a chat
// prompt of promptTokens tokens (its content built from the record's hash
// ids, traceBlock tokens each, the last cut to what remains).
func simBlockKeys(hashIDs []uint64, promptTokens, traceBlock, blockSize int) []blockKey {
	content := promptTokens - templateTokens
	keys := make([]blockKey, promptTokens/blockSize)
	for b := range keys {
		last := (b+1)*blockSize - 1 - templateBefore // content index of the block's last token
		switch {
		case last < content-1:
			keys[b] = blockKey{hash: hashIDs[last/traceBlock], index: b}
		default:
			keys[b] = blockKey{hash: hashIDs[(content-1)/traceBlock], index: b, cut: content}
		}
	}
	return keys
}

// request runs one request through the cache: seq numbers it (its output
// blocks are its own).
func (c *refCache) request(seq int, keys []blockKey, promptTokens, outputTokens int) {
	hit := 0
	for hit < len(keys) && c.byKey[keys[hit]] != nil {
		hit++
	}
	if hit*c.blockSize >= promptTokens {
		hit = (promptTokens - 1) / c.blockSize
	}
	c.cached += hit * c.blockSize
	c.queried += promptTokens
	type held struct {
		key        blockKey
		registered bool
	}
	var blocks []held
	for _, k := range keys[:hit] {
		c.lru.Remove(c.byKey[k])
		c.byKey[k] = &list.Element{} // in use: present, not in the LRU list
		blocks = append(blocks, held{k, true})
	}
	allocate := func(k blockKey, full bool) {
		if c.blank > 0 {
			c.blank--
		} else if e := c.lru.Front(); e != nil {
			delete(c.byKey, c.lru.Remove(e).(blockKey))
		}
		reg := full && c.byKey[k] == nil
		if reg {
			c.byKey[k] = &list.Element{}
		}
		blocks = append(blocks, held{k, reg})
	}
	total := promptTokens + outputTokens
	for b := hit; b*c.blockSize < total; b++ {
		full := (b+1)*c.blockSize <= total
		k := blockKey{index: b, out: seq + 1}
		if b < len(keys) {
			k = keys[b]
		}
		allocate(k, full)
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].registered {
			c.byKey[blocks[i].key] = c.lru.PushBack(blocks[i].key)
		} else {
			c.blank++
		}
	}
}

// traceBlockLRU is the textbook reading of a trace's reuse: an LRU cache
// of capacity trace blocks, each request hitting its leading cached hash
// ids (at most its prompt) and touching all of its own.
func traceBlockLRU(recs []mooncakeRecord, capacity, traceBlock int) float64 {
	lru := list.New()
	at := map[uint64]*list.Element{}
	cached, queried := 0, 0
	for _, r := range recs {
		hit := 0
		for hit < len(r.HashIDs) && at[r.HashIDs[hit]] != nil {
			hit++
		}
		cached += min(hit*traceBlock, r.InputLength)
		queried += r.InputLength
		for _, h := range r.HashIDs {
			if e := at[h]; e != nil {
				lru.MoveToBack(e)
				continue
			}
			if capacity > 0 && lru.Len() >= capacity {
				delete(at, lru.Remove(lru.Front()).(uint64))
			}
			at[h] = lru.PushBack(h)
		}
	}
	return float64(cached) / float64(queried)
}

// replayConfig is a chat target on the simulator at base, told to ignore
// its end of sequence so that answers have the trace's lengths.
func replayConfig(t testing.TB, base string, targets ...string) *config.Config {
	t.Helper()
	if len(targets) == 0 {
		targets = []string{"sim"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `
global: {warmup: 0s, request_timeout: 30s, seed: 1}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 16, output_tokens: 4}
targets:
`)
	for _, name := range targets {
		fmt.Fprintf(&b, "  - {name: %s, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, max_inflight: 1024, extra_body: {ignore_eos: true}}\n", name, base)
	}
	cfg, err := config.Load([]byte(b.String()), "replay.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// readRequests parses a request log.
func readRequests(t testing.TB, data []byte) []report.RequestRecord {
	t.Helper()
	var out []report.RequestRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r report.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestReplayMooncakePrefixCache replays a generated 10,000-request
// Mooncake trace against the in-process simulator with its prefix cache
// on (zero latency, 8,192 blocks of 16 tokens: 256 of the trace's
// 512-token blocks, less than the trace's working set, so eviction
// matters), 100 times as fast as recorded (~500 req/s). The simulator's
// hit ratio (vllm:prefix_cache_hits_total / queries_total) is within 5
// points of the ratio the trace's hash ids imply for that cache: its LRU
// policy mirrored on the trace's blocks (refCache), request after request
// in the trace's order over the records that were sent. Every request's
// prompt and output tokens, as the simulator reported them, equal the
// trace's: the chat template's 7 tokens are inside the trace's input
// length (llmprobe plans the content 7 tokens shorter, as /tokenize told
// it), so the allowance of ±1 is not used with the simulator.
func TestReplayMooncakePrefixCache(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 10,000 requests")
	}
	if raceEnabled {
		// 250 req/s of ~2,700-token prompts through the client and an
		// in-process simulator is more than the race detector's pace;
		// TestReplaySchedule runs the same code under it.
		t.Skip("a 40 s load replay: not under the race detector")
	}
	const n, rate, scale, traceBlock = 10000, 5.0, 50.0, 512
	recs := mooncakeTrace(n, 1, rate, 4096)
	path := writeMooncake(t, recs)

	cfg := sim.DefaultConfig()
	cfg.Seed = 1
	cfg.ZeroLatency = true
	cfg.MaxNumSeqs = 1 // one sequence at a time: the cache sees the requests in order, as the reference does
	cfg.MaxNumBatchedTokens = 1 << 20
	srv, base := simtest.Listen(t, cfg)
	if !cfg.EnablePrefixCaching || cfg.BlockSize != 16 {
		t.Fatalf("the reference assumes the default prefix cache of 16-token blocks, got %v, %d", cfg.EnablePrefixCaching, cfg.BlockSize)
	}

	rp, err := bench.OpenReplay(context.Background(), bench.ReplayOptions{Path: path, TimeScale: scale})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	reqs := report.NewRequestLog(&log)
	start := time.Now()
	// A busy machine sends late rather than drops (late_after 30s): the
	// reference follows the requests that were sent anyway.
	bcfg := replayConfig(t, base+"/v1")
	bcfg.Global.LateAfter = model.Duration(30 * time.Second)
	bcfg.Targets[0].MaxInflight = 10000
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: bcfg, Replay: rp, Warmup: 0, Requests: reqs,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	if err := reqs.Flush(); err != nil {
		t.Fatal(err)
	}
	s := rep.Stages[0]
	if s.Replay == nil || s.Replay.Records != n || s.Replay.Format != "mooncake" || s.Replay.BlockSize != traceBlock {
		t.Fatalf("replay info %+v", s.Replay)
	}

	// Per request: the simulator's counts are the trace's.
	results := readRequests(t, log.Bytes())
	var sent []int // record indices, in planned order
	exact, off, failed := 0, 0, 0
	for _, r := range results {
		i := r.TraceLine - 1
		if i < 0 || i >= n {
			t.Fatalf("request of trace line %d", r.TraceLine)
		}
		if r.Outcome != "success" {
			if failed++; failed <= 10 {
				t.Errorf("line %d: %s %s", r.TraceLine, r.Outcome, r.ErrorType)
			}
			continue
		}
		sent = append(sent, i)
		dp, do := r.PromptTokens-recs[i].InputLength, r.OutputTokens-recs[i].OutputLength
		if dp == 0 && do == 0 {
			exact++
			continue
		}
		if off++; off <= 10 {
			t.Errorf("line %d: prompt %d tokens (trace %d), output %d (trace %d)", r.TraceLine, r.PromptTokens, recs[i].InputLength, r.OutputTokens, recs[i].OutputLength)
		}
	}
	slices.SortFunc(sent, func(a, b int) int { return int(recs[a].Timestamp - recs[b].Timestamp) })

	ref := newRefCache(cfg.NumKVBlocks, cfg.BlockSize)
	var sentRecs []mooncakeRecord
	for _, i := range sent {
		r := recs[i]
		ref.request(i, simBlockKeys(r.HashIDs, r.InputLength, traceBlock, cfg.BlockSize), r.InputLength, r.OutputLength)
		sentRecs = append(sentRecs, r)
	}
	want := float64(ref.cached) / float64(ref.queried)
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counter := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			counter[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	hits, queries := counter["vllm:prefix_cache_hits_total"], counter["vllm:prefix_cache_queries_total"]
	if queries == 0 {
		t.Fatal("the simulator counted no prefix-cache query")
	}
	got := hits / queries
	unbounded := traceBlockLRU(sentRecs, 0, traceBlock)
	blocksLRU := traceBlockLRU(sentRecs, cfg.NumKVBlocks*cfg.BlockSize/traceBlock, traceBlock)
	t.Logf("replayed %d records (%d sent, %d exact token counts) in %v (planned %v, time scale %g, offered %.0f req/s, achieved %.0f): schedule lag p50 %.3f ms p99 %.3f ms, trusted %v %v",
		n, s.Sent, exact, wall.Round(time.Millisecond), s.Replay.PlannedWall.Round(time.Millisecond), scale, s.Replay.OfferedRate, s.AchievedRate, s.Lag.P50*1e3, s.Lag.P99*1e3, s.Trusted, s.Reasons)
	t.Logf("prefix-cache hit ratio: simulator %.2f%% (%.0f of %.0f prompt tokens); the trace implies %.2f%% with the simulator's cache (%d blocks of %d tokens, LRU mirrored); for reference %.2f%% by an LRU of %d trace blocks, %.2f%% with an unbounded cache; the client saw %.2f%% in cached_tokens",
		100*got, hits, queries, 100*want, cfg.NumKVBlocks, cfg.BlockSize, 100*blocksLRU, cfg.NumKVBlocks*cfg.BlockSize/traceBlock, 100*unbounded, 100*s.CacheHitRatio)
	if len(sent) < n/2 {
		t.Fatalf("only %d of %d records were sent and succeeded: too few to judge", len(sent), n)
	}
	if math.Abs(got-want) > 0.05 {
		t.Errorf("simulator hit ratio %.2f%%, the trace implies %.2f%%: more than 5 points apart", 100*got, 100*want)
	}
	if !(unbounded > want+0.02) {
		t.Errorf("the cache is not the bound it should be: %.2f%% unbounded, %.2f%% with it", 100*unbounded, 100*want)
	}
}

// TestReplaySchedule: every target walks the whole trace; each record is
// planned at the stage's start + (offset − --replay.start) / scale, the
// window cut by --replay.duration and --max-requests, and the report says
// so in every format.
func TestReplaySchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("replays against a simulator")
	}
	recs := make([]mooncakeRecord, 60)
	for i := range recs {
		recs[i] = mooncakeRecord{Timestamp: int64(1000 + 100*i), InputLength: 40 + i, OutputLength: 1 + i%5, HashIDs: []uint64{uint64(i + 1)}}
	}
	path := writeMooncake(t, recs)
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	_, base := simtest.Listen(t, cfg)

	cases := []struct {
		name            string
		opts            bench.ReplayOptions
		first, records  int // first record replayed, how many
		ended           string
		wantSpan, wantW time.Duration
	}{
		{name: "whole", opts: bench.ReplayOptions{TimeScale: 10}, first: 0, records: 60, ended: bench.ReplayEndTrace,
			wantSpan: 5900 * time.Millisecond, wantW: 590 * time.Millisecond},
		{name: "window", opts: bench.ReplayOptions{TimeScale: 4, Start: 2 * time.Second, Duration: 3 * time.Second}, first: 20, records: 30, ended: bench.ReplayEndDuration,
			wantSpan: 2900 * time.Millisecond, wantW: 725 * time.Millisecond},
		{name: "max-requests", opts: bench.ReplayOptions{TimeScale: 20, Start: 500 * time.Millisecond, MaxRequests: 25}, first: 5, records: 25, ended: bench.ReplayEndMaxRequests,
			wantSpan: 2400 * time.Millisecond, wantW: 120 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Path = path
			rp, err := bench.OpenReplay(context.Background(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			reqs := report.NewRequestLog(&log)
			rep, err := bench.Run(context.Background(), bench.Options{
				Config: replayConfig(t, base+"/v1", "a", "b"), Replay: rp, Warmup: 0, Requests: reqs,
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := reqs.Flush(); err != nil {
				t.Fatal(err)
			}
			if len(rep.Stages) != 2 {
				t.Fatalf("%d stage reports, want one per target", len(rep.Stages))
			}
			byTarget := map[string][]report.RequestRecord{}
			for _, r := range readRequests(t, log.Bytes()) {
				byTarget[r.Target] = append(byTarget[r.Target], r)
			}
			for _, s := range rep.Stages {
				ri := s.Replay
				if ri == nil {
					t.Fatalf("%s: no replay info", s.Target)
				}
				if ri.Records != tc.records || ri.Skipped != tc.first || ri.Ended != tc.ended || ri.TraceSpan != tc.wantSpan || ri.PlannedWall != tc.wantW {
					t.Errorf("%s: replay info %+v, want %d records after %d skipped, ended by %s, span %v, planned %v", s.Target, ri, tc.records, tc.first, tc.ended, tc.wantSpan, tc.wantW)
				}
				wantRate := float64(tc.records) / tc.wantSpan.Seconds() * tc.opts.TimeScale
				if math.Abs(ri.OfferedRate-wantRate) > 1e-9 || math.Abs(s.RequestedRate-wantRate) > 1e-9 {
					t.Errorf("%s: offered %v, requested %v, want %v", s.Target, ri.OfferedRate, s.RequestedRate, wantRate)
				}
				if s.Scheduled != tc.records || s.Sent+dropped(s) != tc.records {
					t.Errorf("%s: scheduled %d, sent %d, dropped %v; want %d planned", s.Target, s.Scheduled, s.Sent, s.Dropped, tc.records)
				}
				rs := byTarget[s.Target]
				slices.SortFunc(rs, func(a, b report.RequestRecord) int { return a.TraceLine - b.TraceLine })
				if len(rs) != s.Sent {
					t.Fatalf("%s: %d request lines, %d sent", s.Target, len(rs), s.Sent)
				}
				// The schedule: planned instants relative to the first
				// record's are the trace's offsets divided by the scale.
				var origin time.Time
				for _, r := range rs {
					i := r.TraceLine - 1
					if i < tc.first || i >= tc.first+tc.records {
						t.Fatalf("%s: line %d is outside the window", s.Target, r.TraceLine)
					}
					at := time.Duration(float64(time.Duration(recs[i].Timestamp-recs[0].Timestamp)*time.Millisecond-tc.opts.Start) / tc.opts.TimeScale)
					if origin.IsZero() {
						origin = r.Planned.Add(-at)
					}
					if d := r.Planned.Sub(origin.Add(at)); d < -time.Microsecond || d > time.Microsecond {
						t.Errorf("%s: line %d planned %v after the origin, want %v", s.Target, r.TraceLine, r.Planned.Sub(origin), at)
					}
					if r.Class != probe.TimelineClass || r.PromptTokens != recs[i].InputLength || r.OutputTokens != recs[i].OutputLength {
						t.Errorf("%s: line %d: class %q, %d/%d tokens, want %q, %d/%d", s.Target, r.TraceLine, r.Class, r.PromptTokens, r.OutputTokens, probe.TimelineClass, recs[i].InputLength, recs[i].OutputLength)
					}
				}
			}
			var text, md, js bytes.Buffer
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteMarkdown(&md, report.MarkdownOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
				for _, want := range []string{path, "mooncake", fmt.Sprintf("%d records", tc.records), "ended by " + tc.ended, "time scale"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s report lacks %q:\n%s", name, want, out)
					}
				}
			}
			jsPath := filepath.Join(t.TempDir(), "report.json")
			if err := os.WriteFile(jsPath, js.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			back, err := report.ReadReport(jsPath)
			if err != nil {
				t.Fatal(err)
			}
			if ri := back.Stages[0].Replay; ri == nil || ri.Records != tc.records || ri.File != path {
				t.Errorf("JSON replay info %+v", ri)
			}
		})
	}
}

func dropped(s *report.StageReport) int {
	n := 0
	for _, d := range s.Dropped {
		n += d
	}
	return n
}

// TestReplayNotTrusted: a replay the target cannot absorb (one request at
// a time, each taking 50 ms, offered 100 req/s) drops what finds
// max_inflight running, by the daemon's rule, and the report marks the
// stage NOT TRUSTED with the reason and says how many records were not
// sent.
func TestReplayNotTrusted(t *testing.T) {
	if testing.Short() {
		t.Skip("replays against a simulator")
	}
	// 5 s of records: the engine judges once a second, so that several
	// verdicts fall inside the replay even on a busy machine (the last
	// second of a stage is not judged).
	recs := make([]mooncakeRecord, 500)
	for i := range recs {
		recs[i] = mooncakeRecord{Timestamp: int64(10 * i), InputLength: 20, OutputLength: 4, HashIDs: []uint64{uint64(i + 1)}}
	}
	rp, err := bench.OpenReplay(context.Background(), bench.ReplayOptions{Path: writeMooncake(t, recs)})
	if err != nil {
		t.Fatal(err)
	}
	scfg := sim.DefaultConfig()
	scfg.PrefillBase = 50 * time.Millisecond
	_, base := simtest.Listen(t, scfg)
	cfg := replayConfig(t, base+"/v1")
	cfg.Targets[0].MaxInflight = 1
	rep, err := bench.Run(context.Background(), bench.Options{Config: cfg, Replay: rp, Warmup: 0, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Stages[0]
	if s.Trusted || s.Dropped[probe.DropInflightLimit] == 0 {
		t.Fatalf("trusted %v, dropped %v: the target absorbed 100 req/s one at a time?", s.Trusted, s.Dropped)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NOT TRUSTED: target overloaded", fmt.Sprintf("sent %d of 500", s.Sent)} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, text.String())
		}
	}
	if sh := s.Shortfall(); !strings.Contains(sh, "of the 500 records the replay planned") {
		t.Errorf("shortfall %q", sh)
	}
}

// TestOpenReplayErrors: what OpenReplay refuses, before anything is sent.
func TestOpenReplayErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unsorted := write("unsorted.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}
{"timestamp": 3000, "input_length": 10, "output_length": 2, "hash_ids": [2]}
{"timestamp": 400, "input_length": 10, "output_length": 2, "hash_ids": [3]}
`)
	// A little disorder (within the reader's tolerance of 1 s) is planned
	// at the instant of the record before.
	rp, err := bench.OpenReplay(context.Background(), bench.ReplayOptions{Path: write("jitter.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}
{"timestamp": 500, "input_length": 10, "output_length": 2, "hash_ids": [2]}
{"timestamp": 400, "input_length": 10, "output_length": 2, "hash_ids": [3]}
`)})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Records() != 3 || rp.PlannedWall() != 500*time.Millisecond {
		t.Errorf("%d records over %v, want 3 over 500ms", rp.Records(), rp.PlannedWall())
	}
	short := write("short.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}
`)
	for _, tc := range []struct {
		opts bench.ReplayOptions
		want string
	}{
		{bench.ReplayOptions{Path: filepath.Join(dir, "missing.jsonl")}, "missing.jsonl"},
		{bench.ReplayOptions{Path: unsorted}, "unsorted.jsonl:3: timestamp: time goes backwards"},
		{bench.ReplayOptions{Path: short, Start: time.Second}, "no record at or after --replay.start=1s"},
		{bench.ReplayOptions{Path: short, TimeScale: -1}, "time scale -1"},
	} {
		_, err := bench.OpenReplay(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// BenchmarkReplayFidelity replays a 30 s trace of 15,000 records (Poisson
// at 500 req/s, short prompts and answers) against a zero-latency
// simulator in a child process, in real time, and prints the schedule's
// fidelity as the report gives it: planned, sent, dropped by reason,
// schedule lag quantiles and the verdict; then, as the control taken on
// the same machine at the same time, a 30 s Poisson stage at 500 req/s of
// requests of the same shape, which walks the same arrival loop without
// the trace. Goal (issue 20): p99 send lag ≤ 1 ms at 500 req/s on this
// 2-core machine. Figures only.
func BenchmarkReplayFidelity(b *testing.B) {
	if testing.Short() {
		b.Skip("30 s replay")
	}
	const n, rate = 15000, 500.0
	rng := rand.New(rand.NewPCG(3, 3))
	recs := make([]mooncakeRecord, n)
	at := 0.0
	for i := range recs {
		at += rng.ExpFloat64() / rate * 1000
		recs[i] = mooncakeRecord{Timestamp: int64(math.Round(at)), InputLength: 32 + rng.IntN(64), OutputLength: 8 + rng.IntN(16), HashIDs: []uint64{uint64(1 + rng.IntN(4)), uint64(1000 + i)}}
	}
	path := writeMooncake(b, recs)
	p := startSimProcess(b)
	cfg := replayConfig(b, p.base+"/v1")
	for range b.N {
		rp, err := bench.OpenReplay(context.Background(), bench.ReplayOptions{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := bench.Run(context.Background(), bench.Options{Config: cfg, Replay: rp, Warmup: 0, Grace: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler), Percentiles: []float64{50, 90, 99, 99.9}})
		if err != nil {
			b.Fatal(err)
		}
		s := rep.Stages[0]
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		figures(b, "GOMAXPROCS=%d NumCPU=%d\n%s\nreplay at %.0f req/s: planned %d, scheduled %d, sent %d, dropped %v; schedule lag p50 %.3f ms p90 %.3f ms p99 %.3f ms p99.9 %.3f ms max %.3f ms (goal p99 ≤ 1 ms); planned %v, took %v; trusted %v %v",
			runtime.GOMAXPROCS(0), runtime.NumCPU(), sb.String(), s.Replay.OfferedRate, s.Replay.Records, s.Scheduled, s.Sent, s.Dropped,
			s.Lag.P50*1e3, s.Lag.Percentiles["p90"]*1e3, s.Lag.P99*1e3, s.Lag.Percentiles["p99.9"]*1e3, s.Lag.Max*1e3,
			s.Replay.PlannedWall.Round(time.Millisecond), s.Replay.Wall.Round(time.Millisecond), s.Trusted, s.Reasons)
		b.ReportMetric(s.Lag.P99*1e3, "lag_p99_ms")

		ctl, err := bench.Run(context.Background(), bench.Options{Config: benchConfig(b, p.base, 64, 16), Stages: []bench.Stage{{Rate: rate, Duration: 30 * time.Second}},
			Warmup: 0, Grace: 10 * time.Second, Logger: slog.New(slog.DiscardHandler), Percentiles: []float64{50, 90, 99, 99.9}})
		if err != nil {
			b.Fatal(err)
		}
		c := ctl.Stages[0]
		figures(b, "control, a Poisson stage at %.0f req/s: sent %d, dropped %v; schedule lag p50 %.3f ms p90 %.3f ms p99 %.3f ms p99.9 %.3f ms max %.3f ms; trusted %v %v",
			rate, c.Sent, c.Dropped, c.Lag.P50*1e3, c.Lag.Percentiles["p90"]*1e3, c.Lag.P99*1e3, c.Lag.Percentiles["p99.9"]*1e3, c.Lag.Max*1e3, c.Trusted, c.Reasons)
		b.ReportMetric(c.Lag.P99*1e3, "control_lag_p99_ms")
	}
}
