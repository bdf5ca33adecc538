// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The access-log line parser: the one `llmprobe fit` reads its logs with
// (fit.ReadAccessLog keeps its own loop: longer lines, skip statistics)
// and the AccessLog format's reader. A line is a JSON object whose token
// counts sit at dotted field paths, tried in order.

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

// Skip reasons: why an access-log line is not a request.
const (
	SkipInvalidJSON  = "invalid JSON"
	SkipNotObject    = "not a JSON object"
	SkipNoPrompt     = "no prompt token count"
	SkipNoCompletion = "no completion token count"
	SkipNotNumber    = "token count not a number"
	SkipNegative     = "negative token count"
)

// AccessLogFields are the dotted field paths of an access log's facts
// ("usage.prompt_tokens"); a segment may also match a key that itself
// holds dots ("gen_ai.usage.input_tokens"). Empty lists take the defaults
// above.
type AccessLogFields struct {
	Prompt, Completion, Cached, Model, Time []string
}

// AccessLogParser parses access-log lines; it is immutable and safe for
// concurrent use.
type AccessLogParser struct {
	prompt, completion, cached, model, time [][]string
}

// NewAccessLogParser splits the field paths once; an empty segment is an
// error, checked in the order Prompt, Completion, Cached, Model, Time.
func NewAccessLogParser(f AccessLogFields) (*AccessLogParser, error) {
	p := &AccessLogParser{}
	for _, c := range []struct {
		dst      *[][]string
		fields   []string
		defaults []string
	}{
		{&p.prompt, f.Prompt, DefaultPromptFields}, {&p.completion, f.Completion, DefaultCompletionFields},
		{&p.cached, f.Cached, DefaultCachedFields}, {&p.model, f.Model, DefaultModelFields}, {&p.time, f.Time, DefaultTimeFields},
	} {
		fields := c.fields
		if len(fields) == 0 {
			fields = c.defaults
		}
		for _, s := range fields {
			path, err := SplitFieldPath(s)
			if err != nil {
				return nil, err
			}
			*c.dst = append(*c.dst, path)
		}
	}
	return p, nil
}

// SplitFieldPath splits a dotted field path; an empty segment is an error.
func SplitFieldPath(s string) ([]string, error) {
	p := strings.Split(s, ".")
	if slices.Contains(p, "") {
		return nil, fmt.Errorf("invalid field path %q: empty key", s)
	}
	return p, nil
}

// AccessLogLine is a parsed line whose token counts were found.
type AccessLogLine struct {
	Prompt, Completion float64
	// The paths the counts were found at.
	promptPath, completionPath []string
	obj                        map[string]any
	p                          *AccessLogParser
}

// Parse decodes one line (a JSON object, numbers kept as text, surrounding
// space ignored) and extracts its token counts; reason, one of the Skip
// constants, says why the line is not a request ("" when it is).
func (p *AccessLogParser) Parse(line []byte) (l AccessLogLine, reason string) {
	b := bytes.TrimSpace(line)
	if len(b) == 0 || b[0] != '{' {
		if len(b) > 0 && json.Valid(b) {
			return AccessLogLine{}, SkipNotObject
		}
		return AccessLogLine{}, SkipInvalidJSON
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return AccessLogLine{}, SkipInvalidJSON
	}
	l = AccessLogLine{obj: obj, p: p}
	if l.Prompt, l.promptPath, reason = countField(obj, p.prompt, SkipNoPrompt); reason != "" {
		return AccessLogLine{}, reason
	}
	if l.Completion, l.completionPath, reason = countField(obj, p.completion, SkipNoCompletion); reason != "" {
		return AccessLogLine{}, reason
	}
	return l, ""
}

// Cached is the line's cached prompt tokens, at the first present cached
// path, if it is a number.
func (l AccessLogLine) Cached() (float64, bool) {
	for _, path := range l.p.cached {
		if v, ok := lookup(l.obj, path); ok {
			return parseNumber(v)
		}
	}
	return 0, false
}

// Model is the line's model, at the first present model path, if it is a
// string.
func (l AccessLogLine) Model() (string, bool) {
	s, _, ok := l.model()
	return s, ok
}

// model is Model and the path it was found at.
func (l AccessLogLine) model() (string, []string, bool) {
	for _, path := range l.p.model {
		if v, ok := lookup(l.obj, path); ok {
			s, isStr := v.(string)
			return s, path, isStr
		}
	}
	return "", nil, false
}

// Group renders the value at path (SplitFieldPath): a string as is,
// another scalar as its JSON text, a missing field as "none", an object or
// list as "(structured)".
func (l AccessLogLine) Group(path []string) string {
	v, ok := lookup(l.obj, path)
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

// Time is the request time at the first present time path: RFC 3339
// text, or a Unix timestamp whose unit is guessed from its magnitude
// (seconds below 1e11, then milliseconds, microseconds, nanoseconds).
func (l AccessLogLine) Time() (time.Time, bool) {
	for _, p := range l.p.time {
		v, ok := lookup(l.obj, p)
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

// countField reads a token count at the first present path, and says
// which.
func countField(obj map[string]any, paths [][]string, missing string) (float64, []string, string) {
	for _, p := range paths {
		v, ok := lookup(obj, p)
		if !ok {
			continue
		}
		n, ok := parseNumber(v)
		switch {
		case !ok:
			return 0, p, SkipNotNumber
		case n < 0:
			return 0, p, SkipNegative
		}
		return n, p, ""
	}
	return 0, nil, missing
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

// The AccessLog format's reader: lines that are not requests are skipped
// and counted (Reader.Skipped), as fit does; token counts are rounded to
// whole tokens, and one over MaxTokens is an error at its path, as in
// the other formats; the time is optional (a line without one keeps the
// offset of the latest timed line before it, 0 before any).

func (p *AccessLogParser) parseRecord(line []byte, rec *Record) (stamp, bool, error) {
	l, reason := p.Parse(line)
	if reason != "" {
		return stamp{}, false, nil
	}
	var err error
	if rec.PromptTokens, err = roundedTokens(l.promptPath, l.Prompt); err != nil {
		return stamp{}, false, err
	}
	if rec.OutputTokens, err = roundedTokens(l.completionPath, l.Completion); err != nil {
		return stamp{}, false, err
	}
	if m, path, ok := l.model(); ok {
		if err := checkName(strings.Join(path, "."), m); err != nil {
			return stamp{}, false, err
		}
		rec.Model = m
	}
	if t, ok := l.Time(); ok {
		return stamp{t: time.Duration(t.UnixNano()), timed: true}, true, nil
	}
	return stamp{}, true, nil
}

// roundedTokens is a count found at path, rounded to whole tokens, at
// most MaxTokens.
func roundedTokens(path []string, n float64) (int, error) {
	return tokenCount(strings.Join(path, "."), strconv.FormatFloat(math.Round(n), 'f', -1, 64))
}

// looksLikeAccessLog: the default field paths (or the options') find
// token counts on the line.
func looksLikeAccessLog(line []byte, opts Options) (bool, error) {
	p, err := NewAccessLogParser(opts.AccessLog)
	if err != nil {
		return false, err
	}
	_, reason := p.Parse(line)
	return reason == "", nil
}
