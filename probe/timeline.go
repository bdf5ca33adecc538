// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"math/rand/v2"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/tracefile"
)

// A Timeline is a finite arrival timeline that carries what each arrival
// sends: a trace's records at their planned offsets (bench --replay). A
// target given one (Options.Timelines) walks it in place of its arrival
// process and its workload's class sampler, on the same absolute
// timeline, admission (late_after, max_inflight) and verdicts as any
// arrival; its scheduling ends with the timeline.
type Timeline interface {
	// Next returns the next arrival: its planned offset from the target's
	// start (never before the previous one's) and the record it sends. An
	// error ends the timeline: io.EOF after the last record, any other
	// is the timeline's to report (its owner sees it first).
	Next() (time.Duration, tracefile.Record, error)
	// BlockSize is the number of prompt tokens per hash id of the
	// records (workload.Builder.FromRecord).
	BlockSize() int
	// Rate is the timeline's mean arrival rate (requests per second) and
	// String describes it, for the target's status.
	Rate() float64
	String() string
}

// TimelineClass is the class of the requests a Timeline sends: the
// target's model, body (extra_body) and the server's default sampling.
const TimelineClass = "replay"

// timelineWorkload is the workload of a target that walks a timeline:
// the one class its requests belong to, with the target's body members.
func timelineWorkload(t *config.Target) *workload.Workload {
	return (&workload.Workload{Classes: []*workload.Class{workload.RecordClass(TimelineClass)}}).ForTarget(t)
}

// replayed sends the request of a timeline's record.
func (r *runner) replayed(c *workload.Class, rec tracefile.Record, planned time.Time, seed uint64) {
	defer r.reqs.Done()
	rng := rand.New(rand.NewPCG(seed, ^seed))
	p := r.builder.FromRecord(c, rec, r.timeline.BlockSize(), rng)
	p.Res.TraceLine = rec.Line
	r.exchange(p, planned)
}
