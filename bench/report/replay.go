// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// ReplayInfo describes a replay stage (StageReport.Replay): the trace,
// the window replayed, the time scale and how the schedule went.
type ReplayInfo struct {
	File      string  `json:"file"`
	Format    string  `json:"format"`
	BlockSize int     `json:"block_size"`
	TimeScale float64 `json:"time_scale"`
	// Start is --replay.start, Duration --replay.duration (0: to the
	// end), MaxRequests --max-requests (0: none).
	Start       time.Duration `json:"start_ns"`
	Duration    time.Duration `json:"duration_ns,omitempty"`
	MaxRequests int           `json:"max_requests,omitempty"`
	// RecordsRead are the trace's records read up to the window's end,
	// Skipped those before Start, Records those replayed (planned for
	// the target; StageReport.Scheduled says how many came due, Sent how
	// many went out). Ended says why the window ends where it does.
	RecordsRead int    `json:"records_read"`
	Skipped     int    `json:"records_skipped"`
	Records     int    `json:"records"`
	Sent        int    `json:"sent"`
	Ended       string `json:"ended"`
	// Reordered counts the replayed records that were behind the record
	// before them in the file (within the reader's tolerance of
	// disorder), planned at that one's instant instead; Behind is the
	// most one was behind, in the trace's time.
	Reordered int           `json:"reordered,omitempty"`
	Behind    time.Duration `json:"behind_ns,omitempty"`
	// Unusable counts the records the reader skipped up to the window's
	// end (no output length, say: tracefile).
	Unusable int `json:"records_unusable,omitempty"`
	// TraceSpan is the replayed records' span in the trace (first to
	// last offset), TraceRate their mean rate in it (0: one instant),
	// OfferedRate that times the time scale.
	TraceSpan   time.Duration `json:"trace_span_ns"`
	TraceRate   float64       `json:"trace_rate"`
	OfferedRate float64       `json:"offered_rate"`
	// PlannedWall is the schedule's length (the stage's start to the last
	// record's planned instant), Wall how long it took to walk it.
	PlannedWall time.Duration `json:"planned_wall_ns"`
	Wall        time.Duration `json:"wall_ns"`
	// Error is what stopped the target's reading of the trace before the
	// window's end ("": nothing did).
	Error string `json:"error,omitempty"`
}

// describe is the replay in one line of the text report.
func (ri *ReplayInfo) describe() string {
	rate := "all at one instant"
	if ri.TraceRate > 0 {
		rate = fmt.Sprintf("%.3g req/s, offered %.3g req/s", ri.TraceRate, ri.OfferedRate)
	}
	s := fmt.Sprintf("%s (%s, %d-token blocks): %d records from %v (%d read, %d skipped before it), ended by %s; span %v at %s; time scale %s: planned %v, took %v; sent %d of %d",
		ri.File, ri.Format, ri.BlockSize, ri.Records, ri.Start, ri.RecordsRead, ri.Skipped, ri.Ended,
		ri.TraceSpan, rate, strconv.FormatFloat(ri.TimeScale, 'g', -1, 64),
		ri.PlannedWall.Round(time.Millisecond), ri.Wall.Round(time.Millisecond), ri.Sent, ri.Records)
	if ri.Unusable > 0 {
		s += fmt.Sprintf("; %d records the reader could not use were skipped", ri.Unusable)
	}
	if ri.Reordered > 0 {
		s += fmt.Sprintf("; %d records behind the one before them in the file (by up to %v) were planned at its instant", ri.Reordered, ri.Behind)
	}
	if ri.Error != "" {
		s += "; reading stopped: " + ri.Error
	}
	return s
}

// writeReplay writes the replay facts of the stages that replayed a
// trace, with the schedule's fidelity.
func writeReplay(w io.Writer, stages []*StageReport) {
	for _, s := range stages {
		if ri := s.Replay; ri != nil {
			fmt.Fprintf(w, "stage %d %s replay: %s; schedule lag p50 %s p99 %s max %s\n", s.Stage, s.Target, ri.describe(),
				fmtQ(s.Lag, s.Lag.P50), fmtQ(s.Lag, s.Lag.P99), fmtQ(s.Lag, s.Lag.Max))
		}
	}
}
