// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

// svgElement is what the tests read of an SVG element.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
}

// parseSVG parses doc as XML and returns its elements in order.
func parseSVG(t *testing.T, doc []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var out []svgElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
		case xml.CharData:
			if len(out) > 0 {
				out[len(out)-1].text += string(tok)
			}
		}
	}
	if len(out) == 0 || out[0].name != "svg" {
		t.Fatal("no <svg> root")
	}
	return out
}

// The renderers' tests draw a real run's figures with verdicts of their
// own: how a trusted and an untrusted stage look is under test there, not
// whether this machine let the run be trusted (on a busy one the
// harness rightly said it did not, and the tests failed on that).

// untrustedCopy is rep with its last stage marked not trusted and the
// others trusted.
func untrustedCopy(t *testing.T, rep *report.Report) *report.Report {
	t.Helper()
	cp := trustedCopy(t, rep)
	last := cp.Stages[len(cp.Stages)-1]
	last.Trusted, last.Reasons = false, []string{"target overloaded: for the test"}
	return cp
}

// trustedCopy is rep with every stage marked trusted.
func trustedCopy(t *testing.T, rep *report.Report) *report.Report {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var cp report.Report
	if err := json.Unmarshal(buf.Bytes(), &cp); err != nil {
		t.Fatal(err)
	}
	for _, s := range cp.Stages {
		s.Trusted, s.Reasons = true, nil
	}
	return &cp
}

// TestPlotSVG: the picture of a real run is XML with, for each of TTFT,
// TPOT and E2E p50 and p99, the achieved rate and the output throughput, one point per stage and
// a line through them; markers of trusted stages are filled, of an
// untrusted one hollow and named in a note; the SLO's bounds are lines
// with labels; axes have units; and the same report draws the same bytes.
func TestPlotSVG(t *testing.T) {
	sw := runSweep(t)
	rep := untrustedCopy(t, sw.rep)
	var a, b bytes.Buffer
	if err := rep.WriteSVG(&a); err != nil {
		t.Fatal(err)
	}
	if err := rep.WritePlot(&b, "svg"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two drawings of the same report differ")
	}
	els := parseSVG(t, a.Bytes())
	points := map[string][]svgElement{}
	lines := map[string]int{}
	var texts []string
	for _, e := range els {
		switch {
		case e.name == "circle" && e.attrs["class"] == "point":
			points[e.attrs["data-series"]] = append(points[e.attrs["data-series"]], e)
		case e.name == "polyline" && e.attrs["class"] == "series":
			lines[e.attrs["data-series"]]++
		case e.name == "text":
			texts = append(texts, e.text)
		}
	}
	stages := len(rep.Stages)
	var want []string
	for _, m := range []string{"TTFT", "TPOT", "E2E"} {
		want = append(want, "sim "+m+" p50", "sim "+m+" p99")
	}
	want = append(want, "sim served", "sim served output tokens/s")
	if len(points) != len(want) {
		t.Errorf("series %v, want %v", keys(points), want)
	}
	for _, s := range want {
		if len(points[s]) != stages {
			t.Errorf("series %q has %d points, want one per stage (%d)", s, len(points[s]), stages)
		}
		if lines[s] != 1 {
			t.Errorf("series %q has %d lines", s, lines[s])
		}
		for _, p := range points[s] {
			stage, _ := strconv.Atoi(p.attrs["data-stage"])
			trusted := stage != rep.Stages[len(rep.Stages)-1].Stage
			if p.attrs["data-trusted"] != strconv.FormatBool(trusted) {
				t.Errorf("%s stage %d: data-trusted=%s", s, stage, p.attrs["data-trusted"])
			}
			if hollow := p.attrs["fill"] == "none"; hollow == trusted {
				t.Errorf("%s stage %d (trusted %v): fill %q stroke %q", s, stage, trusted, p.attrs["fill"], p.attrs["stroke"])
			}
		}
	}
	all := strings.Join(texts, "\n")
	for _, w := range []string{"achieved rate (req/s sent)", "ms", "req/s", "SLO TTFT ≤ 500.0ms per request", "SLO TPOT p99 ≤ 100.0ms",
		"Not trusted", "stage 2 sim", "p50", "p99", "not trusted", "Time to first token", "Served throughput"} {
		if !strings.Contains(all, w) {
			t.Errorf("no text %q in the SVG:\n%s", w, all)
		}
	}
	// Ticks: each panel labels its axes with numbers.
	numeric := 0
	for _, s := range texts {
		if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			numeric++
		}
	}
	if numeric < 4*2*3 {
		t.Errorf("%d numeric tick labels", numeric)
	}
	// A report with both stages trusted: every marker is filled.
	var c bytes.Buffer
	if err := trustedCopy(t, sw.rep).WriteSVG(&c); err != nil {
		t.Fatal(err)
	}
	for _, e := range parseSVG(t, c.Bytes()) {
		if e.attrs["class"] == "point" && (e.attrs["fill"] == "none" || e.attrs["data-trusted"] != "true") {
			t.Errorf("a trusted stage's marker: %v", e.attrs)
		}
	}
	if strings.Contains(c.String(), "Not trusted") {
		t.Error("a note on untrusted stages where there are none")
	}
	if err := rep.WritePlot(io.Discard, "gif"); err == nil {
		t.Error("WritePlot accepted gif")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// axisReport is a sweep of two targets at 20, 24 and 28 req/s with
// millisecond latencies under an SLO of seconds, its last stage not
// trusted for the harness' reason and one target's middle stage for the
// target's.
func axisReport() *report.Report {
	r := &report.Report{SLOBounds: []report.SLOBound{{Metric: "ttft", Seconds: 5}, {Metric: "e2e", Quantile: 0.99, Seconds: 20}}}
	for i, rate := range []float64{20, 24, 28} {
		for j, target := range []string{"alpha", "beta"} {
			f := 1 + 0.3*float64(i) + 0.1*float64(j)
			s := &report.StageReport{Stage: i + 1, Target: target, RequestedRate: rate, AchievedRate: rate * (1 - 0.05*float64(i)), Trusted: true,
				TTFT:                     report.Quantiles{Count: 100, P50: 0.040 * f, P99: 0.120 * f},
				TPOT:                     report.Quantiles{Count: 100, P50: 0.012 * f, P99: 0.020 * f},
				E2E:                      report.Quantiles{Count: 100, P50: 0.9 * f, P99: 1.6 * f},
				Serving:                  &report.Serving{OutputThroughput: 1000 * rate * (1 + 0.2*float64(j))},
				ServedOutputTokensPerSec: 1000 * rate * (1 + 0.2*float64(j)),
				ServedRate:               rate * (1 - 0.05*float64(i)),
			}
			r.Stages = append(r.Stages, s)
		}
	}
	for _, s := range r.Stages[4:] {
		s.Trusted, s.Reasons = false, []string{"harness saturated: the process woke up more than max_inflation 10ms late in 8 of 256 heartbeats (p99 75.231638ms) over 3s"}
	}
	r.Stages[3].Trusted, r.Stages[3].Reasons = false, []string{"target overloaded: 12 of 480 requests dropped over max_inflight 8"}
	return r
}

// TestPlotAxesAndNotes: the latency axes are logarithmic (tick positions
// are affine in the logarithm of their values, round values) and span the
// data and the SLO bounds, so that an SLO of seconds does not press
// millisecond medians onto the floor; the achieved-rate axis spans the
// achieved rates (20 to 25.2 req/s), not 0 to them; the note on untrusted stages
// gives each stage's own reasons in full, in lines inside the picture;
// and a panel shows output tokens/s, a point per stage and target, higher
// for more.
func TestPlotAxesAndNotes(t *testing.T) {
	rep := axisReport()
	var buf bytes.Buffer
	if err := rep.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	els := parseSVG(t, buf.Bytes())
	width, _ := strconv.ParseFloat(els[0].attrs["width"], 64)
	height, _ := strconv.ParseFloat(els[0].attrs["height"], 64)
	if vb := els[0].attrs["viewBox"]; vb != fmt.Sprintf("0 0 %g %g", width, height) {
		t.Errorf("viewBox %q for %gx%g", vb, width, height)
	}
	type tick struct{ v, pos float64 }
	ticks := map[string][]tick{} // panel/axis → ticks
	points := map[string][]svgElement{}
	var note []string
	for _, e := range els {
		switch {
		case e.name == "text" && e.attrs["class"] == "tick":
			v, err := strconv.ParseFloat(e.attrs["data-value"], 64)
			if err != nil {
				t.Fatalf("tick %v: %v", e.attrs, err)
			}
			coord := "y"
			if e.attrs["data-axis"] == "x" {
				coord = "x"
			}
			pos, _ := strconv.ParseFloat(e.attrs[coord], 64)
			key := e.attrs["data-panel"] + "/" + e.attrs["data-axis"]
			ticks[key] = append(ticks[key], tick{v, pos})
		case e.name == "circle" && e.attrs["class"] == "point":
			points[e.attrs["data-series"]] = append(points[e.attrs["data-series"]], e)
		case e.name == "text" && e.attrs["class"] == "note":
			note = append(note, strings.TrimSpace(e.text))
			x, _ := strconv.ParseFloat(e.attrs["x"], 64)
			y, _ := strconv.ParseFloat(e.attrs["y"], 64)
			// 12 px monospace: 0.6 em a character.
			if right := x + 7.2*float64(len([]rune(e.text))); x < 0 || right > width || y > height-2 || y < 0 {
				t.Errorf("note line %q spans x %.0f to %.0f at y %.0f, outside %gx%g", e.text, x, right, y, width, height)
			}
		}
	}
	for _, panel := range []string{"ttft", "tpot", "e2e"} {
		ts := ticks[panel+"/y"]
		if len(ts) < 3 {
			t.Fatalf("%s: %d y ticks", panel, len(ts))
		}
		slices.SortFunc(ts, func(a, b tick) int { return cmp.Compare(a.v, b.v) })
		k := (ts[len(ts)-1].pos - ts[0].pos) / math.Log(ts[len(ts)-1].v/ts[0].v)
		for _, tk := range ts {
			if want := ts[0].pos + k*math.Log(tk.v/ts[0].v); math.Abs(tk.pos-want) > 0.6 {
				t.Errorf("%s: tick %g at y %.1f, a log axis puts it at %.1f", panel, tk.v, tk.pos, want)
			}
			// 1, 2 or 5 times a power of ten (1 to 9 under a decade).
			m := tk.v / math.Pow(10, math.Floor(math.Log10(tk.v)+1e-9))
			if math.Abs(m-math.Round(m)) > 1e-6 || math.Log10(ts[len(ts)-1].v/ts[0].v) >= 1 && !slices.Contains([]float64{1, 2, 5}, math.Round(m)) {
				t.Errorf("%s: tick %g is not a round value of a log axis", panel, tk.v)
			}
		}
		lo, hi := ts[0], ts[len(ts)-1]
		var min, max float64 = math.Inf(1), 0
		for _, s := range rep.Stages {
			q := map[string]report.Quantiles{"ttft": s.TTFT, "tpot": s.TPOT, "e2e": s.E2E}[panel]
			min, max = math.Min(min, q.P50), math.Max(max, q.P99)
		}
		for _, b := range rep.SLOBounds {
			if b.Metric == panel {
				max = math.Max(max, b.Seconds)
			}
		}
		if lo.v > min || hi.v < max || hi.v > 10*max || lo.v < min/10 {
			t.Errorf("%s: y ticks %g to %g for data and bounds %g to %g", panel, lo.v, hi.v, min, max)
		}
		// The medians stand clear of the floor (the lowest tick).
		for _, p := range points["alpha "+strings.ToUpper(panel)+" p50"] {
			cy, _ := strconv.ParseFloat(p.attrs["cy"], 64)
			if lo.pos-cy < 0.05*(lo.pos-hi.pos) {
				t.Errorf("%s p50 at y %.0f, the floor at %.0f", panel, cy, lo.pos)
			}
		}
	}
	xs := ticks["ttft/x"]
	if len(xs) < 3 {
		t.Fatalf("%d x ticks", len(xs))
	}
	slices.SortFunc(xs, func(a, b tick) int { return cmp.Compare(a.v, b.v) })
	if xs[0].v > 20 || xs[0].v < 10 || xs[len(xs)-1].v < 25.2 || xs[len(xs)-1].v > 40 {
		t.Errorf("achieved-rate ticks %g to %g for rates 20 to 25.2", xs[0].v, xs[len(xs)-1].v)
	}
	joined := strings.Join(note, " ")
	for _, s := range rep.Stages {
		for _, why := range s.Reasons {
			if !strings.Contains(joined, why) {
				t.Errorf("the note does not give stage %d %s's reason %q:\n%s", s.Stage, s.Target, why, strings.Join(note, "\n"))
			}
		}
	}
	for _, want := range []string{"stage 2 beta", "stage 3 alpha, beta"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q in the note:\n%s", want, strings.Join(note, "\n"))
		}
	}
	if strings.Contains(joined, "the load was not delivered") {
		t.Errorf("the note names a reason of its own:\n%s", strings.Join(note, "\n"))
	}
	for _, target := range []string{"alpha", "beta"} {
		ps := points[target+" served output tokens/s"]
		if len(ps) != 3 {
			t.Fatalf("%s: %d tokens/s points, want 3", target, len(ps))
		}
		prev := math.Inf(1)
		for _, p := range ps { // in stage order, 20k to 28k tokens/s: rising
			cy, _ := strconv.ParseFloat(p.attrs["cy"], 64)
			if cy >= prev {
				t.Errorf("%s: tokens/s points at y %v", target, ps)
			}
			prev = cy
		}
	}
	if !bytes.Contains(buf.Bytes(), []byte("Served output tokens/s")) {
		t.Error("no tokens/s panel title")
	}
}

// TestPlotOddReports: a report of one stage, of a stage without a single
// answer, or with figures that are NaN or infinite (a server's metrics
// can be) still draws, every coordinate a number inside the picture.
func TestPlotOddReports(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for name, stages := range map[string][]*report.StageReport{
		"one stage": {{Stage: 1, Target: "t", RequestedRate: 5, AchievedRate: 5, Trusted: true,
			TTFT: report.Quantiles{Count: 3, P50: 0.1, P99: 0.1}, Serving: &report.Serving{OutputThroughput: 300}}},
		"no answers": {{Stage: 1, Target: "t", RequestedRate: 5, Reasons: []string{"no request was sent"}}},
		"odd figures": {
			{Stage: 1, Target: "t", RequestedRate: 0, AchievedRate: nan, Trusted: true, TTFT: report.Quantiles{Count: 3, P50: 0, P99: inf}, Serving: &report.Serving{OutputThroughput: nan}},
			{Stage: 2, Target: "t", RequestedRate: 10, AchievedRate: inf, Trusted: true, E2E: report.Quantiles{Count: 3, P50: nan, P99: 2}},
		},
	} {
		var buf bytes.Buffer
		if err := (&report.Report{Stages: stages}).WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(buf.Bytes(), []byte("NaN")) || bytes.Contains(buf.Bytes(), []byte("Inf")) {
			t.Errorf("%s: a coordinate that is not a number:\n%s", name, buf.String())
		}
		els := parseSVG(t, buf.Bytes())
		w, _ := strconv.ParseFloat(els[0].attrs["width"], 64)
		h, _ := strconv.ParseFloat(els[0].attrs["height"], 64)
		for _, e := range els {
			for _, a := range []string{"x", "cx"} {
				if v, err := strconv.ParseFloat(e.attrs[a], 64); err == nil && (v < 0 || v > w) {
					t.Errorf("%s: %s %s=%v outside 0..%v", name, e.name, a, v, w)
				}
			}
			for _, a := range []string{"y", "cy"} {
				if v, err := strconv.ParseFloat(e.attrs[a], 64); err == nil && (v < 0 || v > h) {
					t.Errorf("%s: %s %s=%v outside 0..%v", name, e.name, a, v, h)
				}
			}
		}
		if err := (&report.Report{Stages: stages}).WritePNG(io.Discard); err != nil {
			t.Fatal(err)
		}
	}
}
