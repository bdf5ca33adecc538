// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import "time"

// fastMooncake reads the common shape of a Mooncake line — an object of
// timestamp, input_length, output_length (whole numbers) and hash_ids
// (a list of them), in any order, once each — without encoding/json, a
// few times faster. Anything else (another key, a string, a fraction, an
// exponent, a sign, escapes, a duplicate key, a number too long) is
// left to parseMooncake (ok false), which also makes every error: the
// fast path never accepts a line the full parser would refuse
// (FuzzReader checks that the two agree).
func fastMooncake(line []byte, rec *Record) (st stamp, ok bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return stamp{}, false
	}
	i++
	var ts, in, out uint64
	var seen uint8 // bits: timestamp, input_length, output_length, hash_ids
	var ids []uint64
	for first := true; ; first = false {
		i = skipSpace(line, i)
		if i >= len(line) {
			return stamp{}, false
		}
		if line[i] == '}' && first {
			return stamp{}, false // {}: the full parser says what is missing
		}
		if !first {
			switch line[i] {
			case '}':
				i = skipSpace(line, i+1)
				if i != len(line) || seen&7 != 7 || in > MaxTokens || out > MaxTokens || ts > 1<<40 {
					return stamp{}, false
				}
				rec.PromptTokens, rec.OutputTokens, rec.HashIDs = int(in), int(out), ids
				return stamp{t: time.Duration(ts) * time.Millisecond, timed: true}, true
			case ',':
				i = skipSpace(line, i+1)
			default:
				return stamp{}, false
			}
		}
		if i >= len(line) || line[i] != '"' {
			return stamp{}, false
		}
		j := i + 1
		for j < len(line) && line[j] != '"' && line[j] != '\\' {
			j++
		}
		if j >= len(line) || line[j] != '"' {
			return stamp{}, false
		}
		key := line[i+1 : j]
		i = skipSpace(line, j+1)
		if i >= len(line) || line[i] != ':' {
			return stamp{}, false
		}
		i = skipSpace(line, i+1)
		var bit uint8
		var dst *uint64
		switch string(key) { // compared, not kept: no allocation
		case "timestamp":
			bit, dst = 1, &ts
		case "input_length":
			bit, dst = 2, &in
		case "output_length":
			bit, dst = 4, &out
		case "hash_ids":
			bit = 8
		default:
			return stamp{}, false
		}
		if seen&bit != 0 {
			return stamp{}, false
		}
		seen |= bit
		if dst != nil {
			var n uint64
			if n, i, ok = digits(line, i); !ok {
				return stamp{}, false
			}
			*dst = n
			continue
		}
		if i >= len(line) || line[i] != '[' {
			return stamp{}, false
		}
		i = skipSpace(line, i+1)
		// As many ids as commas before the list's end, and one: allocated
		// once, and no more than MaxHashIDs (the full parser refuses more).
		n := 1
		for j := i; j < len(line) && line[j] != ']'; j++ {
			if line[j] == ',' {
				if n++; n > MaxHashIDs {
					return stamp{}, false
				}
			}
		}
		ids = make([]uint64, 0, n)
		if i < len(line) && line[i] == ']' {
			i++
			continue
		}
		for {
			var n uint64
			if n, i, ok = digits(line, i); !ok {
				return stamp{}, false
			}
			ids = append(ids, n)
			i = skipSpace(line, i)
			if i >= len(line) {
				return stamp{}, false
			}
			if line[i] == ']' {
				i++
				break
			}
			if line[i] != ',' {
				return stamp{}, false
			}
			i = skipSpace(line, i+1)
		}
	}
}

// digits reads a JSON whole number without sign, fraction or exponent,
// of at most 18 digits, no leading zero.
func digits(b []byte, i int) (uint64, int, bool) {
	start := i
	var n uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + uint64(b[i]-'0')
		i++
	}
	switch {
	case i == start, i-start > 18, b[start] == '0' && i-start > 1:
		return 0, i, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, i, false
	}
	return n, i, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
