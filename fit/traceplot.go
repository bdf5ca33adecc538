// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"time"
)

// drawJoint draws the prompt x output 2-D histogram between x0 and x1: a
// cell per pair of log-spaced bins (GridEdge), its shade the log of its
// count.
func drawJoint(sc *scene, x0, x1 float64, j *Joint) {
	pLo, pHi, oLo, oHi := GridBins, -1, GridBins, -1
	var peak int64
	for p := range GridBins {
		for o := range GridBins {
			if n := j.Grid[p][o]; n > 0 {
				pLo, pHi, oLo, oHi = min(pLo, p), max(pHi, p), min(oLo, o), max(oHi, o)
				peak = max(peak, n)
			}
		}
	}
	sc.text((x0+x1)/2, panelTop-12, "prompt x output tokens", anchorMiddle, colBlack, true)
	if pHi < 0 {
		return
	}
	// Whole decades on both axes.
	pLo, oLo = decadeStart(pLo), decadeStart(oLo)
	pHi, oHi = decadeEnd(pHi), decadeEnd(oHi)
	cw := (x1 - x0) / float64(pHi-pLo+1)
	ch := (panelBottom - panelTop) / float64(oHi-oLo+1)
	for p := pLo; p <= pHi; p++ {
		for o := oLo; o <= oHi; o++ {
			n := j.Grid[p][o]
			if n == 0 {
				continue
			}
			xa := x0 + float64(p-pLo)*cw
			yb := panelBottom - float64(o-oLo)*ch
			sc.rect(xa, yb-ch, xa+cw, yb, shade(n, peak), "cell",
				[2]string{"data-count", strconv.FormatInt(n, 10)},
				[2]string{"data-prompt-lo", formatNumber(GridEdge(p))},
				[2]string{"data-output-lo", formatNumber(GridEdge(o))})
		}
	}
	// Ticks at the decades (and 0).
	for p := pLo; p <= pHi+1; p++ {
		if p == 0 || (p-1)%gridPerDecade == 0 {
			x := x0 + float64(p-pLo)*cw
			sc.line(x, panelBottom, x, panelBottom+5, colBlack, false)
			sc.text(x, panelBottom+18, formatNumber(GridEdge(p)), anchorMiddle, colBlack, false)
		}
	}
	for o := oLo; o <= oHi+1; o++ {
		if o == 0 || (o-1)%gridPerDecade == 0 {
			y := panelBottom - float64(o-oLo)*ch
			sc.line(x0-4, y, x0, y, colBlack, false)
			sc.text(x0-7, y+4, formatNumber(GridEdge(o)), anchorEnd, colBlack, false)
		}
	}
	sc.line(x0, panelBottom, x1, panelBottom, colBlack, false)
	sc.line(x0, panelTop, x0, panelBottom, colBlack, false)
	sc.text((x0+x1)/2, panelBottom+40, "prompt tokens (log scale) vs output tokens (log scale)", anchorMiddle, colBlack, false)
	sc.text(x0-40, panelTop-12, "output", anchorStart, colGrey, false)
	note := "Spearman " + spearmanShort(j)
	if j.HashIDs {
		note += fmt.Sprintf("  prefix reuse %.1f%%", 100*j.Reuse)
	}
	note += fmt.Sprintf("  darkest cell %d requests", peak)
	sc.text((x0+x1)/2, panelBottom+58, note, anchorMiddle, colGrey, false)
}

func spearmanShort(j *Joint) string {
	if math.IsNaN(j.Spearman) {
		return "-"
	}
	return fmt.Sprintf("%+.3f", j.Spearman)
}

// decadeStart and decadeEnd widen a bin range to whole decades (bin 0,
// zero tokens, stays its own column).
func decadeStart(i int) int {
	if i == 0 {
		return 0
	}
	return 1 + (i-1)/gridPerDecade*gridPerDecade
}

func decadeEnd(i int) int {
	if i == 0 {
		return 0
	}
	return min(GridBins-1, (i-1)/gridPerDecade*gridPerDecade+gridPerDecade)
}

// shade maps a count to a blue from light (1) to dark (peak), by log.
func shade(n, peak int64) color.RGBA {
	f := 1.0
	if peak > 1 {
		f = math.Log(float64(n)) / math.Log(float64(peak))
	}
	lerp := func(a, b uint8) uint8 { return uint8(math.Round(float64(a) + f*(float64(b)-float64(a)))) }
	return color.RGBA{lerp(0xc6, 0x08), lerp(0xdb, 0x30), lerp(0xef, 0x6b), 0xff}
}

// maxRateBars bounds the bars of the rate curve: more bins are merged.
const maxRateBars = 200

// drawRate draws the arrivals per bin over the trace's span.
func drawRate(sc *scene, x0, x1 float64, j *Joint) {
	f := (len(j.Rate) + maxRateBars - 1) / maxRateBars
	bars := make([]int64, (len(j.Rate)+f-1)/f)
	for i, c := range j.Rate {
		bars[i/f] += c
	}
	bin := time.Duration(f) * j.Bin
	peak := int64(1)
	for _, c := range bars {
		peak = max(peak, c)
	}
	sc.text((x0+x1)/2, panelTop-12, "arrivals per "+formatDuration(bin), anchorMiddle, colBlack, true)
	yOf := func(c float64) float64 { return panelBottom - c/float64(peak)*(panelBottom-panelTop) }
	for _, c := range []float64{0, float64(peak) / 2, float64(peak)} {
		y := yOf(c)
		sc.line(x0, y, x1, y, colGrid, false)
		sc.text(x0-7, y+4, formatNumber(math.Round(c)), anchorEnd, colBlack, false)
	}
	w := (x1 - x0) / float64(len(bars))
	for i, c := range bars {
		xa, xb := x0+float64(i)*w, x0+float64(i+1)*w
		if xb-xa > 2 {
			xa, xb = xa+0.5, xb-0.5
		}
		sc.rect(xa, yOf(float64(c)), xb, panelBottom, colPrompt, "rate",
			[2]string{"data-count", strconv.FormatInt(c, 10)},
			[2]string{"data-start", formatDuration(time.Duration(i) * bin)})
	}
	// Up to 6 labels along the span.
	step := max(1, (len(bars)+5)/6)
	for i := 0; i <= len(bars); i += step {
		x := x0 + float64(i)*w
		sc.line(x, panelBottom, x, panelBottom+5, colBlack, false)
		sc.text(x, panelBottom+18, "+"+formatDuration(time.Duration(i)*bin), anchorMiddle, colBlack, false)
	}
	sc.line(x0, panelBottom, x1, panelBottom, colBlack, false)
	sc.line(x0, panelTop, x0, panelBottom, colBlack, false)
	sc.text((x0+x1)/2, panelBottom+40, "time since the first record", anchorMiddle, colBlack, false)
	sc.text((x0+x1)/2, panelBottom+58, fmt.Sprintf("%d requests over %s, peak/mean rate %.2f", j.Records, formatSpan(j.Span), j.PeakToMean), anchorMiddle, colGrey, false)
}
