// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench"
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
func untrustedCopy(t *testing.T, rep *bench.Report) *bench.Report {
	t.Helper()
	cp := trustedCopy(t, rep)
	last := cp.Stages[len(cp.Stages)-1]
	last.Trusted, last.Reasons = false, []string{"target overloaded: for the test"}
	return cp
}

// trustedCopy is rep with every stage marked trusted.
func trustedCopy(t *testing.T, rep *bench.Report) *bench.Report {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var cp bench.Report
	if err := json.Unmarshal(buf.Bytes(), &cp); err != nil {
		t.Fatal(err)
	}
	for _, s := range cp.Stages {
		s.Trusted, s.Reasons = true, nil
	}
	return &cp
}

// TestPlotSVG: the picture of a real run is XML with, for each of TTFT,
// TPOT and E2E p50 and p99 and the achieved rate, one point per stage and
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
	want = append(want, "sim achieved")
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
	for _, w := range []string{"offered rate (req/s)", "ms", "req/s", "SLO TTFT ≤ 500.0ms per request", "SLO TPOT p99 ≤ 100.0ms",
		"Not trusted", "stage 2 sim", "p50", "p99", "not trusted", "Time to first token", "Achieved throughput"} {
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
