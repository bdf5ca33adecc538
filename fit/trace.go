// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/tracefile"
)

// Trace bounds: what reading a trace keeps, whatever the file's size.
const (
	// DefaultTraceSample is the size of the uniform reservoir of (prompt,
	// output) pairs the quantile tables and the rank correlation come from.
	DefaultTraceSample = 100_000
	// MaxTraceCacheBlocks bounds the LRU cache simulated for the reuse at
	// a given cache size.
	MaxTraceCacheBlocks = 1 << 20
	// maxExactBlocks distinct hash ids are remembered exactly; beyond,
	// a Bloom filter of bloomBits bits takes over (the reuse is then an
	// estimate, a little high by the filter's false-positive rate).
	maxExactBlocks = 1 << 18
	bloomBits      = 1 << 27 // 16 MiB
	bloomHashes    = 4
	// maxTraceSessions sessions are counted; the turns of later new
	// sessions are not (Sessions.Capped).
	maxTraceSessions = 1 << 20
	// maxRateBins bounds the rate curve: past it the bin width doubles.
	maxRateBins = 10_000
	// maxPrefixGroups bounds the distinct first blocks counted for the
	// prefix groups.
	maxPrefixGroups = 1 << 16
)

// Joint-histogram bins: GridBins log-spaced bins over [1, 10^8) tokens,
// ten per decade at the R10 preferred numbers (so 1, 2 and 5 are edges),
// after bin 0 which holds 0 tokens; the last bin also holds longer ones.
const (
	gridPerDecade = 10
	gridDecades   = 8
	GridBins      = 1 + gridPerDecade*gridDecades
)

var r10 = [gridPerDecade]float64{1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8}

// GridEdge returns the lower edge of joint-histogram bin i (0 for bin 0).
func GridEdge(i int) float64 {
	if i <= 0 {
		return 0
	}
	i--
	return r10[i%gridPerDecade] * math.Pow(10, float64(i/gridPerDecade))
}

// gridBin returns the bin of a token count.
func gridBin(v int) int {
	if v <= 0 {
		return 0
	}
	f := float64(v)
	d := 0
	for p := 10.0; f >= p && d < gridDecades-1; p *= 10 {
		d++
	}
	m := f / math.Pow(10, float64(d))
	k := 0
	for k+1 < gridPerDecade && m >= r10[k+1] {
		k++
	}
	if d == gridDecades-1 && m >= 10 {
		k = gridPerDecade - 1
	}
	return 1 + d*gridPerDecade + k
}

// TraceOptions configure how a trace is read.
type TraceOptions struct {
	// Format and BlockSize are the trace reader's (tracefile.Options).
	Format    tracefile.Format
	BlockSize int
	// CacheBlocks, when positive, also computes the reuse an LRU prefix
	// cache of that many blocks would see (at most MaxTraceCacheBlocks).
	CacheBlocks int
	// Bin is the width of the rate curve's bins (default 1h).
	Bin time.Duration
	// Sample is the reservoir size (default DefaultTraceSample).
	Sample int
}

// Joint is the joint picture of a trace: what a workload of marginal
// distributions loses.
type Joint struct {
	Format    tracefile.Format
	BlockSize int
	// Records is the number of records; Skipped the lines the reader
	// skipped (BurstGPT's failed requests, access-log lines without
	// counts).
	Records, Skipped int
	// Span is the offset of the latest record.
	Span time.Duration
	// Grid counts the records by (prompt bin, output bin), see GridEdge.
	Grid [GridBins][GridBins]int64
	// Spearman is the rank correlation of (prompt, output) over the
	// reservoir sample of SampleSize pairs (all of them when the trace
	// has at most that many records); NaN when a length is constant.
	Spearman   float64
	SampleSize int

	// HashIDs: the trace has hash_ids. Reuse is Σ tokens of the leading
	// blocks an earlier record already had / Σ prompt tokens (an
	// unbounded prefix cache; config's from_trace reuse is the same
	// ratio over its sample). ReuseApprox: there were more distinct
	// blocks than are kept exactly (DistinctBlocks, then estimated).
	HashIDs        bool
	Reuse          float64
	ReuseApprox    bool
	DistinctBlocks int64
	// CacheBlocks and CacheReuse: the same ratio with an LRU cache of
	// CacheBlocks blocks (0: not computed).
	CacheBlocks int
	CacheReuse  float64
	// Prefix is the shared-prefix block that implies Reuse on average:
	// Probability of the records hit at least one block, Tokens their
	// mean hit tokens, Groups the distinct first blocks seen at least
	// twice. Nil without a hit.
	Prefix *config.Prefix

	// Sessions are the trace's sessions (nil when it names none).
	Sessions *SessionStats

	// Bin is the width of the rate curve's bins; Rate[i] is the number
	// of records in [i·Bin, (i+1)·Bin) from the first record (the last
	// bin may be cut short by the span). PeakToMean is the highest rate
	// of a bin at least half covered over the mean rate (1 for a single
	// bin).
	Bin        time.Duration
	Rate       []int64
	PeakToMean float64
}

// SessionStats describe the trace's sessions (conversations).
type SessionStats struct {
	// Count sessions of Requests records; Turns is the distribution of
	// records per session; MultiTurn the share of records in sessions
	// of more than one turn.
	Count, Requests int
	Turns           *Lengths
	MultiTurn       float64
	// Capped: the trace has more than maxTraceSessions sessions; the
	// later new ones are not counted.
	Capped bool
}

// PeakRate returns the index and count of the busiest bin.
func (j *Joint) PeakRate() (int, int64) {
	best := 0
	for i, c := range j.Rate {
		if c > j.Rate[best] {
			best = i
		}
	}
	if len(j.Rate) == 0 {
		return 0, 0
	}
	return best, j.Rate[best]
}

// FromTrace reads the trace at path (any tracefile format, compressed or
// not) and fits its lengths, as FromAccessLog does, and its joint picture
// (Result.Trace). The trace is streamed: the memory it costs is bounded
// (a reservoir of pairs, fixed-size histograms, at most maxExactBlocks
// hash ids then a Bloom filter, at most maxTraceSessions sessions).
func FromTrace(ctx context.Context, path string, opts TraceOptions) (*Result, error) {
	if opts.CacheBlocks < 0 || opts.CacheBlocks > MaxTraceCacheBlocks {
		return nil, fmt.Errorf("cache blocks must be from 0 to %d, got %d", MaxTraceCacheBlocks, opts.CacheBlocks)
	}
	if opts.Bin == 0 {
		opts.Bin = time.Hour
	}
	if opts.Bin < time.Second {
		return nil, fmt.Errorf("rate curve bin must be at least 1s, got %v", opts.Bin)
	}
	if opts.Sample <= 0 {
		opts.Sample = DefaultTraceSample
	}
	rd, err := tracefile.OpenContext(ctx, path, tracefile.Options{Format: opts.Format, BlockSize: opts.BlockSize})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	res, err := readTrace(rd, path, opts)
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	return res, err
}

func readTrace(rd *tracefile.Reader, path string, opts TraceOptions) (*Result, error) {
	j := &Joint{Format: rd.Format(), BlockSize: rd.BlockSize(), Bin: opts.Bin, CacheBlocks: opts.CacheBlocks}
	bs := j.BlockSize
	rng := rand.New(rand.NewPCG(0x666974, 0x7472616365)) // the same sample at every run
	var (
		sampleP, sampleO []float64
		pSum, oSum       float64
		pMin, pMax       = math.Inf(1), math.Inf(-1)
		oMin, oMax       = math.Inf(1), math.Inf(-1)
		pZeros, oZeros   int
		seen             = newBlockSet()
		lru              *lruBlocks
		hitTok, totTok   float64
		lruHit           float64
		hitRecs          int
		firsts           = map[uint64]int{}
		sessions         map[string]int
		models           = map[string]int{}
	)
	if opts.CacheBlocks > 0 {
		lru = newLRU(opts.CacheBlocks)
	}
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // a *tracefile.LineError names file:line
		}
		j.Records++
		n := j.Records
		p, o := float64(rec.PromptTokens), float64(rec.OutputTokens)
		pSum, oSum = pSum+p, oSum+o
		pMin, pMax, oMin, oMax = min(pMin, p), max(pMax, p), min(oMin, o), max(oMax, o)
		if rec.PromptTokens == 0 {
			pZeros++
		}
		if rec.OutputTokens == 0 {
			oZeros++
		}
		// Reservoir sampling (algorithm R) of whole pairs.
		if len(sampleP) < opts.Sample {
			sampleP, sampleO = append(sampleP, p), append(sampleO, o)
		} else if k := rng.IntN(n); k < opts.Sample {
			sampleP[k], sampleO[k] = p, o
		}
		j.Grid[gridBin(rec.PromptTokens)][gridBin(rec.OutputTokens)]++
		j.Span = max(j.Span, rec.Offset)
		j.addRate(rec.Offset)
		if rec.Model != "" && (len(models) < 1000 || models[rec.Model] > 0) {
			models[rec.Model]++
		}

		totTok += float64(max(rec.PromptTokens, 1))
		if len(rec.HashIDs) > 0 {
			j.HashIDs = true
			hit := 0.0
			leading := true
			for i, h := range rec.HashIDs {
				tok := float64(max(0, min(bs, rec.PromptTokens-i*bs)))
				if leading && seen.has(h) {
					hit += tok
				} else {
					leading = false
				}
				seen.add(h)
			}
			if hit > 0 {
				hitTok += hit
				hitRecs++
			}
			if lru != nil {
				lruHit += lru.use(rec.HashIDs, rec.PromptTokens, bs)
			}
			f := rec.HashIDs[0]
			if _, ok := firsts[f]; ok || len(firsts) < maxPrefixGroups {
				firsts[f]++
			}
		}
		if rec.Session != "" {
			if sessions == nil {
				sessions = map[string]int{}
				j.Sessions = &SessionStats{}
			}
			if _, ok := sessions[rec.Session]; ok || len(sessions) < maxTraceSessions {
				sessions[rec.Session]++
				j.Sessions.Requests++
			} else {
				j.Sessions.Capped = true
			}
		}
	}
	j.Skipped = rd.Skipped()
	if j.Records == 0 {
		return nil, fmt.Errorf("%s: no records (%s format)", path, j.Format)
	}

	res := &Result{
		Source:     fmt.Sprintf("trace %s (%s)", path, j.Format),
		SourceKind: SourceTrace,
		Model:      mostFrequent(models),
		Trace:      j,
	}
	var err error
	if res.Prompt, err = fitSampled(sampleP, j.Records, pSum, pMin, pMax, pZeros); err != nil {
		return nil, fmt.Errorf("%s: prompt tokens: %w", path, err)
	}
	if res.Output, err = fitSampled(sampleO, j.Records, oSum, oMin, oMax, oZeros); err != nil {
		return nil, fmt.Errorf("%s: output tokens: %w", path, err)
	}
	res.Classes = []*Class{{Name: DefaultClassName, Weight: 1, Prompt: res.Prompt, Output: res.Output}}
	j.Spearman, j.SampleSize = Spearman(sampleP, sampleO), len(sampleP)

	if j.HashIDs {
		j.Reuse = hitTok / totTok
		j.ReuseApprox = seen.bloom != nil
		j.DistinctBlocks = seen.n
		if lru != nil {
			j.CacheReuse = lruHit / totTok
		}
		if hitRecs > 0 {
			groups := 0
			for _, c := range firsts {
				if c >= 2 {
					groups++
				}
			}
			j.Prefix = &config.Prefix{
				Groups:      max(groups, 1),
				Tokens:      max(1, int(math.Round(hitTok/float64(hitRecs)))),
				Probability: math.Round(float64(hitRecs)/float64(j.Records)*1e4) / 1e4,
			}
			res.Classes[0].Prefix = j.Prefix
		}
	}
	if s := j.Sessions; s != nil {
		turns := make([]float64, 0, len(sessions))
		multi := 0
		for _, c := range sessions {
			turns = append(turns, float64(c))
			if c > 1 {
				multi += c
			}
		}
		s.Count = len(sessions)
		s.MultiTurn = float64(multi) / float64(max(s.Requests, 1))
		if s.Turns, err = FitSamples(turns); err != nil {
			return nil, fmt.Errorf("%s: session turns: %w", path, err)
		}
	}
	j.PeakToMean = j.peakToMean()
	if j.Skipped > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d line(s) skipped by the %s reader", j.Skipped, j.Format))
	}
	return res, nil
}

// fitSampled fits lengths from a uniform sample of n observations whose
// sum, extremes and zeros are known exactly: quantiles, table and fit
// come from the sample, the rest is exact.
func fitSampled(sample []float64, n int, sum, lo, hi float64, zeros int) (*Lengths, error) {
	l, err := FitSamples(sample)
	if err != nil {
		return nil, err
	}
	l.Count, l.Mean, l.Min, l.Max, l.Zeros = float64(n), sum/float64(n), lo, hi, zeros
	return l, nil
}

// addRate counts an arrival in the rate curve, doubling the bin width
// when the curve would grow past maxRateBins.
func (j *Joint) addRate(off time.Duration) {
	i := 0
	if off > 0 {
		i = int(off / j.Bin)
	}
	for i >= maxRateBins {
		merged := make([]int64, (len(j.Rate)+1)/2)
		for k, c := range j.Rate {
			merged[k/2] += c
		}
		j.Rate, j.Bin = merged, 2*j.Bin
		i = int(off / j.Bin)
	}
	for len(j.Rate) <= i {
		j.Rate = append(j.Rate, 0)
	}
	j.Rate[i]++
}

// peakToMean is the highest rate of a bin covered at least half over the
// mean rate over the span.
func (j *Joint) peakToMean() float64 {
	if len(j.Rate) <= 1 || j.Span <= 0 {
		return 1
	}
	mean := float64(j.Records) / j.Span.Seconds()
	peak := 0.0
	for i, c := range j.Rate {
		covered := j.Bin
		if end := time.Duration(i+1) * j.Bin; end > j.Span {
			covered = j.Span - time.Duration(i)*j.Bin
		}
		if covered < j.Bin/2 {
			continue
		}
		peak = max(peak, float64(c)/covered.Seconds())
	}
	return peak / mean
}

// Spearman returns the rank correlation of x and y (average ranks for
// ties), NaN when either is constant or there are fewer than two pairs.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) || len(x) < 2 {
		return math.NaN()
	}
	rx, ry := ranks(x), ranks(y)
	mx, my := mean(rx), mean(ry)
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// ranks returns the 1-based ranks of v, ties sharing their average rank.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case v[a] < v[b]:
			return -1
		case v[a] > v[b]:
			return 1
		}
		return 0
	})
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		k := i
		for k+1 < len(idx) && v[idx[k+1]] == v[idx[i]] {
			k++
		}
		avg := float64(i+k)/2 + 1
		for m := i; m <= k; m++ {
			r[idx[m]] = avg
		}
		i = k + 1
	}
	return r
}

// blockSet remembers the hash ids seen: exactly up to maxExactBlocks,
// then in a Bloom filter.
type blockSet struct {
	exact map[uint64]struct{}
	bloom []uint64
	n     int64 // distinct ids added (estimated once in the filter)
}

// bloomBit is the k-th bit of h in the filter: fixed hashes, so that a
// trace's estimate is the same at every run.
func bloomBit(h uint64, k int) uint64 {
	x := h + uint64(k+1)*0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return (x ^ (x >> 31)) % bloomBits
}

func newBlockSet() *blockSet { return &blockSet{exact: map[uint64]struct{}{}} }

func (s *blockSet) has(h uint64) bool {
	if s.bloom == nil {
		_, ok := s.exact[h]
		return ok
	}
	for k := range bloomHashes {
		b := bloomBit(h, k)
		if s.bloom[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

func (s *blockSet) add(h uint64) {
	if s.bloom == nil {
		if _, ok := s.exact[h]; ok {
			return
		}
		if len(s.exact) < maxExactBlocks {
			s.exact[h] = struct{}{}
			s.n++
			return
		}
		s.bloom = make([]uint64, bloomBits/64)
		for x := range s.exact {
			s.setBits(x)
		}
		s.exact = nil
	}
	if !s.has(h) {
		s.n++
	}
	s.setBits(h)
}

func (s *blockSet) setBits(h uint64) {
	for k := range bloomHashes {
		b := bloomBit(h, k)
		s.bloom[b/64] |= 1 << (b % 64)
	}
}

// lruBlocks is a prefix cache of a fixed number of blocks, the least
// recently used evicted first.
type lruBlocks struct {
	cap   int
	order *list.List // front: most recent
	at    map[uint64]*list.Element
}

func newLRU(n int) *lruBlocks {
	return &lruBlocks{cap: n, order: list.New(), at: map[uint64]*list.Element{}}
}

// use looks up a request's blocks (its leading cached ones are hits),
// then caches all of them as most recent; it returns the hit tokens.
func (c *lruBlocks) use(ids []uint64, prompt, bs int) float64 {
	hit := 0.0
	leading := true
	for i, h := range ids {
		if _, ok := c.at[h]; ok && leading {
			hit += float64(max(0, min(bs, prompt-i*bs)))
		} else {
			leading = false
		}
	}
	for _, h := range ids {
		if e, ok := c.at[h]; ok {
			c.order.MoveToFront(e)
			continue
		}
		c.at[h] = c.order.PushFront(h)
		if c.order.Len() > c.cap {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.at, old.Value.(uint64))
		}
	}
	return hit
}
