// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/image/font"
)

// The load–latency picture of a report: five panels against the offered
// (requested) rate, one point per stage and lines between them, per
// target: TTFT, TPOT and E2E p50 (solid) and p99 (dashed) on logarithmic
// axes, achieved throughput beside the ideal (achieved = offered), and
// output tokens/s. A stage the verdict did not trust has a hollow marker
// and is named, with the verdict's own reasons, in a note under the
// panels; the SLO's bounds are horizontal lines in the panels they bound.
// The same figure (a list of primitives laid out here) is written as SVG
// text or drawn into a PNG, both deterministic for the same report.

const (
	plotWidth = 960
	// plotFontSize is the text's size in pixels; the layout takes a
	// character to be plotCharWidth wide (0.6 em, a monospace font's
	// advance, which the SVG asks for; the PNG's Go Regular is narrower).
	plotFontSize  = 12
	plotCharWidth = 0.6 * plotFontSize
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
	// class, panel, axis and value describe a text (SVG class, data-panel,
	// data-axis, data-value): a tick label's panel, axis and value in the
	// panel's unit (seconds, req/s, tokens/s), or a line of the note.
	class, panel, axis string
	value              float64
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

// panelKind says how a panel's values are scaled.
type panelKind int

const (
	panelLatency panelKind = iota // seconds on a logarithmic axis
	panelRate                     // served req/s on the achieved rate's scale, beside the ideal
	panelTokens                   // tokens/s on a linear axis from 0
)

type panel struct {
	title, metric string // metric: ttft, tpot, e2e, rate or tokens
	kind          panelKind
	series        []plotSeries
	bounds        []SLOBound
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

// plotRate is where a stage stands on the plot's rate axis: the rate it
// achieved (sent per second), or its requested rate when it sent nothing.
func plotRate(s *StageReport) float64 {
	if a := s.AchievedRate; a > 0 && !math.IsInf(a, 1) {
		return a
	}
	return s.RequestedRate
}

// plotStages are the stages in the order of their achieved rates (run
// order among equal ones), so that a series' line runs left to right.
func (r *Report) plotStages() []*StageReport {
	return slices.SortedStableFunc(slices.Values(r.Stages), func(a, b *StageReport) int { return cmp.Compare(plotRate(a), plotRate(b)) })
}

func (r *Report) panels() []panel {
	targets := r.plotTargets()
	stages := r.plotStages()
	latency := func(title, metric string, get func(*StageReport) Quantiles) panel {
		p := panel{title: title, metric: metric, kind: panelLatency}
		for i, t := range targets {
			for _, q := range []struct {
				name string
				v    func(Quantiles) float64
				dash bool
			}{{"p50", func(q Quantiles) float64 { return q.P50 }, false}, {"p99", func(q Quantiles) float64 { return q.P99 }, true}} {
				ps := plotSeries{name: t + " " + strings.ToUpper(metric) + " " + q.name, color: palette[i%len(palette)], dash: q.dash}
				for _, s := range stages {
					if s.Target != t || get(s).Count == 0 {
						continue
					}
					ps.points = append(ps.points, plotPoint{plotRate(s), q.v(get(s)), s.Stage, s.Trusted})
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
	perStage := func(title, metric string, kind panelKind, suffix string, v func(*StageReport) float64) panel {
		p := panel{title: title, metric: metric, kind: kind}
		for i, t := range targets {
			ps := plotSeries{name: t + " " + suffix, color: palette[i%len(palette)]}
			for _, s := range stages {
				if s.Target == t {
					ps.points = append(ps.points, plotPoint{plotRate(s), v(s), s.Stage, s.Trusted})
				}
			}
			p.series = append(p.series, ps)
		}
		return p
	}
	return []panel{
		latency("Time to first token", "ttft", func(s *StageReport) Quantiles { return s.TTFT }),
		latency("Time per output token", "tpot", func(s *StageReport) Quantiles { return s.TPOT }),
		latency("End-to-end latency", "e2e", func(s *StageReport) Quantiles { return s.E2E }),
		perStage("Served throughput", "rate", panelRate, "served", func(s *StageReport) float64 { return s.ServedRate }),
		perStage("Served output tokens/s", "tokens", panelTokens, "served output tokens/s", func(s *StageReport) float64 { return s.ServedOutputTokensPerSec }),
	}
}

// axis maps values of one dimension onto pixels, linearly or by their
// logarithm, between lo and hi; ticks are the values labelled.
type axis struct {
	log    bool
	lo, hi float64
	ticks  []float64
}

// at is v's position between a (at lo) and b (at hi).
func (ax axis) at(v, a, b float64) float64 {
	f := (v - ax.lo) / (ax.hi - ax.lo)
	if ax.log {
		f = math.Log(v/ax.lo) / math.Log(ax.hi/ax.lo)
	}
	return a + (b-a)*f
}

// finite is the finite values of vs above floor.
func finite(floor float64, vs ...float64) []float64 {
	var out []float64
	for _, v := range vs {
		if v > floor && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

// niceStep is a 1, 2, 2.5 or 5 times a power of ten step near span/n.
func niceStep(span float64, n int) float64 {
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// linearAxis spans vs (and from, when it is not NaN: 0 for a quantity)
// with about n round ticks, from the tick at or below the least to the
// one at or above the most, not from 0 unless asked.
func linearAxis(vs []float64, from float64, n int) axis {
	if !math.IsNaN(from) {
		vs = append(vs, from)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	switch {
	case len(vs) == 0:
		lo, hi = 0, 1
	case hi-lo <= 1e-9*math.Max(1, math.Abs(hi)): // one value: ±50% of it
		d := math.Max(math.Abs(hi)/2, 0.5)
		lo, hi = lo-d, hi+d
		if !math.IsNaN(from) || (lo < 0 && vs[0] >= 0) {
			lo = math.Max(lo, 0)
		}
	}
	step := niceStep(hi-lo, n)
	a := axis{lo: math.Floor(lo/step+1e-9) * step, hi: math.Ceil(hi/step-1e-9) * step}
	for i := 0; ; i++ {
		v := a.lo + float64(i)*step
		if v > a.hi+step*1e-9 {
			break
		}
		a.ticks = append(a.ticks, math.Round(v/step)*step)
	}
	return a
}

// logAxis spans vs (all positive) on a logarithmic scale from the 1-2-5
// value at or below the least divided by pad to the one at or above the
// most times pad; the ticks are the 1-2-5 values between (only powers of
// ten over more than four decades, and 1-9 steps under one).
func logAxis(vs []float64, pad float64) axis {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(vs) == 0 {
		lo, hi = 0.001, 1
	}
	lo, hi = niceBelow(lo/pad), niceAbove(hi*pad)
	a := axis{log: true, lo: lo, hi: hi}
	mantissas := []float64{1, 2, 5}
	switch decades := math.Log10(hi / lo); {
	case decades > 4:
		mantissas = []float64{1}
	case decades < 1:
		mantissas = []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	}
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range mantissas {
			v := roundSig(m * math.Pow(10, e))
			if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				a.ticks = append(a.ticks, v)
			}
		}
	}
	return a
}

// roundSig rounds v to 12 significant digits (0.1*3 is 0.3).
func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return f
}

// niceBelow is the largest 1, 2 or 5 times a power of ten at or below v;
// niceAbove the smallest at or above.
func niceBelow(v float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if m*mag <= v*(1+1e-9) {
			return roundSig(m * mag)
		}
	}
	return roundSig(mag / 2)
}

func niceAbove(v float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= v*(1-1e-9) {
			return roundSig(m * mag)
		}
	}
	return roundSig(10 * mag)
}

func fmtTick(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-0" {
		return "0"
	}
	return s
}

// fmtTickSeconds labels a latency tick with its own unit: 500µs, 20ms, 2s.
func fmtTickSeconds(v float64) string {
	switch {
	case v < 1e-3:
		return fmtTick(roundSig(v*1e6)) + "µs"
	case v < 1:
		return fmtTick(roundSig(v*1e3)) + "ms"
	}
	return fmtTick(v) + "s"
}

// fmtTickCount labels a count tick: 1500, 20k, 1.5M.
func fmtTickCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmtTick(roundSig(v/1e6)) + "M"
	case v >= 1e4:
		return fmtTick(roundSig(v/1e3)) + "k"
	}
	return fmtTick(v)
}

// wrap breaks s at spaces into lines that fit, the lines after the first
// indented by indent spaces; a word longer than a line is cut.
func wrap(s string, fits func(string) bool, indent int) []string {
	pad := strings.Repeat(" ", indent)
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		prefix := ""
		if len(lines) > 0 {
			prefix = pad
		}
		if line != "" && fits(prefix+line+" "+w) {
			line += " " + w
			continue
		}
		if line != "" {
			lines = append(lines, prefix+line)
			prefix = pad
		}
		line = w
		for rs := []rune(line); !fits(prefix + line); rs = []rune(line) {
			n := len(rs) - 1
			for n > 1 && !fits(prefix+string(rs[:n])) {
				n--
			}
			lines = append(lines, prefix+string(rs[:n]))
			prefix = pad
			line = string(rs[n:])
		}
	}
	if line != "" {
		if len(lines) > 0 {
			line = pad + line
		}
		lines = append(lines, line)
	}
	return lines
}

// untrustedNote is the note on the stages the verdict did not trust: a
// line per stage and reason, the targets that share it named together,
// in the verdict's words.
func (r *Report) untrustedNote() []string {
	type key struct {
		stage int
		why   string
	}
	var order []key
	targets := map[key][]string{}
	for _, s := range r.Stages {
		if s.Trusted {
			continue
		}
		why := strings.Join(s.Reasons, "; ")
		if why == "" {
			why = "no reason recorded"
		}
		k := key{s.Stage, why}
		if _, ok := targets[k]; !ok {
			order = append(order, k)
		}
		targets[k] = append(targets[k], s.Target)
	}
	if len(order) == 0 {
		return nil
	}
	lines := []string{"Not trusted (hollow markers; bench compare gives them no verdict), in the verdict's words:"}
	for _, k := range order {
		lines = append(lines, fmt.Sprintf("- stage %d %s: %s", k.stage, strings.Join(targets[k], ", "), k.why))
	}
	return lines
}

// layout builds the figure of the report.
func (r *Report) layout() *figure {
	const (
		top, panelW, panelH = 40.0, 480.0, 250.0
		ml, mr, mt, mb      = 64.0, 16.0, 28.0, 44.0
		noteX, lineH        = 20.0, 16.0
	)
	// The note under the panels, wrapped to the picture's width.
	// A line fits when it does at 0.6 em a character (the SVG's
	// monospace) and in the PNG's face.
	face := plotFace()
	defer face.Close()
	fits := func(s string) bool {
		w := plotWidth - 2*noteX
		return float64(len([]rune(s)))*plotCharWidth <= w && float64(font.MeasureString(face, s).Ceil()) <= w
	}
	var note []string
	for _, l := range r.untrustedNote() {
		note = append(note, wrap(l, fits, 4)...)
	}
	noteTop := top + 3*panelH + 8
	height := int(math.Ceil(noteTop + lineH*float64(len(note)) + 8))
	f := &figure{w: plotWidth, h: height}
	f.add(item{kind: kindRect, pts: []pt{{0, 0}, {plotWidth, float64(height)}}, color: colWhite, fill: true})
	f.text(plotWidth/2, 22, "llmprobe bench: latency and throughput against achieved load", "middle", colBlack)

	var rates []float64
	for _, s := range r.Stages {
		rates = append(rates, plotRate(s))
	}
	rates = finite(math.Inf(-1), rates...)
	// The offered rate is logarithmic when the sweep spans a factor of
	// 8 or more (a doubling search), else linear over its range.
	xaxis := linearAxis(rates, math.NaN(), 5)
	if pos := finite(0, rates...); len(pos) == len(rates) && len(pos) > 0 && slices.Max(pos) >= 8*slices.Min(pos) {
		xaxis = logAxis(pos, 1.05)
	}
	xlabel := "achieved rate (req/s sent)"
	if xaxis.log {
		xlabel = "achieved rate (req/s sent, log scale)"
	}
	for i, p := range r.panels() {
		ox, oy := float64(i%2)*panelW, top+float64(i/2)*panelH
		x0, x1 := ox+ml, ox+panelW-mr
		y0, y1 := oy+panelH-mb, oy+mt // y0 is the bottom
		var vs []float64
		for _, s := range p.series {
			for _, q := range s.points {
				vs = append(vs, q.y)
			}
		}
		var yaxis axis
		unit, label := "", fmtTick
		switch p.kind {
		case panelLatency:
			for _, b := range p.bounds {
				vs = append(vs, b.Seconds)
			}
			yaxis, unit, label = logAxis(finite(0, vs...), 1.15), "log scale", fmtTickSeconds
		case panelRate:
			vs = append(vs, rates...)
			if xaxis.log {
				yaxis = logAxis(finite(0, vs...), 1.05)
			} else {
				yaxis = linearAxis(finite(math.Inf(-1), vs...), math.NaN(), 5)
			}
			unit = "req/s"
		case panelTokens:
			yaxis, unit, label = linearAxis(finite(math.Inf(-1), vs...), 0, 5), "tokens/s", fmtTickCount
		}
		X := func(v float64) float64 { return xaxis.at(v, x0, x1) }
		Y := func(v float64) float64 { return yaxis.at(v, y0, y1) }
		shown := func(v float64) bool {
			return !math.IsNaN(v) && !math.IsInf(v, 0) && (!yaxis.log || v > 0)
		}

		f.text((x0+x1)/2, oy+16, p.title, "middle", colBlack)
		for _, t := range yaxis.ticks {
			y := Y(t)
			f.line(colGrid, 1, false, pt{x0, y}, pt{x1, y})
			f.add(item{kind: kindText, pts: []pt{{x0 - 6, y + 4}}, text: label(t), anchor: "end", color: colBlack,
				class: "tick", panel: p.metric, axis: "y", value: t})
		}
		for _, t := range xaxis.ticks {
			x := X(t)
			f.line(colGrid, 1, false, pt{x, y0}, pt{x, y1})
			f.add(item{kind: kindText, pts: []pt{{x, y0 + 16}}, text: fmtTick(t), anchor: "middle", color: colBlack,
				class: "tick", panel: p.metric, axis: "x", value: t})
		}
		f.line(colBlack, 1, false, pt{x0, y1}, pt{x0, y0}, pt{x1, y0})
		f.text(x0-ml+8, y1-13, unit, "start", colGrey)
		f.text((x0+x1)/2, y0+34, xlabel, "middle", colBlack)
		if p.kind == panelRate { // served = sent, where both axes have it
			a, b := math.Max(xaxis.lo, yaxis.lo), math.Min(xaxis.hi, yaxis.hi)
			if a < b {
				f.line(colGrey, 1, true, pt{X(a), Y(a)}, pt{X(b), Y(b)})
			}
		}
		for _, b := range p.bounds {
			if !shown(b.Seconds) {
				continue
			}
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
				if shown(q.y) {
					line = append(line, pt{X(q.x), Y(q.y)})
				}
			}
			if len(line) > 1 {
				f.add(item{kind: kindLine, pts: line, color: s.color, width: 2, dash: s.dash, series: s.name})
			}
			for _, q := range s.points {
				if shown(q.y) {
					f.add(item{kind: kindMarker, pts: []pt{{X(q.x), Y(q.y)}}, color: s.color, hollow: !q.trusted,
						series: s.name, stage: q.stage, trusted: q.trusted})
				}
			}
		}
	}

	// The legend, in the sixth cell: a colour per target on the left, the
	// line styles and markers on the right.
	lx, ly := panelW+40, top+2*panelH+mt
	for i, t := range r.plotTargets() {
		if i >= 10 {
			f.text(lx, ly+4, fmt.Sprintf("and %d more", len(r.plotTargets())-i), "start", colBlack)
			break
		}
		c := palette[i%len(palette)]
		f.line(c, 2, false, pt{lx, ly}, pt{lx + 24, ly})
		f.add(item{kind: kindMarker, pts: []pt{{lx + 12, ly}}, color: c})
		name := t
		if rs := []rune(name); len(rs) > 22 {
			name = string(rs[:21]) + "…"
		}
		f.text(lx+30, ly+4, name, "start", colBlack)
		ly += 20
	}
	lx, ly = panelW+250, top+2*panelH+mt
	legend := func(draw func(x, y float64), text string) {
		draw(lx, ly)
		f.text(lx+30, ly+4, text, "start", colBlack)
		ly += 20
	}
	legend(func(x, y float64) { f.line(colBlack, 2, false, pt{x, y}, pt{x + 24, y}) }, "p50")
	legend(func(x, y float64) { f.line(colBlack, 2, true, pt{x, y}, pt{x + 24, y}) }, "p99")
	legend(func(x, y float64) { f.line(colGrey, 1, true, pt{x, y}, pt{x + 24, y}) }, "served = sent")
	if len(r.SLOBounds) > 0 {
		legend(func(x, y float64) { f.line(colSLO, 1.5, true, pt{x, y}, pt{x + 24, y}) }, "SLO bound")
	}
	legend(func(x, y float64) { f.add(item{kind: kindMarker, pts: []pt{{x + 12, y}}, color: colBlack}) }, "trusted")
	legend(func(x, y float64) {
		f.add(item{kind: kindMarker, pts: []pt{{x + 12, y}}, color: colBlack, hollow: true})
	}, "not trusted")

	for i, l := range note {
		f.add(item{kind: kindText, pts: []pt{{noteX, noteTop + lineH*float64(i+1) - 4}}, text: l, anchor: "start", color: colSLO, class: "note"})
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
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="%d">`+"\n", f.w, f.h, f.w, f.h, plotFontSize)
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
			attrs := ""
			switch it.class {
			case "tick":
				attrs = fmt.Sprintf(` class="tick" data-panel="%s" data-axis="%s" data-value="%s"`, it.panel, it.axis, strconv.FormatFloat(it.value, 'g', -1, 64))
			case "note":
				attrs = ` class="note" xml:space="preserve"`
			}
			fmt.Fprintf(b, `<text%s x="%s" y="%s" text-anchor="%s" fill="%s">%s</text>`+"\n",
				attrs, num(it.pts[0].x), num(it.pts[0].y), it.anchor, hex(it.color), xmlEscape(it.text))
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
