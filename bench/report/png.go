// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

// goRegular is the Go Regular TrueType font (golang.org/x/image's Go
// fonts: WGL4's glyphs, "≤", "µ" and "Δ" among them), parsed once.
var goRegular = sync.OnceValue(func() *sfnt.Font {
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		panic("bench: the embedded Go Regular font: " + err.Error())
	}
	return f
})

// plotFace is a face of Go Regular at the figure's font size (a face
// keeps buffers: one per drawing).
func plotFace() font.Face {
	face, err := opentype.NewFace(goRegular(), &opentype.FaceOptions{Size: plotFontSize, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		panic("bench: a face of Go Regular: " + err.Error())
	}
	return face
}

// WritePNG draws the picture (the figure WriteSVG writes) into a PNG with
// the standard library's image packages, its text in Go Regular.
func (r *Report) WritePNG(w io.Writer) error {
	f := r.layout()
	face := plotFace()
	defer face.Close()
	img := image.NewRGBA(image.Rect(0, 0, f.w, f.h))
	for _, it := range f.items {
		switch it.kind {
		case kindRect:
			rect := image.Rect(int(it.pts[0].x), int(it.pts[0].y), int(it.pts[1].x), int(it.pts[1].y))
			draw.Draw(img, rect, image.NewUniform(it.color), image.Point{}, draw.Src)
		case kindLine:
			drawPolyline(img, it.pts, it.color, it.width, it.dash)
		case kindMarker:
			drawMarker(img, it.pts[0], 4, it.color, it.hollow)
		case kindText:
			drawText(img, face, it.pts[0], it.text, it.anchor, it.color)
		}
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	return enc.Encode(w, img)
}

// drawPolyline strokes the segments with a square pen of the width;
// dashed lines alternate 6 pixels on and 4 off along the whole path.
func drawPolyline(img *image.RGBA, pts []pt, c color.RGBA, width float64, dash bool) {
	pen := max(1, int(math.Round(width)))
	travelled := 0.0
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		length := math.Hypot(b.x-a.x, b.y-a.y)
		steps := max(1, int(math.Ceil(length*2)))
		for s := 0; s <= steps; s++ {
			t := float64(s) / float64(steps)
			d := travelled + t*length
			if dash && math.Mod(d, 10) >= 6 {
				continue
			}
			x, y := a.x+t*(b.x-a.x), a.y+t*(b.y-a.y)
			x0, y0 := int(math.Round(x-float64(pen)/2)), int(math.Round(y-float64(pen)/2))
			for dx := range pen {
				for dy := range pen {
					setPixel(img, x0+dx, y0+dy, c)
				}
			}
		}
		travelled += length
	}
}

// drawMarker draws a disc of radius r, or a ring of it when hollow.
func drawMarker(img *image.RGBA, p pt, r float64, c color.RGBA, hollow bool) {
	cx, cy := int(math.Round(p.x)), int(math.Round(p.y))
	ri := int(math.Ceil(r)) + 1
	for dy := -ri; dy <= ri; dy++ {
		for dx := -ri; dx <= ri; dx++ {
			d := math.Hypot(float64(dx), float64(dy))
			switch {
			case d > r+0.5:
			case hollow && d < r-1.2:
				setPixel(img, cx+dx, cy+dy, colWhite)
			default:
				setPixel(img, cx+dx, cy+dy, c)
			}
		}
	}
}

func setPixel(img *image.RGBA, x, y int, c color.RGBA) {
	if image.Pt(x, y).In(img.Rect) {
		img.SetRGBA(x, y, c)
	}
}

// drawText writes s with its baseline at p.y, anchored at p.x.
func drawText(img *image.RGBA, face font.Face, p pt, s, anchor string, c color.RGBA) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face}
	width := d.MeasureString(s).Round()
	x := int(math.Round(p.x))
	switch anchor {
	case "middle":
		x -= width / 2
	case "end":
		x -= width
	}
	d.Dot = fixed.P(x, int(math.Round(p.y)))
	d.DrawString(s)
}
