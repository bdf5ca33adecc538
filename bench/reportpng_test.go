// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"strconv"
	"testing"
)

// TestPlotPNG: the PNG decodes to the picture's size, is the same bytes
// for the same report, and has ink (not the white background) at every
// marker the SVG places (the same layout), a white centre at a hollow
// one, and enough drawn pixels overall.
func TestPlotPNG(t *testing.T) {
	sw := runSweep(t)
	rep := untrustedCopy(t, sw.rep)
	var a, b, svg bytes.Buffer
	if err := rep.WritePNG(&a); err != nil {
		t.Fatal(err)
	}
	if err := rep.WritePlot(&b, "png"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two drawings of the same report differ")
	}
	img, err := png.Decode(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	els := parseSVG(t, svg.Bytes())
	w, _ := strconv.Atoi(els[0].attrs["width"])
	h, _ := strconv.Atoi(els[0].attrs["height"])
	if got := img.Bounds(); got != image.Rect(0, 0, w, h) {
		t.Fatalf("PNG bounds %v, SVG %dx%d", got, w, h)
	}
	white := func(x, y int) bool {
		r, g, b, _ := img.At(x, y).RGBA()
		return r == 0xffff && g == 0xffff && b == 0xffff
	}
	markers := 0
	for _, e := range els {
		if e.attrs["class"] != "point" {
			continue
		}
		markers++
		cx, _ := strconv.ParseFloat(e.attrs["cx"], 64)
		cy, _ := strconv.ParseFloat(e.attrs["cy"], 64)
		x, y := int(math.Round(cx)), int(math.Round(cy))
		if e.attrs["fill"] == "none" {
			if !white(x, y) || white(x+4, y) && white(x-4, y) {
				t.Errorf("hollow marker at %d,%d: centre white %v, ring %v %v", x, y, white(x, y), !white(x+4, y), !white(x-4, y))
			}
		} else if white(x, y) {
			t.Errorf("no ink at the marker at %d,%d (%s)", x, y, e.attrs["data-series"])
		}
	}
	if markers == 0 {
		t.Fatal("no markers")
	}
	ink := 0
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			if !white(x, y) {
				ink++
			}
		}
	}
	if ink < w*h/100 {
		t.Errorf("only %d of %d pixels drawn", ink, w*h)
	}
}
