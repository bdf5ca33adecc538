// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Request body encoding.
//
// EncodeBody writes the JSON body by hand, appending to a caller-owned
// buffer: no reflection and no intermediate map for the standard fields,
// which are written in a fixed order. Strings are escaped so that
// encoding/json decodes them to the same text (invalid UTF-8 becomes
// U+FFFD, exactly as encoding/json.Marshal does); HTML characters are not
// escaped, which JSON does not need.

// standardKeys are the body keys EncodeBody writes itself; an ExtraBody key
// of the same name replaces the standard one.
var standardKeys = [...]string{"model", "messages", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stream", "stream_options"}

// EncodeBody appends the JSON body of req to dst and returns the extended
// buffer. The body is
//
//	{"model", "messages" (chat) | "prompt" (completions: PromptIDs when
//	non-nil, else Prompt), "max_tokens" (when > 0), "temperature",
//	"top_p" (when > 0), "top_k" (when > 0), "seed" (when set),
//	"stream": true, "stream_options": {"include_usage": true}}
//
// followed by the ExtraBody members in key order. An ExtraBody key that
// names a standard member replaces it (e.g. "stream_options" with
// continuous_usage_stats), so no key appears twice. ExtraBody values of
// the types YAML and JSON decoding produce are encoded directly; other
// types go through encoding/json.
func EncodeBody(dst []byte, req *Request) ([]byte, error) {
	if req == nil {
		return dst, errors.New("nil request")
	}
	switch req.API {
	case APIChat, APICompletions:
	default:
		return dst, fmt.Errorf("unknown API %q", req.API)
	}
	overridden := func(key string) bool {
		if len(req.ExtraBody) == 0 {
			return false
		}
		_, ok := req.ExtraBody[key]
		return ok
	}
	var err error
	first := true
	member := func(key string) {
		if first {
			dst = append(dst, '"')
			first = false
		} else {
			dst = append(dst, ',', '"')
		}
		dst = append(dst, key...) // standard keys need no escaping
		dst = append(dst, '"', ':')
	}
	dst = append(dst, '{')
	if !overridden("model") {
		member("model")
		dst = appendJSONString(dst, req.Model)
	}
	if req.API == APIChat {
		if !overridden("messages") {
			member("messages")
			dst = append(dst, '[')
			for i, m := range req.Messages {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"role":`...)
				dst = appendJSONString(dst, m.Role)
				dst = append(dst, `,"content":`...)
				dst = appendJSONString(dst, m.Content)
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
	} else if !overridden("prompt") {
		member("prompt")
		if req.PromptIDs != nil {
			dst = append(dst, '[')
			for i, id := range req.PromptIDs {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendInt(dst, int64(id), 10)
			}
			dst = append(dst, ']')
		} else {
			dst = appendJSONString(dst, req.Prompt)
		}
	}
	if req.MaxTokens > 0 && !overridden("max_tokens") {
		member("max_tokens")
		dst = strconv.AppendInt(dst, int64(req.MaxTokens), 10)
	}
	sp := &req.Sampling
	if !overridden("temperature") {
		member("temperature")
		if dst, err = appendJSONFloat(dst, sp.Temperature); err != nil {
			return dst, fmt.Errorf("temperature: %w", err)
		}
	}
	if sp.TopP > 0 && !overridden("top_p") {
		member("top_p")
		if dst, err = appendJSONFloat(dst, sp.TopP); err != nil {
			return dst, fmt.Errorf("top_p: %w", err)
		}
	}
	if sp.TopK > 0 && !overridden("top_k") {
		member("top_k")
		dst = strconv.AppendInt(dst, int64(sp.TopK), 10)
	}
	if sp.Seed != nil && !overridden("seed") {
		member("seed")
		dst = strconv.AppendInt(dst, *sp.Seed, 10)
	}
	if !overridden("stream") {
		member("stream")
		dst = append(dst, "true"...)
	}
	if !overridden("stream_options") {
		member("stream_options")
		dst = append(dst, `{"include_usage":true}`...)
	}
	if len(req.ExtraBody) > 0 {
		var keysBuf [16]string
		keys := keysBuf[:0]
		for k := range req.ExtraBody {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if first {
				first = false
			} else {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, req.ExtraBody[k], 0); err != nil {
				return dst, fmt.Errorf("extra_body.%s: %w", k, err)
			}
		}
	}
	return append(dst, '}'), nil
}

// maxValueDepth bounds the nesting of ExtraBody values.
const maxValueDepth = 64

// appendJSONValue encodes the value types that YAML and JSON decoding
// produce without reflection; anything else goes through encoding/json.
func appendJSONValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxValueDepth {
		return dst, errors.New("value nested too deeply")
	}
	var err error
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendJSONString(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case float64:
		return appendJSONFloat(dst, v)
	case json.Number:
		if !isJSONNumber(string(v)) {
			return dst, fmt.Errorf("invalid number %q", string(v))
		}
		return append(dst, v...), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendJSONValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, e)
		}
		return append(dst, ']'), nil
	case map[string]any:
		var keysBuf [16]string
		keys := keysBuf[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, v[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// isJSONNumber reports whether s is a JSON number.
func isJSONNumber(s string) bool {
	sc := jsonScanner{b: []byte(s)}
	return sc.number() == nil && sc.i == len(s)
}

// appendJSONFloat formats f as encoding/json does.
func appendJSONFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("unsupported value %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a quoted JSON string. Quotes, backslashes
// and control characters are escaped, U+2028 and U+2029 too (as
// encoding/json does, for JavaScript consumers), and invalid UTF-8 bytes
// become U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
