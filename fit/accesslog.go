// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/tracefile"
)

// Default field paths, tried in order on every line; the first present
// one is used. They are the trace reader's (tracefile), whose line parser
// fit uses.
var (
	// DefaultPromptFields: vLLM-style logs, OpenAI chat/completions
	// usage, the Responses/Anthropic usage, OpenAI Batch API output, and
	// OpenTelemetry GenAI attributes.
	DefaultPromptFields = tracefile.DefaultPromptFields
	// DefaultCompletionFields mirror DefaultPromptFields.
	DefaultCompletionFields = tracefile.DefaultCompletionFields
	// DefaultCachedFields locate the prompt tokens served from the prefix
	// cache; they are reported, not fitted.
	DefaultCachedFields = tracefile.DefaultCachedFields
	// DefaultModelFields name the served model.
	DefaultModelFields = tracefile.DefaultModelFields
	// DefaultTimeFields hold the request time: an RFC 3339 string or a
	// Unix timestamp in seconds, milliseconds, microseconds or
	// nanoseconds.
	DefaultTimeFields = tracefile.DefaultTimeFields
)

// Skip reasons, the keys of LogStats.Skips.
const (
	SkipInvalidJSON     = tracefile.SkipInvalidJSON
	SkipNotObject       = tracefile.SkipNotObject
	SkipNoPrompt        = tracefile.SkipNoPrompt
	SkipNoCompletion    = tracefile.SkipNoCompletion
	SkipNotNumber       = tracefile.SkipNotNumber
	SkipNegative        = tracefile.SkipNegative
	SkipLineTooLong     = "line too long"
	maxSkippedLineNotes = 5
)

// maxLineBytes bounds one log line: lines that carry prompt text can be
// long, but not unbounded. A longer line is skipped. (A variable so that
// tests can lower it.)
var maxLineBytes = 64 << 20

// LogOptions configure how an access log is read. Empty fields take the
// defaults above.
type LogOptions struct {
	// PromptFields and CompletionFields are dotted paths to the token
	// counts ("usage.prompt_tokens"), tried in order. A path segment may
	// also match a key that itself contains dots ("gen_ai.usage.input_tokens").
	PromptFields     []string
	CompletionFields []string
	// CachedFields, ModelFields and TimeFields locate optional facts
	// reported alongside the fit.
	CachedFields []string
	ModelFields  []string
	TimeFields   []string
	// By, when set, is a field path whose value splits the requests into
	// classes (one per value, weighted by share), e.g. "model".
	By string
}

func (o *LogOptions) withDefaults() LogOptions {
	c := *o
	or := func(v, d []string) []string {
		if len(v) == 0 {
			return d
		}
		return v
	}
	c.PromptFields = or(c.PromptFields, DefaultPromptFields)
	c.CompletionFields = or(c.CompletionFields, DefaultCompletionFields)
	c.CachedFields = or(c.CachedFields, DefaultCachedFields)
	c.ModelFields = or(c.ModelFields, DefaultModelFields)
	c.TimeFields = or(c.TimeFields, DefaultTimeFields)
	return c
}

// LogStats describes how an access log was read.
type LogStats struct {
	// Lines is the number of non-blank lines.
	Lines int
	// Used is the number of lines whose token counts were taken.
	Used int
	// Skipped is Lines - Used; Skips breaks it down by reason.
	Skipped int
	Skips   map[string]int
	// FirstSkipped holds the numbers of the first few skipped lines.
	FirstSkipped []int
	// Cached and CachedPrompt are the cached prompt tokens and the prompt
	// tokens of the used lines that report a cached count.
	Cached, CachedPrompt float64
	CachedLines          int
}

// record is one used line.
type record struct {
	prompt, completion float64
	group              string
}

// FromAccessLog reads the access log at path ("-" for standard input;
// gzip-compressed content is recognised by its magic number) and fits its
// lengths. Errors name the file. The log is streamed, of any size (the
// memory it costs is that of its lengths, a few dozen bytes a request);
// path must be a regular file or a pipe (a device such as /dev/zero is
// refused unread), and the read gives way to ctx (SIGINT/SIGTERM): its
// error is then ctx's.
func FromAccessLog(ctx context.Context, path string, opts LogOptions) (*Result, error) {
	var r io.Reader
	name := path
	if path == "-" {
		r, name = contextReader{ctx, os.Stdin}, "standard input"
	} else {
		f, err := bounded.Open(ctx, path, 0)
		if err != nil {
			return nil, err // names the file
		}
		defer f.Close()
		r = f
	}
	res, err := ReadAccessLog(r, name, opts)
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return res, nil
}

// contextReader fails its reads once ctx is done.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ReadAccessLog reads an access log from r (plain or gzip-compressed JSON
// lines) and fits its lengths; name describes the source in the result.
// Unusable lines are skipped and counted (Result.Log); a log without any
// usable line is an error.
func ReadAccessLog(r io.Reader, name string, opts LogOptions) (*Result, error) {
	o := opts.withDefaults()
	parser, err := tracefile.NewAccessLogParser(tracefile.AccessLogFields{
		Prompt: o.PromptFields, Completion: o.CompletionFields, Cached: o.CachedFields,
		Model: o.ModelFields, Time: o.TimeFields,
	})
	if err != nil {
		return nil, err
	}
	var byPath []string
	if o.By != "" {
		if byPath, err = tracefile.SplitFieldPath(o.By); err != nil {
			return nil, err
		}
	}

	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 64<<10)
	}

	stats := LogStats{Skips: map[string]int{}}
	var recs []record
	models := map[string]int{}
	var first, last time.Time
	lineNo := 0
	skip := func(reason string) {
		stats.Skipped++
		stats.Skips[reason]++
		if len(stats.FirstSkipped) < maxSkippedLineNotes {
			stats.FirstSkipped = append(stats.FirstSkipped, lineNo)
		}
	}
	for {
		line, tooLong, err := readLine(br)
		if len(line) > 0 || tooLong {
			lineNo++
		}
		if err != nil && !errors.Is(err, io.EOF) {
			n := lineNo
			if len(line) == 0 && !tooLong {
				n++ // the line that could not be read
			}
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		b := bytes.TrimSpace(line)
		if lineNo == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
		}
		switch {
		case tooLong:
			stats.Lines++
			skip(SkipLineTooLong)
		case len(b) == 0:
			// Blank lines are not requests.
		default:
			stats.Lines++
			line, reason := parser.Parse(b)
			if reason != "" {
				skip(reason)
				break
			}
			rec := record{prompt: line.Prompt, completion: line.Completion}
			if byPath != nil {
				rec.group = line.Group(byPath)
			}
			recs = append(recs, rec)
			if m, ok := line.Model(); ok && m != "" {
				models[m]++
			}
			if c, ok := line.Cached(); ok && c >= 0 {
				stats.Cached += c
				stats.CachedPrompt += rec.prompt
				stats.CachedLines++
			}
			if t, ok := line.Time(); ok {
				if first.IsZero() || t.Before(first) {
					first = t
				}
				if t.After(last) {
					last = t
				}
			}
		}
		if err != nil { // io.EOF
			break
		}
	}
	stats.Used = len(recs)
	if stats.Used == 0 {
		msg := fmt.Sprintf("no usable line (of %d", stats.Lines)
		if stats.Skipped > 0 {
			msg += ": " + formatSkips(stats.Skips)
		}
		return nil, fmt.Errorf("%s); check --prompt-field and --completion-field (tried %s / %s)", msg,
			strings.Join(o.PromptFields, ", "), strings.Join(o.CompletionFields, ", "))
	}

	res := &Result{
		Source:     "access log " + name,
		SourceKind: SourceAccessLog,
		Start:      first,
		End:        last,
		Log:        &stats,
		Model:      mostFrequent(models),
		By:         o.By,
	}
	if err := res.fitRecords(recs); err != nil {
		return nil, err
	}
	return res, nil
}

// readLine reads one line without its newline. A line longer than
// maxLineBytes is consumed and reported as tooLong with no content.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > maxLineBytes {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
}

// mostFrequent returns the key with the highest count (the smallest such
// key on ties), "" for none.
func mostFrequent(m map[string]int) string {
	best, n := "", 0
	for k, c := range m {
		if c > n || (c == n && k < best) {
			best, n = k, c
		}
	}
	return best
}

// formatSkips renders skip counts as "3 invalid JSON, 2 no prompt token
// count", largest first.
func formatSkips(skips map[string]int) string {
	keys := make([]string, 0, len(skips))
	for k := range skips {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if skips[a] != skips[b] {
			return skips[b] - skips[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", skips[k], k)
	}
	return strings.Join(parts, ", ")
}
