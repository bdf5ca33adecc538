// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A server's exposition is read as a stream of lines, bounded: only the
// lines of the families bench reads (the names in Engines) are
// kept, each family's are parsed on their own with expfmt's text parser
// (which reads a whole input into one map of families: it cannot be fed a
// 31 MB page), and a family that is too large is left out with a reason.
// The rest of the page is passed over as it is read, whatever its size
// (up to serverMetricsMaxBytes) or the length of its lines.
const (
	// serverMetricsMaxLine bounds a line of a family bench reads: its
	// labels, so a label value, are shorter.
	serverMetricsMaxLine = 16 << 10
	// serverMetricsMaxSamples bounds the sample lines of a family bench
	// reads (a histogram's buckets, sum and count are lines each).
	serverMetricsMaxSamples = 10000
	// serverMetricsMaxKept bounds the lines kept of all the families bench
	// reads, in bytes.
	serverMetricsMaxKept = 4 << 20
	// expositionBuffer is the line reader's buffer; a longer line is
	// passed over in pieces.
	expositionBuffer = 64 << 10
)

// errTooLarge is a body over serverMetricsMaxBytes.
var errTooLarge = fmt.Errorf("body larger than %d bytes", serverMetricsMaxBytes)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readExposition reads a text exposition (at most serverMetricsMaxBytes)
// and returns the families of wanted it holds, and why each family of
// wanted that it holds but that was left out was.
func readExposition(body io.Reader, wanted map[string]bool) (map[string]*dto.MetricFamily, map[string]string, error) {
	in := &countingReader{r: io.LimitReader(body, serverMetricsMaxBytes+1)}
	br := bufio.NewReaderSize(in, expositionBuffer)
	kept := map[string]*bytes.Buffer{}
	samples := map[string]int{}
	dropped := map[string]string{}
	total := 0
	drop := func(fam, why string) {
		dropped[fam] = why
		if b := kept[fam]; b != nil {
			total -= b.Len()
			delete(kept, fam)
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if name, sample := lineFamily(line, wanted); name != nil && dropped[string(name)] == "" {
			fam := string(name)
			switch {
			case long || len(line) > serverMetricsMaxLine:
				drop(fam, fmt.Sprintf("a sample line longer than %d bytes (labels that long are not a metric's)", serverMetricsMaxLine))
			case sample && samples[fam] >= serverMetricsMaxSamples:
				drop(fam, fmt.Sprintf("more than %d samples", serverMetricsMaxSamples))
			case total+len(line)+1 > serverMetricsMaxKept:
				drop(fam, fmt.Sprintf("the families bench reads take more than %d bytes of the page", serverMetricsMaxKept))
			default:
				b := kept[fam]
				if b == nil {
					b = &bytes.Buffer{}
					kept[fam] = b
				}
				b.Write(line)
				if line[len(line)-1] != '\n' {
					b.WriteByte('\n')
				}
				total += len(line) + 1
				if sample {
					samples[fam]++
				}
			}
		}
		for errors.Is(err, bufio.ErrBufferFull) { // the rest of a long line
			_, err = br.ReadSlice('\n')
		}
		if in.n > serverMetricsMaxBytes {
			return nil, nil, errTooLarge
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, nil, err
		}
	}
	fams := map[string]*dto.MetricFamily{}
	for fam, b := range kept {
		p := expfmt.NewTextParser(model.UTF8Validation)
		got, err := p.TextToMetricFamilies(b)
		if err != nil {
			dropped[fam] = fmt.Sprintf("does not parse: %v", err)
			continue
		}
		for name, f := range got {
			if len(f.Metric) > 0 {
				fams[name] = f
			}
		}
	}
	return fams, dropped, nil
}

// histogramSuffixes end the sample names of a histogram's or summary's
// series.
var histogramSuffixes = [][]byte{[]byte("_bucket"), []byte("_sum"), []byte("_count")}

// lineFamily is the name of the family of wanted a line belongs to (nil
// for none): a "# TYPE NAME ..." comment of a wanted family (sample
// false), or a sample of it, NAME or NAME_bucket, _sum, _count (sample
// true). Other comments, HELP included, are not kept. It does not
// allocate: the name is a slice of line.
func lineFamily(line []byte, wanted map[string]bool) (fam []byte, sample bool) {
	line = bytes.TrimLeft(line, " \t")
	if len(line) == 0 {
		return nil, false
	}
	if line[0] == '#' {
		rest := bytes.TrimLeft(line[1:], " \t")
		if !bytes.HasPrefix(rest, []byte("TYPE")) {
			return nil, false
		}
		rest = rest[len("TYPE"):]
		if len(rest) == 0 || (rest[0] != ' ' && rest[0] != '\t') {
			return nil, false
		}
		rest = bytes.TrimLeft(rest, " \t")
		if name := rest[:tokenEnd(rest)]; wanted[string(name)] {
			return name, false
		}
		return nil, false
	}
	name := line[:tokenEnd(line)]
	if wanted[string(name)] {
		return name, true
	}
	for _, suf := range histogramSuffixes {
		if base, ok := bytes.CutSuffix(name, suf); ok && wanted[string(base)] {
			return base, true
		}
	}
	return nil, false
}

// tokenEnd is where a metric name at the start of b ends.
func tokenEnd(b []byte) int {
	if i := bytes.IndexAny(b, "{ \t\r\n"); i >= 0 {
		return i
	}
	return len(b)
}
