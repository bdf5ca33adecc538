// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The status page's timeline charts: inline SVG drawn on the server from
// a target's recent window, no script.

type svgChart struct {
	Title         string
	Width, Height int
	// The plot area.
	Left, Top, Right, Bottom float64
	XTicks, YTicks           []svgTick
	XLabel, YLabel           string
	Series                   []svgSeries
	Empty                    string // shown across the plot when there is nothing to draw
	chartScale
}

type svgTick struct {
	Pos   float64
	Label string
}

type svgSeries struct {
	Name     string
	Color    string
	Dashed   bool
	Segments []string // polyline points, split where data is missing
	Dots     []svgPoint
	LegendX  float64
}

type svgPoint struct{ X, Y float64 }

const (
	chartWidth  = 520
	chartHeight = 200
	chartLeft   = 64
	chartRight  = chartWidth - 14
	chartTop    = 28
	chartBottom = chartHeight - 36
)

// timelineCharts draws a target's requested vs achieved rate and its TTFT
// p50 and p99, one point per completed slot of the window.
func timelineCharts(target string, w WindowSnapshot) []svgChart {
	if len(w.Timeline) == 0 {
		return nil
	}
	n := len(w.Timeline)
	req := make([]float64, n)
	ach := make([]float64, n)
	p50 := make([]float64, n)
	p99 := make([]float64, n)
	for i, p := range w.Timeline {
		req[i], ach[i] = p.Requested, p.Achieved
		p50[i], p99[i] = math.NaN(), math.NaN()
		if p.TTFT.N > 0 {
			p50[i], p99[i] = p.TTFT.P50.Seconds(), p.TTFT.P99.Seconds()
		}
	}
	start := w.Timeline[0].Start
	end := w.Timeline[n-1].Start.Add(w.Slot)

	rate := newChart(target+": requested vs achieved rate", start, end, "requests per second", seriesMax(req, ach), func(v float64) string {
		return strconv.FormatFloat(v, 'g', 3, 64)
	})
	rate.add(w, "requested", "#1565c0", true, req)
	rate.add(w, "achieved", "#2e7d32", false, ach)

	ttft := newChart(target+": TTFT p50 and p99", start, end, "TTFT", seriesMax(p50, p99), func(v float64) string {
		return fmtDuration(time.Duration(v * float64(time.Second)))
	})
	ttft.add(w, "p50", "#6a1b9a", false, p50)
	ttft.add(w, "p99", "#c62828", false, p99)
	if allNaN(p99) {
		ttft.Empty = "no TTFT measured in the last " + windowSpan.String()
	}
	return []svgChart{rate, ttft}
}

func newChart(title string, start, end time.Time, ylabel string, top float64, fmtY func(float64) string) svgChart {
	c := svgChart{
		Title: title, Width: chartWidth, Height: chartHeight,
		Left: chartLeft, Top: chartTop, Right: chartRight, Bottom: chartBottom,
		XLabel: "time (10 s per point; now at the right)", YLabel: ylabel,
	}
	span := end.Sub(start)
	for t := start.Truncate(time.Minute).Add(time.Minute); !t.After(end); t = t.Add(time.Minute) {
		c.XTicks = append(c.XTicks, svgTick{Pos: c.Left + (c.Right-c.Left)*float64(t.Sub(start))/float64(span), Label: t.Format("15:04")})
	}
	ymax, step := niceScale(top)
	for v := 0.0; v <= ymax*(1+1e-9); v += step {
		c.YTicks = append(c.YTicks, svgTick{Pos: c.y(v, ymax), Label: fmtY(v)})
	}
	c.ymax = ymax
	c.span, c.start = span, start
	return c
}

// Layout state, not rendered.
type chartScale struct {
	ymax  float64
	span  time.Duration
	start time.Time
}

func (c *svgChart) y(v, ymax float64) float64 {
	return c.Bottom - (c.Bottom-c.Top)*v/ymax
}

func (c *svgChart) x(t time.Time) float64 {
	return c.Left + (c.Right-c.Left)*float64(t.Sub(c.start))/float64(c.span)
}

// add draws a series: a point per slot, at the slot's middle, or with
// dashed a step across each slot.
func (c *svgChart) add(w WindowSnapshot, name, color string, dashed bool, vs []float64) {
	s := svgSeries{Name: name, Color: color, Dashed: dashed, LegendX: c.Left + 8 + float64(len(c.Series))*120}
	var seg []string
	flush := func() {
		if len(seg) > 1 {
			s.Segments = append(s.Segments, strings.Join(seg, " "))
		}
		seg = seg[:0]
	}
	for i, v := range vs {
		if math.IsNaN(v) {
			flush()
			continue
		}
		y := c.y(math.Min(v, c.ymax), c.ymax)
		if dashed {
			// A setting (the requested rate): a step across the slot.
			for _, at := range []time.Time{w.Timeline[i].Start, w.Timeline[i].Start.Add(w.Slot)} {
				seg = append(seg, fmt.Sprintf("%.1f,%.1f", c.x(at), y))
			}
			continue
		}
		x := c.x(w.Timeline[i].Start.Add(w.Slot / 2))
		seg = append(seg, fmt.Sprintf("%.1f,%.1f", x, y))
		s.Dots = append(s.Dots, svgPoint{X: math.Round(x*10) / 10, Y: math.Round(y*10) / 10})
	}
	flush()
	c.Series = append(c.Series, s)
}

func seriesMax(vss ...[]float64) float64 {
	m := 0.0
	for _, vs := range vss {
		for _, v := range vs {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && v > m {
				m = v
			}
		}
	}
	return m
}

func allNaN(vs []float64) bool {
	for _, v := range vs {
		if !math.IsNaN(v) {
			return false
		}
	}
	return true
}

// niceScale returns an axis maximum ≥ top and a tick step (1, 2 or 5 ×
// 10^k) giving 2 to 5 intervals.
func niceScale(top float64) (ymax, step float64) {
	if !(top > 0) || math.IsInf(top, 0) {
		return 1, 0.25
	}
	raw := top / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return math.Ceil(top/step-1e-9) * step, step
}
