// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plot formats.
const (
	FormatSVG = "svg"
	FormatPNG = "png"
)

// PlotFormat returns the plot format a file name asks for (by its
// extension), or an error naming the supported ones.
func PlotFormat(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return FormatSVG, nil
	case ".png":
		return FormatPNG, nil
	}
	return "", fmt.Errorf("plot %s: unsupported format %q (use .svg or .png)", path, filepath.Ext(path))
}

// WritePlot draws the prompt and completion length histograms of r side by
// side (log-spaced lengths on x, log-scale request counts on y, markers at
// p50, p90 and p99) as SVG or PNG.
func WritePlot(w io.Writer, r *Result, format string) error {
	sc := plotScene(r)
	switch format {
	case FormatSVG:
		return sc.writeSVG(w)
	case FormatPNG:
		return png.Encode(w, sc.raster())
	}
	return fmt.Errorf("unsupported plot format %q (svg or png)", format)
}

// The scene: a format-neutral list of shapes in pixel coordinates, drawn
// by writeSVG and raster alike.

type anchor int

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

type shape struct {
	kind         byte // 'r' rect, 'l' line, 't' text
	x, y, x2, y2 float64
	text         string
	anchor       anchor
	color        color.RGBA
	dashed, bold bool
	class        string
	attrs        [][2]string
}

type scene struct {
	w, h   int
	shapes []shape
	oy     float64 // added to every y: a row of panels below another
}

func (s *scene) rect(x, y, x2, y2 float64, c color.RGBA, class string, attrs ...[2]string) {
	s.shapes = append(s.shapes, shape{kind: 'r', x: x, y: y + s.oy, x2: x2, y2: y2 + s.oy, color: c, class: class, attrs: attrs})
}

func (s *scene) line(x, y, x2, y2 float64, c color.RGBA, dashed bool) {
	s.shapes = append(s.shapes, shape{kind: 'l', x: x, y: y + s.oy, x2: x2, y2: y2 + s.oy, color: c, dashed: dashed})
}

func (s *scene) text(x, y float64, t string, a anchor, c color.RGBA, bold bool) {
	s.shapes = append(s.shapes, shape{kind: 't', x: x, y: y + s.oy, text: t, anchor: a, color: c, bold: bold})
}

var (
	colBlack  = color.RGBA{0x22, 0x22, 0x22, 0xff}
	colGrey   = color.RGBA{0x88, 0x88, 0x88, 0xff}
	colGrid   = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	colPrompt = color.RGBA{0x3b, 0x75, 0xaf, 0xff}
	colOutput = color.RGBA{0xe1, 0x81, 0x2c, 0xff}
	colMarker = color.RGBA{0xc0, 0x39, 0x2b, 0xff}
	colWhite  = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

const (
	plotW, plotH = 1100, 440
	panelTop     = 78
	panelBottom  = 370
)

func plotScene(r *Result) *scene {
	sc := &scene{w: plotW, h: plotH}
	if r.Trace != nil {
		sc.h += plotH // the joint panels below
	}
	sc.rect(0, 0, plotW, float64(sc.h), colWhite, "")
	title := fmt.Sprintf("Request lengths: %s, %s requests", asciiOnly(redactSource(r.Source)), formatCount(r.Count()))
	if !r.Start.IsZero() {
		title += fmt.Sprintf(" (%s .. %s)", r.Start.UTC().Format("2006-01-02 15:04"), r.End.UTC().Format("2006-01-02 15:04 MST"))
	}
	sc.text(plotW/2, 22, truncateText(title, 150), anchorMiddle, colBlack, true)
	unit := "requests per bin (log scale)"
	if r.SourceKind == SourcePrometheus {
		unit = "requests per histogram bucket (log scale)"
	}
	sc.text(plotW/2, 40, unit+"; dashed lines: p50, p90, p99", anchorMiddle, colGrey, false)
	drawPanel(sc, 70, 520, "prompt tokens", r.Prompt, colPrompt)
	drawPanel(sc, 620, 1070, "output tokens", r.Output, colOutput)
	if r.Trace != nil {
		sc.oy = plotH
		drawJoint(sc, 70, 520, r.Trace)
		drawRate(sc, 620, 1070, r.Trace)
		sc.oy = 0
	}
	return sc
}

// drawPanel draws one length's histogram between x0 and x1.
func drawPanel(sc *scene, x0, x1 float64, name string, l *Lengths, col color.RGBA) {
	bins := l.Bins()
	sc.text((x0+x1)/2, panelTop-12, name, anchorMiddle, colBlack, true)

	// x range: the non-empty bins' finite extent, in log10.
	lo, hi, maxCount, infCount := math.Inf(1), math.Inf(-1), 0.0, 0.0
	for _, b := range bins {
		if b.Count <= 0 {
			continue
		}
		if math.IsInf(b.Hi, 1) {
			infCount += b.Count
			lo = min(lo, max(b.Lo, 1))
			hi = max(hi, max(b.Lo, 1)*2)
			continue
		}
		blo := b.Lo
		if blo <= 0 {
			blo = b.Hi / 2
		}
		lo, hi = min(lo, blo), max(hi, b.Hi)
		maxCount = max(maxCount, b.Count)
	}
	if !(hi > lo) {
		lo, hi = 0.5, 2
	}
	llo, lhi := math.Log10(lo), math.Log10(hi)
	pad := 0.04 * (lhi - llo)
	llo, lhi = llo-pad, lhi+pad
	xOf := func(v float64) float64 { return x0 + (math.Log10(v)-llo)/(lhi-llo)*(x1-x0) }

	// y: log counts from ½ to a power of ten above the largest count.
	const base = 0.5
	top := math.Pow(10, math.Ceil(math.Log10(max(maxCount, 1)*1.05)))
	yOf := func(c float64) float64 {
		return panelBottom - (math.Log10(c)-math.Log10(base))/(math.Log10(top)-math.Log10(base))*(panelBottom-panelTop)
	}

	// Grid and y ticks.
	for c := 1.0; c <= top; c *= 10 {
		y := yOf(c)
		sc.line(x0, y, x1, y, colGrid, false)
		sc.line(x0-4, y, x0, y, colBlack, false)
		sc.text(x0-7, y+4, formatNumber(c), anchorEnd, colBlack, false)
	}
	// x ticks: decades labelled; 2 and 5 labelled too when few decades.
	decades := lhi - llo
	for d := math.Floor(llo); d <= math.Ceil(lhi); d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if lv := math.Log10(v); lv < llo || lv > lhi {
				continue
			}
			x := xOf(v)
			major := m == 1
			if major {
				sc.line(x, panelTop, x, panelBottom, colGrid, false)
			}
			size := 3.0
			if major {
				size = 5
			}
			sc.line(x, panelBottom, x, panelBottom+size, colBlack, false)
			if major || decades < 2.5 {
				sc.text(x, panelBottom+18, formatNumber(v), anchorMiddle, colBlack, false)
			}
		}
	}

	// Bars.
	for _, b := range bins {
		if b.Count <= 0 || math.IsInf(b.Hi, 1) {
			continue
		}
		bl := b.Lo
		if bl <= 0 || math.Log10(bl) < llo {
			bl = math.Pow(10, llo)
		}
		xa, xb := xOf(bl), xOf(b.Hi)
		if xb-xa > 2 {
			xa, xb = xa+0.5, xb-0.5
		}
		sc.rect(xa, yOf(b.Count), xb, panelBottom, col, "bar",
			[2]string{"data-count", formatNumber(b.Count)},
			[2]string{"data-lo", formatNumber(b.Lo)},
			[2]string{"data-hi", formatNumber(b.Hi)})
	}
	if infCount > 0 {
		sc.text(x1, panelTop+14, fmt.Sprintf("+%s above the largest bucket", formatCount(infCount)), anchorEnd, colGrey, false)
	}

	// Quantile markers.
	for i, p := range []float64{0.5, 0.9, 0.99} {
		v := l.Quantile(p)
		if !(v > 0) || math.Log10(v) < llo || math.Log10(v) > lhi {
			continue
		}
		x := xOf(v)
		sc.line(x, panelTop, x, panelBottom, colMarker, true)
		label := fmt.Sprintf("p%s %s", strconv.FormatFloat(p*100, 'f', -1, 64), formatNumber(roundSig(v)))
		ly := panelTop + 14 + float64(i)*14
		lx := x + 3
		if lx+7*float64(len(label)) > x1 {
			lx = x - 3 - 7*float64(len(label)) // keep the label inside the panel
		}
		// A white box keeps the label legible over the bars.
		sc.rect(lx-1, ly-10, lx+7*float64(len(label))+1, ly+3, colWhite, "")
		sc.text(lx, ly, label, anchorStart, colMarker, false)
	}

	// Axes and labels.
	sc.line(x0, panelBottom, x1, panelBottom, colBlack, false)
	sc.line(x0, panelTop, x0, panelBottom, colBlack, false)
	sc.text((x0+x1)/2, panelBottom+40, name+" per request (log scale)", anchorMiddle, colBlack, false)
	sc.text(x0-40, panelTop-12, "requests", anchorStart, colGrey, false)
	summary := fmt.Sprintf("n=%s  mean %s  max %s", formatCount(l.Count), formatNumber(roundSig(l.Mean)), formatNumber(l.Max))
	sc.text((x0+x1)/2, panelBottom+58, summary, anchorMiddle, colGrey, false)
}

func asciiOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func hexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func (s *scene) writeSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", s.w, s.h, s.w, s.h)
	f := func(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }
	for _, sh := range s.shapes {
		switch sh.kind {
		case 'r':
			fmt.Fprintf(bw, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"`, f(sh.x), f(sh.y), f(sh.x2-sh.x), f(sh.y2-sh.y), hexColor(sh.color))
			if sh.class != "" {
				fmt.Fprintf(bw, ` class="%s"`, sh.class)
			}
			for _, a := range sh.attrs {
				fmt.Fprintf(bw, ` %s="%s"`, a[0], xmlEscape(a[1]))
			}
			bw.WriteString("/>\n")
		case 'l':
			fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"`, f(sh.x), f(sh.y), f(sh.x2), f(sh.y2), hexColor(sh.color))
			if sh.dashed {
				bw.WriteString(` stroke-dasharray="4 3"`)
			}
			bw.WriteString("/>\n")
		case 't':
			anchor := [...]string{"start", "middle", "end"}[sh.anchor]
			fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="%s" fill="%s"`, f(sh.x), f(sh.y), anchor, hexColor(sh.color))
			if sh.bold {
				bw.WriteString(` font-weight="bold"`)
			}
			fmt.Fprintf(bw, ">%s</text>\n", xmlEscape(sh.text))
		}
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writes to a bytes.Buffer never fail
	return b.String()
}

// raster renders the scene with the standard library's image packages
// and a fixed 7×13 bitmap font (bold is drawn twice, one pixel apart).
func (s *scene) raster() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, s.w, s.h))
	for _, sh := range s.shapes {
		switch sh.kind {
		case 'r':
			r := image.Rect(int(math.Round(sh.x)), int(math.Round(sh.y)), int(math.Round(sh.x2)), int(math.Round(sh.y2)))
			if r.Dx() == 0 {
				r.Max.X++
			}
			draw.Draw(img, r, image.NewUniform(sh.color), image.Point{}, draw.Src)
		case 'l':
			drawLine(img, sh)
		case 't':
			d := &font.Drawer{Dst: img, Src: image.NewUniform(sh.color), Face: basicfont.Face7x13}
			width := d.MeasureString(sh.text).Round()
			x := int(math.Round(sh.x))
			switch sh.anchor {
			case anchorMiddle:
				x -= width / 2
			case anchorEnd:
				x -= width
			}
			d.Dot = fixed.P(x, int(math.Round(sh.y)))
			d.DrawString(sh.text)
			if sh.bold {
				d.Dot = fixed.P(x+1, int(math.Round(sh.y)))
				d.DrawString(sh.text)
			}
		}
	}
	return img
}

// drawLine draws a horizontal or vertical line (the only ones a plot has;
// others are drawn as their bounding box' diagonal steps).
func drawLine(img *image.RGBA, sh shape) {
	x0, y0 := int(math.Round(sh.x)), int(math.Round(sh.y))
	x1, y1 := int(math.Round(sh.x2)), int(math.Round(sh.y2))
	n := max(abs(x1-x0), abs(y1-y0))
	for i := 0; i <= n; i++ {
		if sh.dashed && i%7 >= 4 {
			continue
		}
		t := 0.0
		if n > 0 {
			t = float64(i) / float64(n)
		}
		x := x0 + int(math.Round(t*float64(x1-x0)))
		y := y0 + int(math.Round(t*float64(y1-y0)))
		if image.Pt(x, y).In(img.Rect) {
			img.SetRGBA(x, y, sh.color)
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
