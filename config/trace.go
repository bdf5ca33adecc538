// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/tracefile"
)

// Trace files: a class that mirrors a trace (from_trace) and an arrival
// process that follows a trace's rate curve (process: trace_shape). Both
// read the file once per load, streamed, into a bounded summary; a missing
// or bad file is a configuration error (file:line of the trace where a
// line is bad), so a reload with one keeps the running configuration.

// Trace defaults and bounds.
const (
	DefaultTraceBlockSize  = 512     // Mooncake's hash_ids blocks
	DefaultTraceMaxRecords = 100_000 // records a from_trace class keeps
	MaxTraceMaxRecords     = 1_000_000
	MaxTraceBlockSize      = 1 << 20
	// MaxTraceRecordsRead bounds the records a load reads from one file
	// (about a GiB of Mooncake JSONL); beyond it the load fails rather
	// than block a reload for minutes.
	MaxTraceRecordsRead = 20_000_000
	// MaxTraceHashIDs bounds the hash ids a from_trace sample holds, its
	// records' own and those synthesised for sessions' turns without any
	// (8 bytes each: 8 MiB): more than twice a whole published Mooncake
	// trace's (the largest, 23,608 records of 512-token blocks, holds
	// about 400,000). A trace of finer blocks needs a smaller max_records.
	MaxTraceHashIDs = 1 << 20
	// TraceShapeBins is the number of bins of a trace_shape rate curve
	// over its period (hourly bins for a 24h period).
	TraceShapeBins = 24
	// MaxTraceShapeBins bounds trace_shape.bin: period/bin bins.
	MaxTraceShapeBins = 10_000
)

// TraceFormats are the values of a trace's format.
var TraceFormats = []string{
	string(tracefile.Auto), string(tracefile.Mooncake), string(tracefile.Azure),
	string(tracefile.BurstGPT), string(tracefile.LLMProbe), string(tracefile.AccessLog),
}

// FromTrace makes a class mirror a trace: each request is one record of
// the trace, drawn uniformly from a sample of at most MaxRecords records
// taken at load (so prompt and output lengths stay joint), its hash_ids
// blocks sent as shared synthetic text; a trace with sessions is sampled
// by whole sessions, each replayed as a conversation whose turns follow
// in order.
type FromTrace struct {
	File       string `yaml:"file"`
	Format     string `yaml:"format"`
	BlockSize  int    `yaml:"block_size"`
	MaxRecords int    `yaml:"max_records"`

	sample *TraceSample
	dir    string
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (f *FromTrace) UnmarshalYAML(unmarshal func(any) error) error {
	*f = FromTrace{Format: string(tracefile.Auto), BlockSize: DefaultTraceBlockSize, MaxRecords: DefaultTraceMaxRecords}
	type plain FromTrace
	return decodePlain(unmarshal, (*plain)(f))
}

// Sample is what the class draws from: nil until the configuration was
// loaded and validated.
func (f *FromTrace) Sample() *TraceSample { return f.sample }

// TraceSample is the sample of a trace a from_trace class draws from.
type TraceSample struct {
	File      string // as resolved
	Format    tracefile.Format
	BlockSize int
	// Sessions are the sampled units: a single record each when the
	// trace has no sessions, else a whole session's turns in order.
	Sessions [][]tracefile.Record
	// HasSessions: the trace names sessions; its units are replayed as
	// conversations.
	HasSessions bool
	Records     int // records in Sessions
	Read        int // records the file has
	// Reuse is the trace's own prefix reuse over the sample: Σ tokens of
	// the leading blocks whose hash ids an earlier sampled record (in
	// file order) already had / Σ prompt tokens, as an unbounded prefix
	// cache would serve them.
	Reuse float64
}

// readTraceSample reads path and keeps a uniform sample of its units
// (records, or whole sessions) of at most maxRecords records: bottom-k
// sampling by a pseudo-random priority per unit (a session's from its
// id), so memory is bounded by maxRecords whatever the file's size and
// the sample is the same at every load of the same file.
func readTraceSample(path string, format tracefile.Format, blockSize, maxRecords int) (*TraceSample, error) {
	rd, err := tracefile.Open(path, tracefile.Options{Format: format, BlockSize: blockSize})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	s := &TraceSample{File: path, Format: rd.Format(), BlockSize: rd.BlockSize()}
	rng := rand.New(rand.NewPCG(0x7472616365, 0x73616d706c65))
	units := &unitHeap{}
	bySession := map[string]*sampleUnit{}
	threshold := uint64(math.MaxUint64) // units at or above it are out
	kept := 0
	held := 0            // hash ids of the kept records, given or to be synthesised
	synthesised := false // the trace has session turns without hash ids
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if s.Read++; s.Read > MaxTraceRecordsRead {
			return nil, fmt.Errorf("%s: more than %d records (cut the trace, or summarise it with llmprobe fit)", path, MaxTraceRecordsRead)
		}
		ids := len(rec.HashIDs)
		if rec.Session != "" && ids == 0 {
			// The history's blocks sessionBlocks will give it.
			if ids = sessionBlockCount(rec.PromptTokens, s.BlockSize); ids > tracefile.MaxHashIDs {
				return nil, &tracefile.LineError{File: path, Line: rec.Line, Field: rd.PromptField(),
					Err: fmt.Errorf("a session's turn of %d tokens without hash_ids takes %d blocks of block_size %d for its history, more than the %d a record may have: raise block_size",
						rec.PromptTokens, ids, s.BlockSize, tracefile.MaxHashIDs)}
			}
			synthesised = true
		}
		var u *sampleUnit
		if rec.Session != "" {
			s.HasSessions = true
			u = bySession[rec.Session]
			if u == nil {
				h := fnv.New64a()
				h.Write([]byte(rec.Session))
				prio := splitmix(h.Sum64())
				if prio >= threshold {
					continue
				}
				u = &sampleUnit{prio: prio, session: rec.Session, first: s.Read}
				bySession[rec.Session] = u
				heap.Push(units, u)
			}
			if len(u.recs) >= maxRecords {
				continue // a session longer than the sample: its first turns
			}
		} else {
			prio := rng.Uint64()
			if prio >= threshold {
				continue
			}
			u = &sampleUnit{prio: prio, first: s.Read}
			heap.Push(units, u)
		}
		if u.session != "" {
			rec.Session = u.session // one string for the session's records
		}
		u.recs = append(u.recs, rec)
		u.ids += ids
		kept++
		held += ids
		for kept > maxRecords {
			out := heap.Pop(units).(*sampleUnit)
			threshold = out.prio
			kept -= len(out.recs)
			held -= out.ids
			if out.session != "" {
				delete(bySession, out.session) // its later turns stay out: prio >= threshold
			}
		}
		if held > MaxTraceHashIDs {
			field, raise := "hash_ids", ""
			if len(rec.HashIDs) == 0 {
				field = rd.PromptField()
			}
			if synthesised {
				raise = fmt.Sprintf(", or raise block_size (%d)", s.BlockSize)
			}
			return nil, &tracefile.LineError{File: path, Line: rec.Line, Field: field,
				Err: fmt.Errorf("the sample's records hold %d hash ids with this one's, more than the %d (%s) a from_trace sample may: lower max_records (%d)%s",
					held, MaxTraceHashIDs, bounded.Size(MaxTraceHashIDs*8), maxRecords, raise)}
		}
	}
	if kept == 0 {
		return nil, fmt.Errorf("%s: no records", path)
	}
	all := []*sampleUnit(*units)
	slices.SortFunc(all, func(a, b *sampleUnit) int { return a.first - b.first })
	s.Sessions = make([][]tracefile.Record, len(all))
	for i, u := range all {
		if u.session != "" {
			slices.SortStableFunc(u.recs, func(a, b tracefile.Record) int { return a.Turn - b.Turn })
			sessionBlocks(u, s.BlockSize)
		}
		s.Sessions[i] = u.recs
		s.Records += len(u.recs)
	}
	s.Reuse = traceReuse(s.Sessions, s.BlockSize)
	return s, nil
}

// sessionBlocks gives the turns of a session that have no hash ids ids
// of their session: block j of every such turn is the session's block j,
// so that a turn's prompt starts with the previous turn's (its history),
// as the conversation's prefix cache would see it.
func sessionBlocks(u *sampleUnit, blockSize int) {
	h := fnv.New64a()
	h.Write([]byte(u.session))
	base := h.Sum64()
	for i := range u.recs {
		rec := &u.recs[i]
		if len(rec.HashIDs) > 0 {
			continue
		}
		ids := make([]uint64, sessionBlockCount(rec.PromptTokens, blockSize))
		for j := range ids {
			ids[j] = splitmix(base ^ splitmix(uint64(j)+0x73657373696f6e))
		}
		rec.HashIDs = ids
	}
}

// sessionBlockCount is the number of blocks sessionBlocks gives a turn of
// prompt tokens.
func sessionBlockCount(prompt, blockSize int) int {
	return (max(prompt, 1) + blockSize - 1) / blockSize
}

// traceReuse is the prefix reuse the sample's hash ids imply with an
// unbounded cache: records in file order; a record's leading blocks that
// an earlier record had (by hash id) count min(block, remaining prompt)
// tokens each, up to its first new block.
func traceReuse(units [][]tracefile.Record, blockSize int) float64 {
	var recs []tracefile.Record
	for _, u := range units {
		recs = append(recs, u...)
	}
	slices.SortStableFunc(recs, func(a, b tracefile.Record) int { return a.Line - b.Line })
	seen := map[uint64]struct{}{}
	var hit, total float64
	for _, r := range recs {
		total += float64(max(r.PromptTokens, 1))
		leading := true
		for i, h := range r.HashIDs {
			if _, ok := seen[h]; ok && leading {
				hit += float64(max(0, min(blockSize, r.PromptTokens-i*blockSize)))
			} else {
				leading = false
			}
			seen[h] = struct{}{}
		}
	}
	if total == 0 {
		return 0
	}
	return hit / total
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

type sampleUnit struct {
	prio    uint64
	session string
	first   int // the file's record number of its first record
	recs    []tracefile.Record
	ids     int // the records' hash ids, given or to be synthesised
}

// unitHeap is a max-heap by priority: its top is the next unit out.
type unitHeap []*sampleUnit

func (h unitHeap) Len() int           { return len(h) }
func (h unitHeap) Less(i, j int) bool { return h[i].prio > h[j].prio }
func (h unitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *unitHeap) Push(x any)        { *h = append(*h, x.(*sampleUnit)) }
func (h *unitHeap) Pop() any {
	old := *h
	u := old[len(old)-1]
	*h = old[:len(old)-1]
	return u
}

// resolve returns file resolved against dir (the configuration's
// directory) when relative.
func resolve(dir, file string) string {
	if filepath.IsAbs(file) || dir == "" {
		return file
	}
	return filepath.Join(dir, file)
}

func validTraceFormat(f string) bool { return slices.Contains(TraceFormats, f) }

func (f *FromTrace) validate(errs *fieldErrors, path string) {
	ok := true
	if f.File == "" {
		errs.add(path+".file", "required: the trace file to mirror")
		ok = false
	}
	if !validTraceFormat(f.Format) {
		errs.add(path+".format", "must be one of %v, got %q", TraceFormats, f.Format)
		ok = false
	}
	if f.BlockSize < 1 || f.BlockSize > MaxTraceBlockSize {
		errs.add(path+".block_size", "must be from 1 to %d tokens, got %d", MaxTraceBlockSize, f.BlockSize)
		ok = false
	}
	if f.MaxRecords < 1 || f.MaxRecords > MaxTraceMaxRecords {
		errs.add(path+".max_records", "must be from 1 to %d, got %d", MaxTraceMaxRecords, f.MaxRecords)
		ok = false
	}
	if !ok {
		return
	}
	s, err := readTraceSample(resolve(f.dir, f.File), tracefile.Format(f.Format), f.BlockSize, f.MaxRecords)
	if err != nil {
		errs.add(path+".file", "%v", err)
		return
	}
	f.sample = s
}

// TraceShape is the trace an arrival process of kind trace_shape follows:
// its records' arrivals, folded over period and counted in bins of bin,
// give the rate curve, scaled so that its mean is the arrival's rate.
type TraceShape struct {
	File   string         `yaml:"file"`
	Format string         `yaml:"format"`
	Period model.Duration `yaml:"period"`
	// Bin is the width of the curve's bins; period/24 when unset.
	Bin model.Duration `yaml:"bin,omitempty"`

	curve []float64
	dir   string
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (t *TraceShape) UnmarshalYAML(unmarshal func(any) error) error {
	*t = TraceShape{Format: string(tracefile.Auto), Period: model.Duration(24 * time.Hour)}
	type plain TraceShape
	return decodePlain(unmarshal, (*plain)(t))
}

// Curve returns the relative rate of each bin (their mean is 1), bin i
// covering [i·bin, (i+1)·bin) of the period; nil before validation.
func (t *TraceShape) Curve() []float64 { return t.curve }

// BinWidth is the width of the curve's bins.
func (t *TraceShape) BinWidth() time.Duration {
	if t.Bin > 0 {
		return time.Duration(t.Bin)
	}
	return time.Duration(t.Period) / TraceShapeBins
}

func (t *TraceShape) validate(errs *fieldErrors, path string, rate float64) {
	ok := true
	if t.File == "" {
		errs.add(path+".file", "required: the trace whose rate curve to follow")
		ok = false
	}
	if !validTraceFormat(t.Format) {
		errs.add(path+".format", "must be one of %v, got %q", TraceFormats, t.Format)
		ok = false
	}
	period, bin := time.Duration(t.Period), t.BinWidth()
	switch {
	case period < time.Minute:
		errs.add(path+".period", "must be at least 1m, got %v", t.Period)
		ok = false
	case t.Bin != 0 && (bin < time.Second || bin > period):
		errs.add(path+".bin", "must be from 1s to the period (%v), got %v", t.Period, t.Bin)
		ok = false
	case period/bin > MaxTraceShapeBins:
		errs.add(path+".bin", "gives %d bins over %v; at most %d", period/bin, t.Period, MaxTraceShapeBins)
		ok = false
	}
	if !ok {
		return
	}
	curve, err := readTraceCurve(resolve(t.dir, t.File), tracefile.Format(t.Format), period, bin)
	if err != nil {
		errs.add(path+".file", "%v", err)
		return
	}
	peak := slices.Max(curve)
	if rate > 0 && rate*peak > MaxArrivalRate {
		errs.add(path+".file", "the curve's peak is %.3g× its mean: %.4g requests per second at rate %v, over the limit of %d", peak, rate*peak, rate, MaxArrivalRate)
		return
	}
	t.curve = curve
}

// readTraceCurve counts the trace's records in bins of the period (their
// offsets from the first record, folded over the period) and scales the
// counts to a mean of 1.
func readTraceCurve(path string, format tracefile.Format, period, bin time.Duration) ([]float64, error) {
	rd, err := tracefile.Open(path, tracefile.Options{Format: format})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	n := int((period + bin - 1) / bin)
	counts := make([]float64, n)
	total := 0
	var span time.Duration
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if total++; total > MaxTraceRecordsRead {
			return nil, fmt.Errorf("%s: more than %d records", path, MaxTraceRecordsRead)
		}
		span = max(span, rec.Offset)
		off := rec.Offset % period
		if off < 0 {
			off += period
		}
		counts[min(int(off/bin), n-1)]++
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: no records", path)
	}
	if span < period/2 {
		// Most of the period would have no arrivals at all.
		return nil, fmt.Errorf("%s spans %v, less than half of the period (%v): set period to the trace's span", path, span.Round(time.Second), model.Duration(period))
	}
	// The last bin may be shorter than bin: rates, not counts.
	mean := 0.0
	for i := range counts {
		w := bin
		if i == n-1 {
			w = period - time.Duration(n-1)*bin
		}
		counts[i] /= w.Seconds()
		mean += counts[i] * w.Seconds()
	}
	mean /= period.Seconds()
	for i := range counts {
		counts[i] /= mean
	}
	return counts, nil
}
