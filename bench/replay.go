// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/tracefile"
)

// A replay (bench --replay) sends a trace's records at their recorded
// offsets, open-loop, as one stage: every target walks the whole trace
// from the stage's start, each record planned at
//
//	start + (offset − Start) / TimeScale
//
// on the engine's absolute timeline (probe.Timeline), admitted, dropped
// and judged like any arrival (global.late_after, max_inflight, the
// verdicts). OpenReplay reads the file once before anything is sent: a
// bad line, a trace out of time order or an empty window is an error
// then, and the stage's planned length and offered rate are known; each
// target then streams the file again on its own (bounded memory).

// ReplayOptions say what of a trace to replay, and how fast.
type ReplayOptions struct {
	Path      string
	Format    tracefile.Format // "" or auto: detected
	BlockSize int              // tokens per hash id; 0: the format's (512)
	// TimeScale divides the trace's offsets: 2 replays twice as fast.
	// 0 means 1.
	TimeScale float64
	// Start skips the records before this offset of the trace; Duration,
	// when positive, ends the replay at Start + Duration of trace time.
	Start, Duration time.Duration
	// MaxRequests, when positive, replays at most that many records.
	MaxRequests int
}

// Replay is a trace checked by OpenReplay, ready to be replayed (one
// stage of Options.Replay).
type Replay struct {
	opts   ReplayOptions
	format tracefile.Format
	block  int
	// Of the window replayed: the records, the lines read up to its end,
	// those skipped before Start, the first and last offsets, and why it
	// ends where it does.
	records, read, skipped int
	first, last            time.Duration
	ended                  string
	// reordered counts the records behind the one before them in the
	// file (within the reader's tolerance, tracefile.Options.MaxDisorder),
	// planned at its instant instead; behind is the most one was behind.
	reordered int
	behind    time.Duration
	unusable  int // records the reader skipped (tracefile.Reader.Skipped)
}

// Why a replay's window ends (report.ReplayInfo.Ended).
const (
	ReplayEndTrace       = "the end of the trace"
	ReplayEndDuration    = "--replay.duration"
	ReplayEndMaxRequests = "--max-requests"
)

// OpenReplay reads the trace at opts.Path through to the end of the
// window to replay, checking every record: errors name the file and line.
func OpenReplay(ctx context.Context, opts ReplayOptions) (*Replay, error) {
	switch {
	case opts.TimeScale == 0:
		opts.TimeScale = 1
	case !(opts.TimeScale > 0) || math.IsInf(opts.TimeScale, 0):
		return nil, fmt.Errorf("time scale %v: want a positive factor (2 replays twice as fast)", opts.TimeScale)
	}
	if opts.Start < 0 || opts.Duration < 0 || opts.MaxRequests < 0 || opts.BlockSize < 0 {
		return nil, errors.New("replay start, duration, block size and request count must not be negative")
	}
	tr, err := tracefile.OpenContext(ctx, opts.Path, tracefile.Options{Format: opts.Format, BlockSize: opts.BlockSize})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	rp := &Replay{opts: opts, format: tr.Format(), block: tr.BlockSize(), ended: ReplayEndTrace}
	w := window{opts: &rp.opts}
	for {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rec, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rp.read++
		keep, end := w.take(&rec)
		if end != "" {
			rp.ended, rp.read = end, rp.read-1
			break
		}
		if !keep {
			rp.skipped++
			continue
		}
		if rp.records == 0 {
			rp.first = rec.Offset
		}
		rp.records++
		rp.last = rec.Offset
		rp.reordered, rp.behind = w.reordered, w.behind
		if rp.records == opts.MaxRequests {
			rp.ended = ReplayEndMaxRequests
			break
		}
	}
	rp.unusable = tr.Skipped()
	if rp.records == 0 {
		if rp.skipped > 0 {
			return nil, fmt.Errorf("%s: no record at or after --replay.start=%v (the trace's %d records end at %v)", opts.Path, opts.Start, rp.skipped, w.prev)
		}
		return nil, fmt.Errorf("%s: the trace holds no record", opts.Path)
	}
	return rp, nil
}

// window picks a replay's records out of a trace read in file order. A
// record behind the one before it (the reader tolerates a little
// disorder) is moved to that one's offset: a timeline never goes back.
type window struct {
	opts      *ReplayOptions
	prev      time.Duration
	taken     int
	reordered int
	behind    time.Duration
}

// take says whether rec is replayed, or why the window ended before it
// (end); it moves rec's offset forward when it is behind.
func (w *window) take(rec *tracefile.Record) (keep bool, end string) {
	if rec.Offset < w.prev {
		w.behind = max(w.behind, w.prev-rec.Offset)
		rec.Offset = w.prev
		if rec.Offset >= w.opts.Start {
			w.reordered++
		}
	}
	w.prev = rec.Offset
	if rec.Offset < w.opts.Start {
		return false, ""
	}
	if w.opts.Duration > 0 && rec.Offset >= w.opts.Start+w.opts.Duration {
		return false, ReplayEndDuration
	}
	if w.opts.MaxRequests > 0 && w.taken >= w.opts.MaxRequests {
		return false, ReplayEndMaxRequests
	}
	w.taken++
	return true, ""
}

// Records is the number of records replayed (to every target).
func (rp *Replay) Records() int { return rp.records }

// at is the planned offset of a record at trace offset off from the
// stage's start.
func (rp *Replay) at(off time.Duration) time.Duration {
	return time.Duration(math.Round(float64(off-rp.opts.Start) / rp.opts.TimeScale))
}

// PlannedWall is how long the replay's schedule takes: from the stage's
// start to the last record's planned instant.
func (rp *Replay) PlannedWall() time.Duration { return rp.at(rp.last) }

// TraceRate is the replayed records' mean rate in the trace's time
// (records over the span from the first to the last; 0 when they all
// share one instant); OfferedRate is that times the time scale.
func (rp *Replay) TraceRate() float64 {
	if span := rp.last - rp.first; span > 0 {
		return float64(rp.records) / span.Seconds()
	}
	return 0
}

func (rp *Replay) OfferedRate() float64 { return rp.TraceRate() * rp.opts.TimeScale }

func (rp *Replay) info() report.ReplayInfo {
	return report.ReplayInfo{
		File: rp.opts.Path, Format: string(rp.format), BlockSize: rp.block, TimeScale: rp.opts.TimeScale,
		Start: rp.opts.Start, Duration: rp.opts.Duration, MaxRequests: rp.opts.MaxRequests,
		RecordsRead: rp.read, Skipped: rp.skipped, Records: rp.records, Ended: rp.ended,
		Reordered: rp.reordered, Behind: rp.behind, Unusable: rp.unusable,
		TraceSpan: rp.last - rp.first, TraceRate: rp.TraceRate(), OfferedRate: rp.OfferedRate(),
		PlannedWall: rp.PlannedWall(),
	}
}

// replayRun is one stage's walk of a replay: a timeline per target.
type replayRun struct {
	rp      *Replay
	targets int
	ended   atomic.Int64
	done    chan struct{} // closed when every target's timeline ended

	mu        sync.Mutex
	timelines map[string]*replayTimeline
}

func (rp *Replay) run(targets int) *replayRun {
	return &replayRun{rp: rp, targets: targets, done: make(chan struct{}), timelines: map[string]*replayTimeline{}}
}

// open is probe.Options.Timelines: the target's walk of the trace.
func (rr *replayRun) open(target string) (probe.Timeline, error) {
	tr, err := tracefile.Open(rr.rp.opts.Path, tracefile.Options{Format: rr.rp.format, BlockSize: rr.rp.opts.BlockSize})
	if err != nil {
		return nil, err
	}
	t := &replayTimeline{run: rr, tr: tr, w: window{opts: &rr.rp.opts}}
	rr.mu.Lock()
	rr.timelines[target] = t
	rr.mu.Unlock()
	return t, nil
}

// close closes the readers still open (the stage was cut short).
func (rr *replayRun) close() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, t := range rr.timelines {
		t.finish(nil)
	}
}

// info is target's replay figures after the stage, wall its length.
func (rr *replayRun) info(target string, wall time.Duration, sent int) *report.ReplayInfo {
	ri := rr.rp.info()
	ri.Wall, ri.Sent = wall, sent
	rr.mu.Lock()
	t := rr.timelines[target]
	rr.mu.Unlock()
	if t != nil && t.err != nil {
		ri.Error = t.err.Error()
	}
	return &ri
}

// replayTimeline is one target's walk of the trace (probe.Timeline). Its
// runner's arrival loop is the only caller of Next; finish may also run
// once the loop stopped.
type replayTimeline struct {
	run   *replayRun
	tr    *tracefile.Reader
	w     window
	given int
	once  sync.Once
	err   error // what stopped the reading before the window's end
}

func (t *replayTimeline) Next() (time.Duration, tracefile.Record, error) {
	path := t.run.rp.opts.Path
	for t.given < t.run.rp.records {
		rec, err := t.tr.Next()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%s: the trace changed since it was checked: it ends after %d of %d records", path, t.given, t.run.rp.records)
		} else if err == nil {
			keep, end := t.w.take(&rec)
			switch {
			case end != "":
				err = fmt.Errorf("%s:%d: the trace changed since it was checked: its window ends after %d of %d records", path, rec.Line, t.given, t.run.rp.records)
			case !keep:
				continue
			default:
				t.given++
				return t.run.rp.at(rec.Offset), rec, nil
			}
		}
		t.finish(err)
		return 0, tracefile.Record{}, err
	}
	t.finish(nil)
	return 0, tracefile.Record{}, io.EOF
}

// finish ends the walk once: err is what stopped it early.
func (t *replayTimeline) finish(err error) {
	t.once.Do(func() {
		t.err = err
		_ = t.tr.Close()
		if t.run.ended.Add(1) == int64(t.run.targets) {
			close(t.run.done)
		}
	})
}

func (t *replayTimeline) BlockSize() int { return t.run.rp.block }
func (t *replayTimeline) Rate() float64  { return t.run.rp.OfferedRate() }
func (t *replayTimeline) String() string {
	return fmt.Sprintf("replay(%s, %s, ×%s)", t.run.rp.opts.Path, t.run.rp.format, strconv.FormatFloat(t.run.rp.opts.TimeScale, 'g', -1, 64))
}
