// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The load–latency picture of a report: four panels against the offered
// (requested) rate, one point per stage and lines between them, per
// target: TTFT, TPOT and E2E p50 (solid) and p99 (dashed), and achieved
// throughput beside the ideal (achieved = offered). A stage the verdict
// did not trust has a hollow marker and is named in a note; the SLO's
// bounds are horizontal lines in the panels they bound. The same figure
// (a list of primitives laid out here) is written as SVG text or drawn
// into a PNG, both deterministic for the same report.

const (
	plotWidth  = 960
	plotHeight = 720
)

type pt struct{ x, y float64 }

type itemKind int

const (
	kindLine itemKind = iota // a polyline through pts
	kindMarker
	kindText
	kindRect
)

// item is one primitive of the figure.
type item struct {
	kind   itemKind
	pts    []pt // kindLine: the points; kindMarker, kindText: pts[0]; kindRect: corners
	color  color.RGBA
	width  float64
	dash   bool
	hollow bool // kindMarker: not filled (an untrusted stage)
	text   string
	anchor string // kindText: start, middle or end
	// series names the series a line or marker belongs to (SVG
	// data-series); stage and trusted describe a marker.
	series  string
	stage   int
	trusted bool
	fill    bool // kindRect: filled, else outlined
}

type figure struct {
	w, h  int
	items []item
}

func (f *figure) add(it item) { f.items = append(f.items, it) }

func (f *figure) text(x, y float64, s, anchor string, c color.RGBA) {
	f.add(item{kind: kindText, pts: []pt{{x, y}}, text: s, anchor: anchor, color: c})
}

func (f *figure) line(c color.RGBA, width float64, dash bool, pts ...pt) {
	f.add(item{kind: kindLine, pts: pts, color: c, width: width, dash: dash})
}

var (
	colBlack = color.RGBA{0x22, 0x22, 0x22, 0xff}
	colGrid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	colGrey  = color.RGBA{0x88, 0x88, 0x88, 0xff}
	colSLO   = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	colWhite = color.RGBA{0xff, 0xff, 0xff, 0xff}
	// One colour per target (after the last they repeat).
	palette = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
		{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
	}
)

// plotSeries is one line of a panel.
type plotSeries struct {
	name   string
	color  color.RGBA
	dash   bool
	points []plotPoint
}

type plotPoint struct {
	x, y    float64
	stage   int
	trusted bool
}

type panel struct {
	title, metric string // metric: ttft, tpot, e2e, or "" for throughput
	series        []plotSeries
	bounds        []SLOBound
	ideal         bool // draw achieved = offered
	seconds       bool // values are seconds (unit chosen by the range)
}

// plotTargets lists the report's targets in order of first appearance.
func (r *Report) plotTargets() []string {
	var out []string
	for _, s := range r.Stages {
		if !slices.Contains(out, s.Target) {
			out = append(out, s.Target)
		}
	}
	return out
}

func (r *Report) panels() []panel {
	targets := r.plotTargets()
	latency := func(title, metric string, get func(*StageReport) Quantiles) panel {
		p := panel{title: title, metric: metric, seconds: true}
		for i, t := range targets {
			for _, q := range []struct {
				name string
				v    func(Quantiles) float64
				dash bool
			}{{"p50", func(q Quantiles) float64 { return q.P50 }, false}, {"p99", func(q Quantiles) float64 { return q.P99 }, true}} {
				ps := plotSeries{name: t + " " + strings.ToUpper(metric) + " " + q.name, color: palette[i%len(palette)], dash: q.dash}
				for _, s := range r.Stages {
					if s.Target != t || get(s).Count == 0 {
						continue
					}
					ps.points = append(ps.points, plotPoint{s.RequestedRate, q.v(get(s)), s.Stage, s.Trusted})
				}
				p.series = append(p.series, ps)
			}
		}
		for _, b := range r.SLOBounds {
			if b.Metric == metric {
				p.bounds = append(p.bounds, b)
			}
		}
		return p
	}
	tp := panel{title: "Achieved throughput", ideal: true}
	for i, t := range targets {
		ps := plotSeries{name: t + " achieved", color: palette[i%len(palette)]}
		for _, s := range r.Stages {
			if s.Target == t {
				ps.points = append(ps.points, plotPoint{s.RequestedRate, s.AchievedRate, s.Stage, s.Trusted})
			}
		}
		tp.series = append(tp.series, ps)
	}
	return []panel{
		latency("Time to first token", "ttft", func(s *StageReport) Quantiles { return s.TTFT }),
		latency("Time per output token", "tpot", func(s *StageReport) Quantiles { return s.TPOT }),
		latency("End-to-end latency", "e2e", func(s *StageReport) Quantiles { return s.E2E }),
		tp,
	}
}

// niceTicks returns about n round tick values from 0 to at least max.
func niceTicks(max float64, n int) []float64 {
	if !(max > 0) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		ticks = append(ticks, v)
		if v >= max*(1-1e-9) {
			break
		}
	}
	return ticks
}

func fmtTick(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-0" {
		return "0"
	}
	return s
}

// layout builds the figure of the report.
func (r *Report) layout() *figure {
	f := &figure{w: plotWidth, h: plotHeight}
	f.add(item{kind: kindRect, pts: []pt{{0, 0}, {plotWidth, plotHeight}}, color: colWhite, fill: true})
	f.text(plotWidth/2, 22, "llmprobe bench: latency and throughput against offered load", "middle", colBlack)

	const (
		top, panelW, panelH = 40.0, 480.0, 290.0
		ml, mr, mt, mb      = 64.0, 16.0, 28.0, 44.0
	)
	maxRate := 0.0
	for _, s := range r.Stages {
		maxRate = math.Max(maxRate, s.RequestedRate)
	}
	xticks := niceTicks(maxRate, 5)
	xmax := xticks[len(xticks)-1]
	for i, p := range r.panels() {
		ox, oy := float64(i%2)*panelW, top+float64(i/2)*panelH
		x0, x1 := ox+ml, ox+panelW-mr
		y0, y1 := oy+panelH-mb, oy+mt // y0 is the bottom
		ymaxData := 0.0
		for _, s := range p.series {
			for _, q := range s.points {
				ymaxData = math.Max(ymaxData, q.y)
			}
		}
		for _, b := range p.bounds {
			ymaxData = math.Max(ymaxData, b.Seconds)
		}
		if p.ideal {
			ymaxData = math.Max(ymaxData, maxRate)
		}
		scale, unit := 1.0, "req/s"
		if p.seconds {
			scale, unit = 1e3, "ms"
			if ymaxData >= 2 {
				scale, unit = 1, "s"
			}
		}
		yticks := niceTicks(ymaxData*scale*1.05, 5) // room above a bound at the top
		ymax := yticks[len(yticks)-1] / scale
		X := func(v float64) float64 { return x0 + (x1-x0)*v/xmax }
		Y := func(v float64) float64 { return y0 - (y0-y1)*v/ymax }

		f.text((x0+x1)/2, oy+16, p.title, "middle", colBlack)
		for _, t := range yticks {
			y := Y(t / scale)
			f.line(colGrid, 1, false, pt{x0, y}, pt{x1, y})
			f.text(x0-6, y+4, fmtTick(t), "end", colBlack)
		}
		for _, t := range xticks {
			x := X(t)
			f.line(colGrid, 1, false, pt{x, y0}, pt{x, y1})
			f.text(x, y0+16, fmtTick(t), "middle", colBlack)
		}
		f.line(colBlack, 1, false, pt{x0, y1}, pt{x0, y0}, pt{x1, y0})
		f.text(x0, y1-8, unit, "end", colBlack)
		f.text((x0+x1)/2, y0+34, "offered rate (req/s)", "middle", colBlack)
		if p.ideal {
			f.line(colGrey, 1, true, pt{X(0), Y(0)}, pt{X(math.Min(xmax, ymax)), Y(math.Min(xmax, ymax))})
		}
		for _, b := range p.bounds {
			y := Y(b.Seconds)
			f.line(colSLO, 1.5, true, pt{x0, y}, pt{x1, y})
			ly := y - 4
			if ly < y1+14 { // under the line, clear of the title
				ly = y + 14
			}
			f.text(x1-2, ly, "SLO "+b.describe(), "end", colSLO)
		}
		for _, s := range p.series {
			var line []pt
			for _, q := range s.points {
				line = append(line, pt{X(q.x), Y(q.y)})
			}
			if len(line) > 1 {
				f.add(item{kind: kindLine, pts: line, color: s.color, width: 2, dash: s.dash, series: s.name})
			}
			for _, q := range s.points {
				f.add(item{kind: kindMarker, pts: []pt{{X(q.x), Y(q.y)}}, color: s.color, hollow: !q.trusted,
					series: s.name, stage: q.stage, trusted: q.trusted})
			}
		}
	}

	// The legend: a colour per target, the line styles, the markers.
	ly := top + 2*panelH + 14
	lx := 20.0
	for i, t := range r.plotTargets() {
		c := palette[i%len(palette)]
		f.line(c, 2, false, pt{lx, ly}, pt{lx + 24, ly})
		f.add(item{kind: kindMarker, pts: []pt{{lx + 12, ly}}, color: c})
		f.text(lx+30, ly+4, t, "start", colBlack)
		lx += 40 + 7*float64(len(t)) + 16
	}
	ly += 20
	lx = 20
	f.line(colBlack, 2, false, pt{lx, ly}, pt{lx + 24, ly})
	f.text(lx+30, ly+4, "p50", "start", colBlack)
	lx += 80
	f.line(colBlack, 2, true, pt{lx, ly}, pt{lx + 24, ly})
	f.text(lx+30, ly+4, "p99", "start", colBlack)
	lx += 80
	f.line(colGrey, 1, true, pt{lx, ly}, pt{lx + 24, ly})
	f.text(lx+30, ly+4, "achieved = offered", "start", colBlack)
	lx += 190
	if len(r.SLOBounds) > 0 {
		f.line(colSLO, 1.5, true, pt{lx, ly}, pt{lx + 24, ly})
		f.text(lx+30, ly+4, "SLO bound", "start", colBlack)
		lx += 120
	}
	f.add(item{kind: kindMarker, pts: []pt{{lx + 6, ly}}, color: colBlack})
	f.text(lx+16, ly+4, "trusted", "start", colBlack)
	lx += 90
	f.add(item{kind: kindMarker, pts: []pt{{lx + 6, ly}}, color: colBlack, hollow: true})
	f.text(lx+16, ly+4, "not trusted", "start", colBlack)

	var untrusted []string
	for _, s := range r.Stages {
		if !s.Trusted {
			untrusted = append(untrusted, fmt.Sprintf("stage %d %s", s.Stage, s.Target))
		}
	}
	if len(untrusted) > 0 {
		note := "Not trusted (the load was not delivered; hollow markers): " + strings.Join(untrusted, ", ")
		if len(note) > 130 {
			note = note[:127] + "..."
		}
		f.text(20, ly+24, note, "start", colSLO)
	}
	return f
}

// WritePlot writes the report's load–latency picture in format "svg" or
// "png".
func (r *Report) WritePlot(w io.Writer, format string) error {
	switch format {
	case "svg":
		return r.WriteSVG(w)
	case "png":
		return r.WritePNG(w)
	}
	return fmt.Errorf("unknown plot format %q (svg or png)", format)
}

// WriteSVG writes the picture as an SVG document.
func (r *Report) WriteSVG(w io.Writer) error {
	f := r.layout()
	b := &strings.Builder{}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="12">`+"\n", f.w, f.h, f.w, f.h)
	b.WriteString("<title>llmprobe bench: latency and throughput against offered load</title>\n")
	for _, it := range f.items {
		switch it.kind {
		case kindRect:
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
				num(it.pts[0].x), num(it.pts[0].y), num(it.pts[1].x-it.pts[0].x), num(it.pts[1].y-it.pts[0].y), hex(it.color))
		case kindLine:
			var pts []string
			for _, p := range it.pts {
				pts = append(pts, num(p.x)+","+num(p.y))
			}
			dash := ""
			if it.dash {
				dash = ` stroke-dasharray="6 4"`
			}
			series := ""
			if it.series != "" {
				series = ` class="series" data-series="` + xmlEscape(it.series) + `"`
			}
			fmt.Fprintf(b, `<polyline%s points="%s" fill="none" stroke="%s" stroke-width="%s"%s/>`+"\n",
				series, strings.Join(pts, " "), hex(it.color), num(it.width), dash)
		case kindMarker:
			fill := hex(it.color)
			if it.hollow {
				fill = "none"
			}
			attrs := ""
			if it.series != "" {
				attrs = fmt.Sprintf(` class="point" data-series="%s" data-stage="%d" data-trusted="%t"`, xmlEscape(it.series), it.stage, it.trusted)
			}
			fmt.Fprintf(b, `<circle%s cx="%s" cy="%s" r="4" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n",
				attrs, num(it.pts[0].x), num(it.pts[0].y), fill, hex(it.color))
		case kindText:
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" fill="%s">%s</text>`+"\n",
				num(it.pts[0].x), num(it.pts[0].y), it.anchor, hex(it.color), xmlEscape(it.text))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}
