// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The zero-allocation JSON scanner.
//
// Every `data:` payload of a stream (and an embeddings answer, through a
// window) is decoded by a small hand-written scanner instead of
// encoding/json: it validates the whole payload with encoding/json's
// grammar (json.Valid agrees with it, which the fuzz target checks) while
// extracting only the fields the client needs, as slices of the payload,
// without allocating. Duplicate keys
// resolve as encoding/json resolves them (the last one wins) and keys are
// matched exactly after unescaping (encoding/json's case-insensitive match
// applies only to struct fields, not to what servers mean). See
// BenchmarkDecodeChunk for the comparison with encoding/json: a typical
// chat chunk decodes in ~0.34 µs with no allocation, against ~3.3 µs and
// 17 allocations (632 B) through encoding/json into a struct; at
// thousands of streams of hundreds of chunks a second this is the
// difference between a client that stays out of the measurements and one
// whose GC shows up in them. It is kept hand-written for that reason only.

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

var (
	errMalformedJSON = errors.New("malformed JSON")
	errTooDeep       = errors.New("JSON nests deeper than the limit")
	errNotObject     = errors.New("JSON value is not an object")
)

// jsonString is a JSON string as it appears in the payload, without quotes.
type jsonString struct {
	raw []byte
	esc bool // contains escapes: decode before use
	ok  bool // the field was present and a string
}

// jsonScanner validates and walks JSON text with encoding/json's grammar.
type jsonScanner struct {
	b     []byte
	i     int
	stack []byte // closing brackets of the containers skip has open
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// objectStart is called after '{': it returns the first key (its ':'
// consumed) or more=false for an empty object.
func (s *jsonScanner) objectStart() (jsonString, bool, error) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return jsonString{}, false, nil
	}
	return s.objectKey()
}

// objectNext is called after a member's value: it returns the next key or
// more=false at the closing brace. A non-nil prev (the error of reading the
// value) is returned as is, so loops can carry it in their post statement.
func (s *jsonScanner) objectNext(prev error) (jsonString, bool, error) {
	if prev != nil {
		return jsonString{}, false, prev
	}
	s.ws()
	if s.i >= len(s.b) {
		return jsonString{}, false, errMalformedJSON
	}
	switch s.b[s.i] {
	case '}':
		s.i++
		return jsonString{}, false, nil
	case ',':
		s.i++
		s.ws()
		return s.objectKey()
	}
	return jsonString{}, false, errMalformedJSON
}

func (s *jsonScanner) objectKey() (jsonString, bool, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return jsonString{}, false, errMalformedJSON
	}
	k, err := s.str()
	if err != nil {
		return k, false, err
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return k, false, errMalformedJSON
	}
	s.i++
	return k, true, nil
}

// arrayStart is called after '['; more is false for an empty array.
func (s *jsonScanner) arrayStart() (bool, error) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return false, nil
	}
	return true, nil
}

// arrayNext is called after an element; prev as for objectNext.
func (s *jsonScanner) arrayNext(prev error) (bool, error) {
	if prev != nil {
		return false, prev
	}
	s.ws()
	if s.i >= len(s.b) {
		return false, errMalformedJSON
	}
	switch s.b[s.i] {
	case ']':
		s.i++
		return false, nil
	case ',':
		s.i++
		return true, nil
	}
	return false, errMalformedJSON
}

// stringValue reads a value that should be a string; any other valid value
// is skipped and reported with ok=false. depth is the number of containers
// open around the value.
func (s *jsonScanner) stringValue(depth int) (jsonString, error) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '"' {
		return s.str()
	}
	return jsonString{}, s.skip(depth)
}

// countValue reads a value that should be a token count: a number that is
// an integer in [0, 1e9]. Anything else (null included) is skipped and
// reported with ok=false.
func (s *jsonScanner) countValue(depth int) (int, bool, error) {
	s.ws()
	if s.i >= len(s.b) || (s.b[s.i] != '-' && (s.b[s.i] < '0' || s.b[s.i] > '9')) {
		return 0, false, s.skip(depth)
	}
	start := s.i
	if err := s.number(); err != nil {
		return 0, false, err
	}
	n, ok := parseCount(s.b[start:s.i])
	return n, ok, nil
}

// usageCount is countValue that also says whether the value was a number
// that is not a count (a server anomaly, not an absent field).
func (s *jsonScanner) usageCount(depth int) (n int, ok, bad bool, err error) {
	s.ws()
	num := s.i < len(s.b) && (s.b[s.i] == '-' || isDigit(s.b[s.i]))
	n, ok, err = s.countValue(depth)
	return n, ok, num && !ok && err == nil, err
}

// strSpecial marks the bytes that end the fast path of a string scan:
// control characters, the quote and the backslash.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str scans a string starting at the opening quote.
func (s *jsonScanner) str() (jsonString, error) {
	b := s.b
	i := s.i + 1
	esc := false
	for {
		for i < len(b) && !strSpecial[b[i]] {
			i++
		}
		if i >= len(b) {
			s.i = i
			return jsonString{}, errMalformedJSON
		}
		switch b[i] {
		case '"':
			str := jsonString{raw: b[s.i+1 : i], esc: esc, ok: true}
			s.i = i + 1
			return str, nil
		case '\\':
			esc = true
			if i+1 >= len(b) {
				s.i = i
				return jsonString{}, errMalformedJSON
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.i = i
					return jsonString{}, errMalformedJSON
				}
				i += 6
			default:
				s.i = i
				return jsonString{}, errMalformedJSON
			}
		default: // a control character
			s.i = i
			return jsonString{}, errMalformedJSON
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() error {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	ok := true
	if i < len(b) && b[i] == '0' {
		i++
	} else {
		i, ok = skipDigits(b, i)
	}
	if ok && i < len(b) && b[i] == '.' {
		i, ok = skipDigits(b, i+1)
	}
	if ok && i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		i, ok = skipDigits(b, i)
	}
	s.i = i
	if !ok {
		return errMalformedJSON
	}
	return nil
}

// skipDigits returns the index after the digits that start b[i:], and
// false if there are none.
func skipDigits(b []byte, i int) (int, bool) {
	j := i
	for j < len(b) && isDigit(b[j]) {
		j++
	}
	return j, j > i
}

func (s *jsonScanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return errMalformedJSON
	}
	s.i += len(lit)
	return nil
}

// scalar scans a string, number or literal.
func (s *jsonScanner) scalar() error {
	if s.i >= len(s.b) {
		return errMalformedJSON
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || isDigit(c):
		return s.number()
	}
	return errMalformedJSON
}

// skip validates and steps over one value of any kind, without recursion.
// depth is the number of containers already open around it.
func (s *jsonScanner) skip(depth int) error {
	s.stack = s.stack[:0]
	for {
		// A value is expected here.
		s.ws()
		if s.i >= len(s.b) {
			return errMalformedJSON
		}
		switch s.b[s.i] {
		case '{', '[':
			open := s.b[s.i]
			s.i++
			if depth+len(s.stack)+1 > maxJSONDepth {
				return errTooDeep
			}
			if open == '{' {
				s.stack = append(s.stack, '}')
				_, more, err := s.objectStart()
				if err != nil {
					return err
				}
				if more {
					continue // the first member's value
				}
			} else {
				s.stack = append(s.stack, ']')
				more, err := s.arrayStart()
				if err != nil {
					return err
				}
				if more {
					continue // the first element
				}
			}
			s.stack = s.stack[:len(s.stack)-1] // it was empty
		default:
			if err := s.scalar(); err != nil {
				return err
			}
		}
		// After a value: close containers until one continues.
		for {
			if len(s.stack) == 0 {
				return nil
			}
			var more bool
			var err error
			if s.stack[len(s.stack)-1] == '}' {
				_, more, err = s.objectNext(nil)
			} else {
				more, err = s.arrayNext(nil)
			}
			if err != nil {
				return err
			}
			if more {
				break
			}
			s.stack = s.stack[:len(s.stack)-1]
		}
	}
}

// parseCount converts a JSON number to a token count: integers in [0, 1e9]
// (written as such or as an integral float) are accepted.
func parseCount(b []byte) (int, bool) {
	if len(b) > 0 && len(b) <= 9 {
		n := 0
		digits := true
		for _, c := range b {
			if !isDigit(c) {
				digits = false
				break
			}
			n = n*10 + int(c-'0')
		}
		if digits {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return countFromFloat(f, err == nil)
}

func countFromFloat(f float64, ok bool) (int, bool) {
	if !ok || f < 0 || f > 1e9 || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// appendUnquoted appends the decoded contents of a JSON string (raw, without
// quotes, already validated) to dst with encoding/json's rules: invalid
// UTF-8 and unpaired surrogates become U+FFFD.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			if i+1 >= len(raw) {
				return dst // not reachable for validated input
			}
			switch raw[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := hex4(raw[i+2:])
				if !ok {
					return dst
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2, ok := hex4Escape(raw[i:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, raw[i+1])
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			j := i + 1
			for j < len(raw) && raw[j] < utf8.RuneSelf && raw[j] != '\\' {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, raw[i:i+size]...)
		}
		i += size
	}
	return dst
}

// hex4 decodes 4 hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// hex4Escape decodes a `\uXXXX` escape at the start of b.
func hex4Escape(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	return hex4(b[2:])
}

// is reports whether a decoded JSON string equals lit exactly.
func (j jsonString) is(lit string) bool { return j.ok && !j.esc && string(j.raw) == lit }
