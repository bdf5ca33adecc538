// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"image"
	"image/draw"
	"testing"

	"golang.org/x/image/font"
)

// TestPNGText: the PNG's text is drawn in a TrueType face that has the
// glyphs the figure uses ("≤" in SLO labels, "µ", "Δ"), so that "≤" is
// drawn as itself: its pixels differ from those of "<=" and from the
// face's box for a missing glyph.
func TestPNGText(t *testing.T) {
	draw1 := func(s string) *image.RGBA {
		img := image.NewRGBA(image.Rect(0, 0, 80, 24))
		draw.Draw(img, img.Rect, image.NewUniform(colWhite), image.Point{}, draw.Src)
		drawText(img, plotFace(), pt{4, 16}, s, "start", colBlack)
		return img
	}
	ink := func(img *image.RGBA) (n int) {
		for i := 0; i < len(img.Pix); i += 4 {
			if img.Pix[i] != 0xff {
				n++
			}
		}
		return n
	}
	same := func(a, b *image.RGBA) bool { return string(a.Pix) == string(b.Pix) }
	le, lt, missing := draw1("≤"), draw1("<="), draw1("\uE000")
	if ink(le) == 0 {
		t.Fatal("no ink for ≤")
	}
	if same(le, lt) {
		t.Error("≤ is drawn as <=")
	}
	if same(le, missing) {
		t.Error("≤ is drawn as the missing glyph")
	}
	face := plotFace()
	for _, r := range "≤µΔ–" {
		if _, ok := face.GlyphAdvance(r); !ok {
			t.Errorf("the face has no %q", r)
		}
	}
	// The note's lines, laid out for 0.6 em a character, fit the PNG in
	// this face too.
	rep := &Report{}
	for i, why := range []string{
		"harness saturated: the process woke up more than max_inflation 10ms late in 15 of 276 heartbeats (p99 38.518598ms) over 3s; target overloaded: 40 of 400 requests dropped over max_inflight 64",
		"WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW",
	} {
		rep.Stages = append(rep.Stages, &StageReport{Stage: i + 1, Target: "sim", RequestedRate: float64(i + 1), Reasons: []string{why}})
	}
	f := rep.layout()
	lines := 0
	for _, it := range f.items {
		if it.class != "note" {
			continue
		}
		lines++
		d := &font.Drawer{Face: face}
		if right := it.pts[0].x + float64(d.MeasureString(it.text).Ceil()); right > float64(f.w) || it.pts[0].y > float64(f.h) {
			t.Errorf("note line %q ends at x %.0f, y %.0f, outside %dx%d", it.text, right, it.pts[0].y, f.w, f.h)
		}
	}
	if lines < 4 {
		t.Errorf("%d note lines", lines)
	}
}
