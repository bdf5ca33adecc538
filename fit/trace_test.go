// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/tracefile"
)

// traceRec is one record of the hand-computed fixture.
type traceRec struct {
	off            time.Duration
	prompt, output int
	ids            []uint64
	session        string
}

// handTrace: block size 4. Reuse (unbounded cache): record 2 hits blocks
// 1, 2 (8 tokens), record 3 block 1 (4), record 5 blocks 1, 2, 3 (4+4+4):
// 24 of 8+10+6+4+12 = 40 prompt tokens, 0.6. With an LRU of 2 blocks only
// record 2's 8 tokens hit: 0.2. Ranks of prompt [3 4 2 1 5], of output
// [2 1 3 5 4]: Σd² = 28, rho = 1 - 6·28/(5·24) = -0.4. Hourly counts
// [3 2]; span 1h59m, peak/mean = (3/3600)/(5/7140) = 1.19. Sessions s1
// (3 turns), s2, s3: multi-turn share 3/5.
var handTrace = []traceRec{
	{0, 8, 10, []uint64{1, 2}, "s1"},
	{time.Second, 10, 5, []uint64{1, 2, 3}, "s1"},
	{2 * time.Second, 6, 20, []uint64{1, 4}, "s1"},
	{90 * time.Minute, 4, 40, []uint64{5}, "s2"},
	{119 * time.Minute, 12, 30, []uint64{1, 2, 3}, "s3"},
}

func writeTrace(t *testing.T, format tracefile.Format) string {
	t.Helper()
	var b strings.Builder
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	switch format {
	case tracefile.Azure:
		b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	case tracefile.BurstGPT:
		b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	}
	for _, r := range handTrace {
		at := t0.Add(r.off)
		switch format {
		case tracefile.Mooncake:
			ids := strings.Trim(strings.ReplaceAll(fmt.Sprint(r.ids), " ", ", "), "[]")
			fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s], "session_id": %q}`+"\n",
				r.off.Milliseconds(), r.prompt, r.output, ids, r.session)
		case tracefile.Azure:
			fmt.Fprintf(&b, "%s,%d,%d\n", at.Format("2006-01-02 15:04:05.0000000"), r.prompt, r.output)
		case tracefile.BurstGPT:
			fmt.Fprintf(&b, "%d,ChatGPT,%d,%d,%d,Conversation log\n", int(r.off.Seconds()), r.prompt, r.output, r.prompt+r.output)
		case tracefile.LLMProbe:
			fmt.Fprintf(&b, `{"planned": %q, "prompt_tokens": %d, "output_tokens": %d, "conversation": %q}`+"\n",
				at.Format(time.RFC3339Nano), r.prompt, r.output, r.session)
		case tracefile.AccessLog:
			fmt.Fprintf(&b, `{"timestamp": %q, "model": "m", "usage": {"prompt_tokens": %d, "completion_tokens": %d}}`+"\n",
				at.Format(time.RFC3339Nano), r.prompt, r.output)
		}
	}
	path := filepath.Join(t.TempDir(), "trace-"+string(format))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestTraceJointEveryFormat(t *testing.T) {
	for _, format := range []tracefile.Format{tracefile.Mooncake, tracefile.Azure, tracefile.BurstGPT, tracefile.LLMProbe, tracefile.AccessLog} {
		t.Run(string(format), func(t *testing.T) {
			res, err := FromTrace(context.Background(), writeTrace(t, format), TraceOptions{BlockSize: 4, CacheBlocks: 2})
			if err != nil {
				t.Fatal(err)
			}
			j := res.Trace
			if j.Format != format {
				t.Errorf("format %s, detected %s", format, j.Format)
			}
			if j.Records != 5 || res.Prompt.Count != 5 || res.Prompt.Mean != 8 || res.Output.Max != 40 {
				t.Errorf("records %d, prompt count %v mean %v, output max %v; want 5, 5, 8, 40", j.Records, res.Prompt.Count, res.Prompt.Mean, res.Output.Max)
			}
			if !near(j.Spearman, -0.4) {
				t.Errorf("spearman %v, want -0.4", j.Spearman)
			}
			if fmt.Sprint(j.Rate) != "[3 2]" || j.Bin != time.Hour {
				t.Errorf("hourly counts %v (bin %v), want [3 2]", j.Rate, j.Bin)
			}
			if !near(j.PeakToMean, 1.19) {
				t.Errorf("peak/mean %v, want 1.19", j.PeakToMean)
			}
			if n := j.Grid[gridBin(8)][gridBin(10)]; n != 1 || GridEdge(gridBin(8)) != 8 || GridEdge(gridBin(10)) != 10 {
				t.Errorf("grid cell (8, 10) holds %d (edges %v, %v)", n, GridEdge(gridBin(8)), GridEdge(gridBin(10)))
			}
			wantHash := format == tracefile.Mooncake
			if j.HashIDs != wantHash {
				t.Fatalf("hash ids %v, want %v", j.HashIDs, wantHash)
			}
			if wantHash {
				if !near(j.Reuse, 0.6) || !near(j.CacheReuse, 0.2) || j.ReuseApprox || j.DistinctBlocks != 5 {
					t.Errorf("reuse %v, LRU(2) %v, approx %v, distinct %d; want 0.6, 0.2, false, 5", j.Reuse, j.CacheReuse, j.ReuseApprox, j.DistinctBlocks)
				}
				if p := j.Prefix; p == nil || p.Tokens != 8 || p.Probability != 0.6 || p.Groups != 1 {
					t.Errorf("prefix %+v, want 1 group of 8 tokens at 0.6", p)
				}
			} else if j.Prefix != nil || res.Classes[0].Prefix != nil {
				t.Errorf("a prefix %+v without hash ids", j.Prefix)
			}
			wantSessions := format == tracefile.Mooncake || format == tracefile.LLMProbe
			if (j.Sessions != nil) != wantSessions {
				t.Fatalf("sessions %+v, want some: %v", j.Sessions, wantSessions)
			}
			if s := j.Sessions; s != nil {
				if s.Count != 3 || s.Requests != 5 || s.Turns.Max != 3 || !near(s.Turns.Mean, 5.0/3) || !near(s.MultiTurn, 0.6) {
					t.Errorf("sessions %d of %d requests, turns max %v mean %v, multi-turn %v", s.Count, s.Requests, s.Turns.Max, s.Turns.Mean, s.MultiTurn)
				}
			}
		})
	}
}

// The reservoir keeps at most Sample pairs, and its extremes, counts and
// means stay exact.
func TestTraceReservoirBounded(t *testing.T) {
	var b strings.Builder
	const n = 5000
	for i := range n {
		// output = 2·prompt: rank correlation 1 in any sample.
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%d]}`+"\n", i, i+1, 2*(i+1), i)
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := FromTrace(context.Background(), path, TraceOptions{Sample: 100})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Trace
	if j.SampleSize != 100 || len(res.Prompt.samples) != 100 {
		t.Errorf("sample of %d (%d kept), want 100", j.SampleSize, len(res.Prompt.samples))
	}
	if res.Prompt.Count != n || res.Prompt.Min != 1 || res.Prompt.Max != n || res.Prompt.Mean != (n+1)/2.0 {
		t.Errorf("prompt count %v min %v max %v mean %v", res.Prompt.Count, res.Prompt.Min, res.Prompt.Max, res.Prompt.Mean)
	}
	if !near(j.Spearman, 1) || j.Reuse != 0 || j.Prefix != nil {
		t.Errorf("spearman %v reuse %v prefix %+v; want 1, 0, none", j.Spearman, j.Reuse, j.Prefix)
	}
}

// Past maxExactBlocks distinct ids the set turns into a Bloom filter:
// what it held stays seen, new ids are not (bar false positives).
func TestBlockSetBloom(t *testing.T) {
	s := newBlockSet()
	for i := range uint64(maxExactBlocks + 10) {
		s.add(i)
	}
	if s.bloom == nil || s.exact != nil {
		t.Fatal("still exact")
	}
	for _, h := range []uint64{0, 12345, maxExactBlocks + 9} {
		if !s.has(h) {
			t.Errorf("%d lost", h)
		}
	}
	fp := 0
	for i := range uint64(10000) {
		if s.has(1<<40 + i) {
			fp++
		}
	}
	if fp > 100 { // expected about 0.01%
		t.Errorf("%d false positives in 10000", fp)
	}
}

func TestSpearmanTies(t *testing.T) {
	// Average ranks: x [1 2 2 3] → [1 2.5 2.5 4], y = x: rho 1.
	if r := Spearman([]float64{1, 2, 2, 3}, []float64{5, 6, 6, 7}); !near(r, 1) {
		t.Errorf("rho %v, want 1", r)
	}
	if r := Spearman([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(r) {
		t.Errorf("constant x: rho %v, want NaN", r)
	}
}

func TestTraceLineError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	data := `{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": [1]}` + "\n" +
		`{"timestamp": 1, "input_length": -5, "output_length": 3, "hash_ids": [1]}` + "\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromTrace(context.Background(), path, TraceOptions{})
	if err == nil || !strings.Contains(err.Error(), path+":2") {
		t.Errorf("error %v, want one naming %s:2", err, path)
	}
}

// The testdata of every format tracefile ships reads, detected.
func TestTraceTestdata(t *testing.T) {
	for file, format := range map[string]tracefile.Format{
		"mooncake.jsonl": tracefile.Mooncake, "mooncake.jsonl.zst": tracefile.Mooncake, "azure_2023.csv": tracefile.Azure,
		"azure_2024.csv": tracefile.Azure, "burstgpt.csv": tracefile.BurstGPT, "llmprobe_requests.jsonl": tracefile.LLMProbe,
		"accesslog.jsonl": tracefile.AccessLog,
	} {
		res, err := FromTrace(context.Background(), filepath.Join("..", "tracefile", "testdata", file), TraceOptions{})
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		j := res.Trace
		sum := int64(0)
		for _, c := range j.Rate {
			sum += c
		}
		if j.Format != format || sum != int64(j.Records) || j.Records < 100 {
			t.Errorf("%s: format %s, %d records, %d in the rate curve", file, j.Format, j.Records, sum)
		}
	}
}

// svgClass returns the rects of one class: their data- attributes.
func svgClass(t *testing.T, svg []byte, class string) []map[string]string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []map[string]string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "rect" {
			continue
		}
		attrs := map[string]string{}
		for _, a := range se.Attr {
			attrs[a.Name.Local] = a.Value
		}
		if attrs["class"] == class {
			out = append(out, attrs)
		}
	}
}

func TestTracePlot(t *testing.T) {
	res, err := FromTrace(context.Background(), writeTrace(t, tracefile.Mooncake), TraceOptions{BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WritePlot(&b, res, FormatSVG); err != nil {
		t.Fatal(err)
	}
	// One cell per distinct (prompt bin, output bin): all 5 records apart.
	cells := map[string]string{}
	for _, c := range svgClass(t, b.Bytes(), "cell") {
		cells[c["data-prompt-lo"]+"x"+c["data-output-lo"]] = c["data-count"]
	}
	want := map[string]string{"8x10": "1", "10x5": "1", "5x20": "1", "4x40": "1", "10x25": "1"}
	if fmt.Sprint(cells) != fmt.Sprint(want) {
		t.Errorf("cells %v, want %v", cells, want)
	}
	var rate []string
	for _, c := range svgClass(t, b.Bytes(), "rate") {
		rate = append(rate, c["data-start"]+"="+c["data-count"])
	}
	if fmt.Sprint(rate) != "[0s=3 1h=2]" {
		t.Errorf("rate bars %v, want [0s=3 1h=2]", rate)
	}
	b.Reset()
	if err := WritePlot(&b, res, FormatPNG); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if r := img.Bounds(); r.Dx() != plotW || r.Dy() != 2*plotH {
		t.Errorf("PNG is %v, want the joint panels below the lengths", r)
	}
}

func TestTraceSummaryText(t *testing.T) {
	res, err := FromTrace(context.Background(), writeTrace(t, tracefile.Mooncake), TraceOptions{BlockSize: 4, CacheBlocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSummary(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"5 records over 1h59m (mooncake format, hash_ids blocks of 4 tokens)",
		"Spearman: -0.400 (over all 5 records)",
		"prefix reuse implied by hash_ids: 60.0% of prompt tokens (unbounded cache, 5 distinct blocks of 4 tokens); 20.0% with an LRU cache of 2 blocks",
		"60.0% of requests start with one of 1 prefix(es) of 8 tokens",
		"sessions: 3 (5 requests)",
		"peak 3 (bin 0), peak/mean rate 1.19",
		"+0s  3  ########################################\n",
		"+1h  2  ###########################\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// The text histogram: prompt 12 and output 30 fall in row 10-20,
	// column 20-50, one request of five.
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "10-20 ") {
			row = strings.Fields(l)[3]
		}
	}
	if row != "20.0" {
		t.Errorf("row 10-20, column 20-50: %q, want 20.0\n%s", row, out)
	}
}

// TestTraceModelCleaned: a trace's model name carrying a terminal escape
// or a bidirectional override reaches neither the fitted file's comments
// nor the summary (the target's model, quoted in YAML, is refused by the
// configuration's check when the file is loaded).
func TestTraceModelCleaned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "burstgpt.csv")
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for i, r := range handTrace {
		fmt.Fprintf(&b, "%d,gpt\u202egnp.exe\x1b[31m,%d,%d,%d,Conversation log\n", i, r.prompt, r.output, r.prompt+r.output)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := FromTrace(context.Background(), path, TraceOptions{BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	var workload, summary strings.Builder
	if err := WriteWorkload(&workload, res, WorkloadOptions{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(&summary, res); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"workload": workload.String(), "summary": summary.String()} {
		if !strings.Contains(text, "gptgnp.exe [31m") || strings.ContainsAny(text, "\u202e\x1b") {
			t.Errorf("the %s does not show the model cleaned:\n%q", name, text)
		}
	}
}
