// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestPlotRateOrder: a ladder run out of rate order (4, then 1, then 2
// req/s requested) is drawn in rate order, every line's points left to
// right, each stage at the rate it achieved (3.6, 1.1, 2 req/s sent), and
// the throughput panel shows what the target served (2.5 req/s at the
// 3.6 req/s stage, past its capacity), not what was sent. Before, the
// lines joined the stages in run order (a zigzag), at their requested
// rates, and the throughput panel showed the sent rate, hiding the
// saturation.
func TestPlotRateOrder(t *testing.T) {
	r := &Report{}
	for i, st := range []struct{ req, achieved, served float64 }{{4, 3.6, 2.5}, {1, 1.1, 1.1}, {2, 2, 2}} {
		r.Stages = append(r.Stages, &StageReport{Stage: i + 1, Target: "sim", RequestedRate: st.req, AchievedRate: st.achieved,
			ServedRate: st.served, ServedOutputTokensPerSec: 10 * st.served, Trusted: true,
			TTFT: Quantiles{Count: 10, P50: 0.01 * st.req, P99: 0.02 * st.req}, TPOT: Quantiles{Count: 10, P50: 0.01, P99: 0.02},
			E2E: Quantiles{Count: 10, P50: 0.1 * st.req, P99: 0.2 * st.req}})
	}
	var buf bytes.Buffer
	if err := r.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	type tick struct{ v, pos float64 }
	ticks := map[string][]tick{}
	lines := map[string][]float64{}    // series → x of its line's points
	marks := map[string][][2]float64{} // series → (x, y) by stage - 1
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	var lastTick *tick
	var lastKey string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			a := map[string]string{}
			for _, at := range e.Attr {
				a[at.Name.Local] = at.Value
			}
			lastTick = nil
			switch {
			case e.Name.Local == "polyline" && a["class"] == "series":
				for p := range strings.FieldsSeq(a["points"]) {
					x, _, _ := strings.Cut(p, ",")
					v, _ := strconv.ParseFloat(x, 64)
					lines[a["data-series"]] = append(lines[a["data-series"]], v)
				}
			case e.Name.Local == "circle" && a["class"] == "point":
				stage, _ := strconv.Atoi(a["data-stage"])
				x, _ := strconv.ParseFloat(a["cx"], 64)
				y, _ := strconv.ParseFloat(a["cy"], 64)
				m := marks[a["data-series"]]
				for len(m) < stage {
					m = append(m, [2]float64{})
				}
				m[stage-1] = [2]float64{x, y}
				marks[a["data-series"]] = m
			case e.Name.Local == "text" && a["class"] == "tick":
				v, _ := strconv.ParseFloat(a["data-value"], 64)
				coord := "y"
				if a["data-axis"] == "x" {
					coord = "x"
				}
				pos, _ := strconv.ParseFloat(a[coord], 64)
				if coord == "y" {
					pos -= 4 // a y tick's text stands 4 px under its line
				}
				lastKey = a["data-panel"] + "/" + a["data-axis"]
				lastTick = &tick{v, pos}
				ticks[lastKey] = append(ticks[lastKey], *lastTick)
			}
		}
	}
	if len(lines) == 0 {
		t.Fatal("no lines drawn")
	}
	for name, xs := range lines {
		for i := 1; i < len(xs); i++ {
			if !(xs[i] > xs[i-1]) {
				t.Errorf("%s: the line runs %v, not left to right", name, xs)
				break
			}
		}
	}
	// value maps a pixel to its value by the axis' first two ticks (the
	// rate axes are linear here: the rates span less than a factor of 8).
	value := func(key string, pos float64) float64 {
		tk := ticks[key]
		if len(tk) < 2 {
			t.Fatalf("axis %s has %d ticks", key, len(tk))
		}
		return tk[0].v + (pos-tk[0].pos)*(tk[1].v-tk[0].v)/(tk[1].pos-tk[0].pos)
	}
	var rate string
	for name := range marks {
		if strings.HasPrefix(name, "sim ") && !strings.Contains(name, "TTFT") && !strings.Contains(name, "TPOT") &&
			!strings.Contains(name, "E2E") && !strings.Contains(name, "tokens") {
			rate = name
		}
	}
	m := marks[rate]
	if len(m) != 3 {
		t.Fatalf("throughput series %q has marks %v, want one per stage", rate, m)
	}
	for i, want := range []struct{ x, y float64 }{{3.6, 2.5}, {1.1, 1.1}, {2, 2}} {
		x, y := value("rate/x", m[i][0]), value("rate/y", m[i][1])
		if math.Abs(x-want.x) > 0.01 || math.Abs(y-want.y) > 0.01 {
			t.Errorf("stage %d drawn at (%.2f, %.2f) req/s, want (%.2f achieved, %.2f served)", i+1, x, y, want.x, want.y)
		}
	}
}
