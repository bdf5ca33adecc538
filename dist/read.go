// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// maxLineBytes bounds one input line; JSONL access logs that carry prompt
// text can have long lines, but not unbounded ones. (A variable so that
// tests can lower it.)
var maxLineBytes = 64 << 20

// ReadSamples reads numbers from r, one a line.
//
// With field == "" each line is a number. Otherwise each line is a JSON
// object (JSONL) and field is a dotted path into it, such as
// "usage.prompt_tokens"; the value must be a JSON number or a string that
// holds one. Lines where the path is missing or null are skipped (failed
// requests often log no usage), but the path must be found on at least one
// line. In both modes blank lines and lines starting with '#' are skipped,
// and values must be finite. A line that cannot be read is an error that
// names its line number; errors never quote a JSON line, which may hold
// prompt text.
func ReadSamples(r io.Reader, field string) ([]float64, error) {
	return ReadSamplesLimit(r, field, 0)
}

// TooManySamplesError is ReadSamplesLimit's refusal of a file holding
// more than its limit of values.
type TooManySamplesError struct {
	Line  int // the line that would have added one more
	Limit int
}

func (e *TooManySamplesError) Error() string {
	return fmt.Sprintf("line %d: more than %d samples", e.Line, e.Limit)
}

// ReadSamplesLimit is ReadSamples that stops at the line that would add
// the (limit+1)th value, with an error naming that line (limit 0: no
// bound).
func ReadSamplesLimit(r io.Reader, field string, limit int) ([]float64, error) {
	var path []string
	if field != "" {
		path = strings.Split(field, ".")
		for _, k := range path {
			if k == "" {
				return nil, fmt.Errorf("invalid field path %q: empty key", field)
			}
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	var out []float64
	line, objects := 0, 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
		}
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if limit > 0 && len(out) == limit {
			// A line that adds no value (a JSON line without the field)
			// does not count, but deciding takes parsing it: it is refused
			// all the same.
			return nil, &TooManySamplesError{Line: line, Limit: limit}
		}
		if path == nil {
			v, err := parseNumber(string(b))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			out = append(out, v)
			continue
		}
		objects++
		v, ok, err := jsonField(b, path)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if ok {
			out = append(out, v)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d MiB", line+1, maxLineBytes>>20)
		}
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(out) == 0 {
		if path != nil && objects > 0 {
			return nil, fmt.Errorf("field %q found on none of %d lines", field, objects)
		}
		return nil, errors.New("no samples")
	}
	return out, nil
}

// ReadSamplesFile is ReadSamples on the named file; errors name the file
// (and the line).
func ReadSamplesFile(path, field string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer f.Close()
	v, err := ReadSamples(f, field)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// parseNumber parses a finite number; its error quotes at most a short
// prefix of the input.
func parseNumber(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		q := s
		if len(q) > 40 {
			q = q[:40] + "..."
		}
		return 0, fmt.Errorf("%q is not a number", q)
	}
	if !finite(v) {
		return 0, fmt.Errorf("%s is not a finite number", num(v))
	}
	return v, nil
}

// jsonField extracts the number at path from a JSON object. ok is false
// when the path is missing or null.
func jsonField(b []byte, path []string) (v float64, ok bool, err error) {
	raw := json.RawMessage(b)
	for i, key := range path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			if i == 0 {
				return 0, false, errors.New(jsonErr(err))
			}
			return 0, false, fmt.Errorf("%s is not a JSON object", strings.Join(path[:i], "."))
		}
		if obj == nil { // the object itself, or an intermediate key, is null
			return 0, false, nil
		}
		next, found := obj[key]
		if !found {
			return 0, false, nil
		}
		raw = next
	}
	field := strings.Join(path, ".")
	raw = bytes.TrimSpace(raw)
	switch {
	case bytes.Equal(raw, []byte("null")):
		return 0, false, nil
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, fmt.Errorf("%s: %s", field, jsonErr(err))
		}
		v, err := parseNumber(strings.TrimSpace(s))
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", field, err)
		}
		return v, true, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, false, fmt.Errorf("%s is not a number", field)
	}
	if !finite(f) {
		return 0, false, fmt.Errorf("%s is not a finite number", field)
	}
	return f, true, nil
}

// jsonErr describes a JSON decoding error without quoting the input.
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "not a JSON object (found a JSON " + te.Value + ")"
	}
	return "invalid JSON"
}
