// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// yaml.v3 reports a syntax error at the line where the construct it was
// parsing began (its "context"), 0-based for parser errors, and never
// with a column: a key indented one space too little on line 3 of a
// target list comes out as "line 1". The position of the problem itself
// (libyaml's problem mark) is not exported. locateSyntaxError recovers
// it: the parser stops at the first token it cannot use, so the shortest
// prefix of the file that fails with the same error ends just after that
// token's first character.

// maxLocateBytes bounds the bytes locateSyntaxError parses in all (a
// few dozen parses of a prefix of the file).
const maxLocateBytes = 64 << 20

// parseError is what yaml.v3 says of data as a syntax error ("" when it
// parses, or fails with something else).
func parseError(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return ""
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return ""
		}
		return err.Error()
	}
}

// locateSyntaxError returns the 1-based line and column of the syntax
// error yaml.v3 reported as msg (yaml's full message, "yaml: line N: ...")
// for data, or ok false when it cannot tell.
func locateSyntaxError(data []byte, msg string) (line, col int, ok bool) {
	if msg == "" || parseError(data) != msg {
		return 0, 0, false
	}
	// The problem is at or after the context yaml names: line N is the
	// 0-based context line of a parser error, the 1-based one of a
	// scanner error.
	lineStarts := []int{0}
	for i, b := range data {
		if b == '\n' {
			lineStarts = append(lineStarts, i+1)
		}
	}
	first := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 1 {
			first = min(n-1, len(lineStarts)-1)
		}
	}
	// Each parse reads at most the whole file: a byte budget keeps a
	// large file's refinement short (yaml's line is kept beyond it).
	budget := maxLocateBytes
	fails := func(end int) bool {
		budget -= end
		return parseError(data[:end]) == msg
	}
	lineEnd := func(i int) int {
		if i+1 < len(lineStarts) {
			return lineStarts[i+1]
		}
		return len(data)
	}
	// The first line whose end makes the prefix fail the same way (the
	// whole file does).
	lo, hi := first, len(lineStarts)-1
	for lo < hi {
		if budget <= 0 {
			return 0, 0, false
		}
		mid := (lo + hi) / 2
		if fails(lineEnd(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	// Within it, the first character whose inclusion does.
	start, end := lineStarts[hi], lineEnd(hi)
	at := -1
	for clo, chi := start+1, end; clo <= chi && budget > 0; {
		mid := (clo + chi) / 2
		for mid < chi && !utf8.RuneStart(data[mid]) {
			mid++ // a prefix ends between characters
		}
		if fails(mid) {
			at, chi = mid-1, mid-1
		} else {
			clo = mid + 1
		}
	}
	if at < 0 {
		// Only the whole line fails (or the budget ran out): its first
		// character that is not blank.
		at = start
		for at < end-1 && (data[at] == ' ' || data[at] == '\t') {
			at++
		}
	}
	if data[at] == ':' && !strings.Contains(msg, "mapping values are not allowed") {
		// The colon made a key of what precedes it: the problem is the
		// key, which starts the line (after any "- ").
		k := start
		for k < at && (data[k] == ' ' || data[k] == '-' && k+1 < at && data[k+1] == ' ') {
			k++
		}
		at = k
	}
	for at > start && !utf8.RuneStart(data[at]) {
		at--
	}
	return hi + 1, 1 + utf8.RuneCount(data[start:at]), true
}

// syntaxHint adds what usually causes a syntax error yaml describes in
// its own terms; at is the character the error is located at.
func syntaxHint(msg string, at byte) string {
	switch {
	case strings.Contains(msg, "did not find expected key"),
		strings.Contains(msg, "did not find expected '-' indicator"),
		strings.Contains(msg, "found a tab character that violates indentation"):
		return msg + " (check this line's indentation: a key lines up with the keys of its mapping, spaces only)"
	case strings.Contains(msg, "could not find expected ':'"):
		return msg + " (a key needs a ':' after it; or check this line's indentation)"
	case strings.Contains(msg, "mapping values are not allowed in this context"):
		return msg + " (a second ': ' on one line: quote a value that holds one)"
	case strings.Contains(msg, "found unexpected end of stream") && (at == '"' || at == '\''):
		return msg + " (a quote opened here is never closed)"
	}
	return msg
}

// byteAt is the first byte of the character at 1-based line and column
// of data (0 when there is none).
func byteAt(data []byte, line, col int) byte {
	for i := 1; i < line; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return 0
		}
		data = data[j+1:]
	}
	for i := 1; i < col && len(data) > 0; i++ {
		_, n := utf8.DecodeRune(data)
		data = data[n:]
	}
	if len(data) == 0 {
		return 0
	}
	return data[0]
}

// SyntaxError returns nil when data is well-formed YAML (every document
// of it), else its first syntax error as an *Error positioned where the
// file breaks, file naming it. Other YAML files llmprobe reads (`llmprobe
// mixin`'s) report their syntax errors with it.
func SyntaxError(file string, data []byte) *Error {
	msg := parseError(data)
	if msg == "" {
		return nil
	}
	e := &Error{File: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		e.Msg = m[2]
	}
	if line, col, ok := locateSyntaxError(data, msg); ok {
		e.Line, e.Column = line, col
		e.Msg = syntaxHint(e.Msg, byteAt(data, line, col))
	}
	return e
}
