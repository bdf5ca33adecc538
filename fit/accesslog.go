// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/internal/bounded"
)

// Default field paths, tried in order on every line; the first present
// one is used.
var (
	// DefaultPromptFields: vLLM-style logs, OpenAI chat/completions
	// usage, the Responses/Anthropic usage, OpenAI Batch API output, and
	// OpenTelemetry GenAI attributes.
	DefaultPromptFields = []string{
		"prompt_tokens",
		"usage.prompt_tokens",
		"usage.input_tokens",
		"response.body.usage.prompt_tokens",
		"gen_ai.usage.input_tokens",
		"attributes.gen_ai.usage.input_tokens",
	}
	// DefaultCompletionFields mirror DefaultPromptFields.
	DefaultCompletionFields = []string{
		"completion_tokens",
		"usage.completion_tokens",
		"usage.output_tokens",
		"response.body.usage.completion_tokens",
		"gen_ai.usage.output_tokens",
		"attributes.gen_ai.usage.output_tokens",
	}
	// DefaultCachedFields locate the prompt tokens served from the prefix
	// cache; they are reported, not fitted.
	DefaultCachedFields = []string{
		"usage.prompt_tokens_details.cached_tokens",
		"prompt_tokens_details.cached_tokens",
		"cached_tokens",
		"usage.cache_read_input_tokens",
		"response.body.usage.prompt_tokens_details.cached_tokens",
	}
	// DefaultModelFields name the served model.
	DefaultModelFields = []string{"model", "response.body.model", "gen_ai.request.model"}
	// DefaultTimeFields hold the request time: an RFC 3339 string or a
	// Unix timestamp in seconds, milliseconds, microseconds or
	// nanoseconds.
	DefaultTimeFields = []string{"timestamp", "time", "ts", "@timestamp", "created"}
)

// Skip reasons, the keys of LogStats.Skips.
const (
	SkipInvalidJSON     = "invalid JSON"
	SkipNotObject       = "not a JSON object"
	SkipNoPrompt        = "no prompt token count"
	SkipNoCompletion    = "no completion token count"
	SkipNotNumber       = "token count not a number"
	SkipNegative        = "negative token count"
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

// parsePaths splits dotted paths once.
func parsePaths(fields []string) ([][]string, error) {
	out := make([][]string, 0, len(fields))
	for _, f := range fields {
		p := strings.Split(f, ".")
		if slices.Contains(p, "") {
			return nil, fmt.Errorf("invalid field path %q: empty key", f)
		}
		out = append(out, p)
	}
	return out, nil
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
	var promptPaths, completionPaths, cachedPaths, modelPaths, timePaths, byPath [][]string
	var by []string
	if o.By != "" {
		by = []string{o.By}
	}
	for _, f := range []struct {
		paths  *[][]string
		fields []string
	}{
		{&promptPaths, o.PromptFields}, {&completionPaths, o.CompletionFields}, {&cachedPaths, o.CachedFields},
		{&modelPaths, o.ModelFields}, {&timePaths, o.TimeFields}, {&byPath, by},
	} {
		var err error
		if *f.paths, err = parsePaths(f.fields); err != nil {
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
			rec, reason := parseLine(b, promptPaths, completionPaths)
			if reason != "" {
				skip(reason)
				break
			}
			obj := rec.obj
			if len(byPath) > 0 {
				rec.r.group = groupValue(obj, byPath[0])
			}
			recs = append(recs, rec.r)
			if m, ok := stringField(obj, modelPaths); ok && m != "" {
				models[m]++
			}
			if c, ok := numberField(obj, cachedPaths); ok && c >= 0 {
				stats.Cached += c
				stats.CachedPrompt += rec.r.prompt
				stats.CachedLines++
			}
			if t, ok := timeField(obj, timePaths); ok {
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

type parsedLine struct {
	r   record
	obj map[string]any
}

// parseLine decodes a JSON object (numbers kept as text) and extracts the
// token counts; reason says why the line is skipped ("" when it is used).
func parseLine(b []byte, promptPaths, completionPaths [][]string) (parsedLine, string) {
	if b[0] != '{' {
		if json.Valid(b) {
			return parsedLine{}, SkipNotObject
		}
		return parsedLine{}, SkipInvalidJSON
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return parsedLine{}, SkipInvalidJSON
	}
	pl := parsedLine{obj: obj}
	var reason string
	pl.r.prompt, reason = countField(obj, promptPaths, SkipNoPrompt)
	if reason != "" {
		return parsedLine{}, reason
	}
	pl.r.completion, reason = countField(obj, completionPaths, SkipNoCompletion)
	if reason != "" {
		return parsedLine{}, reason
	}
	return pl, ""
}

// countField reads a token count at the first present path.
func countField(obj map[string]any, paths [][]string, missing string) (float64, string) {
	for _, p := range paths {
		v, ok := lookup(obj, p)
		if !ok {
			continue
		}
		n, ok := parseNumber(v)
		switch {
		case !ok:
			return 0, SkipNotNumber
		case n < 0:
			return 0, SkipNegative
		}
		return n, ""
	}
	return 0, missing
}

// lookup follows path through nested objects. At each level a key may
// also hold dots itself: the longest matching run of segments wins. Null
// counts as missing.
func lookup(obj map[string]any, path []string) (any, bool) {
	for j := len(path); j >= 1; j-- {
		key := path[0]
		if j > 1 {
			key = strings.Join(path[:j], ".")
		}
		v, ok := obj[key]
		if !ok {
			continue
		}
		if j == len(path) {
			return v, v != nil
		}
		next, isObj := v.(map[string]any)
		if !isObj {
			continue
		}
		if v, ok := lookup(next, path[j:]); ok {
			return v, true
		}
	}
	return nil, false
}

// parseNumber accepts a finite JSON number or a string holding one.
func parseNumber(v any) (float64, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return 0, false
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, false
	}
	return n, true
}

func numberField(obj map[string]any, paths [][]string) (float64, bool) {
	for _, p := range paths {
		if v, ok := lookup(obj, p); ok {
			return parseNumber(v)
		}
	}
	return 0, false
}

func stringField(obj map[string]any, paths [][]string) (string, bool) {
	for _, p := range paths {
		if v, ok := lookup(obj, p); ok {
			s, isStr := v.(string)
			return s, isStr
		}
	}
	return "", false
}

// groupValue renders the --by field of a line: a string as is, another
// scalar as its JSON text, a missing field as "none".
func groupValue(obj map[string]any, path []string) string {
	v, ok := lookup(obj, path)
	if !ok {
		return "none"
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return "(structured)"
}

// timeField reads a request time: RFC 3339 text, or a Unix timestamp
// whose unit is guessed from its magnitude.
func timeField(obj map[string]any, paths [][]string) (time.Time, bool) {
	for _, p := range paths {
		v, ok := lookup(obj, p)
		if !ok {
			continue
		}
		if s, isStr := v.(string); isStr {
			if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
				return t.UTC(), true
			}
			return time.Time{}, false
		}
		n, ok := parseNumber(v)
		if !ok || n <= 0 {
			return time.Time{}, false
		}
		switch {
		case n < 1e11: // seconds (until the year 5138)
			sec, frac := math.Modf(n)
			return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
		case n < 1e14:
			return time.UnixMilli(int64(n)).UTC(), true
		case n < 1e17:
			return time.UnixMicro(int64(n)).UTC(), true
		case n < 9.2e18:
			return time.Unix(0, int64(n)).UTC(), true
		}
		return time.Time{}, false
	}
	return time.Time{}, false
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
