// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgRects decodes an SVG and returns the bars' data-count values and the
// number of text elements.
func svgRects(t *testing.T, svg []byte) (bars []float64, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	root := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "svg" {
			root = se.Name.Space == "http://www.w3.org/2000/svg"
		}
		if se.Name.Local == "text" {
			var s string
			if err := dec.DecodeElement(&s, &se); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, s)
		}
		if se.Name.Local != "rect" {
			continue
		}
		attrs := map[string]string{}
		for _, a := range se.Attr {
			attrs[a.Name.Local] = a.Value
		}
		if attrs["class"] != "bar" {
			continue
		}
		c, err := strconv.ParseFloat(attrs["data-count"], 64)
		if err != nil {
			t.Fatalf("bar data-count %q: %v", attrs["data-count"], err)
		}
		h, _ := strconv.ParseFloat(attrs["height"], 64)
		w, _ := strconv.ParseFloat(attrs["width"], 64)
		if !(h > 0) || !(w > 0) {
			t.Errorf("bar %v has no area", attrs)
		}
		bars = append(bars, c)
	}
	if !root {
		t.Error("the root element is not an SVG <svg>")
	}
	return bars, texts
}

func nonEmpty(bins []Bin) (n int, total float64) {
	for _, b := range bins {
		if b.Count > 0 && !math.IsInf(b.Hi, 1) {
			n++
			total += b.Count
		}
	}
	return n, total
}

func TestWritePlotSVGAccessLog(t *testing.T) {
	res, err := FromAccessLog(context.Background(), sampleLog, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WritePlot(&b, res, FormatSVG); err != nil {
		t.Fatal(err)
	}
	bars, texts := svgRects(t, b.Bytes())
	np, tp := nonEmpty(res.Prompt.Bins())
	no, to := nonEmpty(res.Output.Bins())
	if len(bars) != np+no {
		t.Errorf("%d bars, want %d (prompt) + %d (output) non-empty bins", len(bars), np, no)
	}
	sum := 0.0
	for _, c := range bars {
		sum += c
	}
	if sum != tp+to || tp != 4988 || to != 4988 {
		t.Errorf("bars hold %g requests (bins %g + %g), want 2 × 4988", sum, tp, to)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"4988 requests", "prompt tokens", "output tokens", "p50 337", "p99 1479", "1000"} {
		if !strings.Contains(all, want) {
			t.Errorf("plot text lacks %q", want)
		}
	}
}

func TestWritePlotPrometheusBinsAndPNG(t *testing.T) {
	inf := math.Inf(1)
	prompt, err := FitHistogram([]Bin{{0, 1, 2}, {1, 2, 0}, {2, 5, 3}, {5, 10, 10}, {10, 20, 40}, {20, 50, 30}, {50, 100, 0}, {100, inf, 4}}, 2500)
	if err != nil {
		t.Fatal(err)
	}
	output, err := FitHistogram([]Bin{{100, 200, 5}, {200, 500, 70}, {500, 1000, 14}}, 30000)
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{Source: "Prometheus http://user:secret@prom:9090", SourceKind: SourcePrometheus, Prompt: prompt, Output: output}
	var b bytes.Buffer
	if err := WritePlot(&b, res, FormatSVG); err != nil {
		t.Fatal(err)
	}
	bars, texts := svgRects(t, b.Bytes())
	// The +Inf bucket is not a bar: it is said in words.
	if len(bars) != 5+3 {
		t.Errorf("%d bars, want 8 (the finite non-empty buckets)", len(bars))
	}
	all := strings.Join(texts, "\n")
	if !strings.Contains(all, "+4 above the largest bucket") {
		t.Errorf("plot does not mention the +Inf bucket:\n%s", all)
	}
	if strings.Contains(b.String(), "secret") {
		t.Error("the plot shows the Prometheus password")
	}

	b.Reset()
	if err := WritePlot(&b, res, FormatPNG); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if r := img.Bounds(); r.Dx() != plotW || r.Dy() != plotH {
		t.Errorf("PNG is %v", r)
	}
	// Both bar colours are drawn.
	seen := map[[3]uint32]int{}
	for y := 0; y < plotH; y++ {
		for x := 0; x < plotW; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 8, g >> 8, bl >> 8}]++
		}
	}
	for _, c := range []struct {
		name string
		rgb  [3]uint32
	}{{"prompt", [3]uint32{uint32(colPrompt.R), uint32(colPrompt.G), uint32(colPrompt.B)}}, {"output", [3]uint32{uint32(colOutput.R), uint32(colOutput.G), uint32(colOutput.B)}}} {
		if seen[c.rgb] < 500 {
			t.Errorf("%s bars: %d pixels of their colour", c.name, seen[c.rgb])
		}
	}
	if err := WritePlot(&b, res, "gif"); err == nil {
		t.Error("gif: want an error")
	}
}

func TestPlotFormat(t *testing.T) {
	for in, want := range map[string]string{"a.svg": FormatSVG, "dir/B.PNG": FormatPNG} {
		if got, err := PlotFormat(in); err != nil || got != want {
			t.Errorf("PlotFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := PlotFormat("plot.jpg"); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("jpg: err = %v", err)
	}
}
