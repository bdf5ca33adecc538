// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// detect tells the format from the first non-blank line.
func detect(line []byte, opts Options) (Format, error) {
	b := bytes.TrimSpace(line)
	if len(b) > 0 && b[0] == '{' {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return "", fmt.Errorf("%w: the first line is neither a CSV header nor a JSON object (%v): %s", ErrUnknownFormat, err, quote(b))
		}
		has := func(ks ...string) bool {
			for _, k := range ks {
				if _, ok := keys[k]; !ok {
					return false
				}
			}
			return true
		}
		switch {
		case has("input_length", "output_length"):
			return Mooncake, nil
		case has("planned", "prompt_tokens", "output_tokens"):
			return LLMProbe, nil
		}
		if ok, err := looksLikeAccessLog(b, opts); err != nil {
			return "", err
		} else if ok {
			return AccessLog, nil
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.Sort(names)
		if len(names) > 12 {
			names = append(names[:12], "...")
		}
		return "", fmt.Errorf("%w: a JSON object with keys %s, neither Mooncake's (timestamp, input_length, output_length) nor llmprobe's (planned, prompt_tokens, output_tokens) nor an access log's token counts",
			ErrUnknownFormat, strings.Join(names, ", "))
	}
	cols := splitCSV(b)
	switch {
	case hasColumns(cols, azureColumns...):
		return Azure, nil
	case hasColumns(cols, burstColumns...):
		return BurstGPT, nil
	}
	return "", fmt.Errorf("%w: the first line %s is neither a CSV header of Azure's (%s) or BurstGPT's (%s) columns nor a JSON object",
		ErrUnknownFormat, quote(b), strings.Join(azureColumns, ","), strings.Join(burstColumns, ","))
}

// quote renders the start of a line for an error.
func quote(b []byte) string {
	const n = 120
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "..."
	}
	return strconv.Quote(string(b))
}

// tokenCount reads a record's prompt or output length: a whole number of
// at most MaxTokens.
func tokenCount(field, s string) (int, error) {
	n, err := wholeNumber(field, s, MaxTokens)
	if errors.Is(err, errTooLarge) {
		return 0, fieldErr(field, "%s tokens is more than the %d a record may ask for: no model's context window is that long", strings.TrimSpace(s), MaxTokens)
	}
	return n, err
}

// errTooLarge is wholeNumber's error for a number over its bound.
var errTooLarge = errors.New("too large")

// wholeNumber reads a non-negative whole number (12, 12.0, 1.2e3) of at
// most most (at most 2^31-1).
func wholeNumber(field string, s string, most int) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fieldErr(field, "empty")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fieldErr(field, "negative length %d", n)
		}
		if n > int64(most) {
			return 0, &fieldError{field, fmt.Errorf("%d is %w", n, errTooLarge)}
		}
		return int(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fieldErr(field, "not a number: %s", quote([]byte(s)))
	case f < 0:
		return 0, fieldErr(field, "negative length %s", s)
	case f != math.Trunc(f):
		return 0, fieldErr(field, "not a whole number: %s", s)
	case f > float64(most):
		return 0, &fieldError{field, fmt.Errorf("%s is %w", s, errTooLarge)}
	}
	return int(f), nil
}

// seconds reads a time in units of unit since an origin: a finite,
// non-negative number.
func sinceOrigin(field, s string, unit time.Duration) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fieldErr(field, "negative time %d", n)
		}
		if n > math.MaxInt64/int64(unit) {
			return 0, fieldErr(field, "%d is too large", n)
		}
		return time.Duration(n) * unit, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case s == "":
		return 0, fieldErr(field, "empty")
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fieldErr(field, "not a number: %s", quote([]byte(s)))
	case f < 0:
		return 0, fieldErr(field, "negative time %s", s)
	case f*float64(unit) > math.MaxInt64/2:
		return 0, fieldErr(field, "%s is too large", s)
	}
	return time.Duration(math.Round(f * float64(unit))), nil
}

// Mooncake.

type mooncakeLine struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  json.RawMessage `json:"input_length"`
	OutputLength json.RawMessage `json:"output_length"`
	HashIDs      json.RawMessage `json:"hash_ids"` // counted before decoded: see hashIDs
	SessionID    json.RawMessage `json:"session_id"`
}

func parseMooncake(line []byte, rec *Record) (stamp, bool, error) {
	if st, ok := fastMooncake(line, rec); ok {
		return st, true, nil
	}
	return parseMooncakeJSON(line, rec)
}

// parseMooncakeJSON is the full parser, and the one that makes the errors.
func parseMooncakeJSON(line []byte, rec *Record) (stamp, bool, error) {
	var m mooncakeLine
	if err := json.Unmarshal(line, &m); err != nil {
		return stamp{}, false, jsonErr(err)
	}
	ts, err := jsonNumber("timestamp", m.Timestamp)
	if err != nil {
		return stamp{}, false, err
	}
	in, err := jsonNumber("input_length", m.InputLength)
	if err != nil {
		return stamp{}, false, err
	}
	out, err := jsonNumber("output_length", m.OutputLength)
	if err != nil {
		return stamp{}, false, err
	}
	t, err := sinceOrigin("timestamp", ts, time.Millisecond)
	if err != nil {
		return stamp{}, false, err
	}
	if rec.PromptTokens, err = tokenCount("input_length", in); err != nil {
		return stamp{}, false, err
	}
	if rec.OutputTokens, err = tokenCount("output_length", out); err != nil {
		return stamp{}, false, err
	}
	if rec.HashIDs, err = hashIDs(m.HashIDs); err != nil {
		return stamp{}, false, err
	}
	if rec.Session, err = idText("session_id", m.SessionID); err != nil {
		return stamp{}, false, err
	}
	if err := checkName("session_id", rec.Session); err != nil {
		return stamp{}, false, err
	}
	return stamp{t: t, timed: true}, true, nil
}

// hashIDs decodes a line's hash_ids (valid JSON): null or absent is nil.
// A list of more than MaxHashIDs values is refused before it is decoded,
// so that a line costs a few bytes per id, not eight and the list's
// growth.
func hashIDs(raw json.RawMessage) ([]uint64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var ids []uint64
	if raw[0] == '[' {
		n := jsonListLen(raw)
		if n > MaxHashIDs {
			return nil, fieldErr("hash_ids", "%d ids, more than the %d a record may have", n, MaxHashIDs)
		}
		ids = make([]uint64, 0, n)
	}
	if err := json.Unmarshal(raw, &ids); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fieldErr("hash_ids", "%s is not a %s", te.Value, kind(te.Type.Kind().String()))
		}
		return nil, fieldErr("hash_ids", "%v", err)
	}
	return ids, nil
}

// jsonListLen counts the values of a valid JSON list: its commas outside
// strings and nested values, and one (none for an empty list).
func jsonListLen(raw []byte) int {
	n, depth, empty := 1, 0, true
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			empty = false
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\r', '\n':
		default:
			empty = false
		}
	}
	if empty && n == 1 {
		return 0
	}
	return n
}

// checkName refuses a session or model name longer than MaxNameBytes.
func checkName(field, name string) error {
	if len(name) > MaxNameBytes {
		return fieldErr(field, "%d bytes, longer than the %d a name may have", len(name), MaxNameBytes)
	}
	return nil
}

// jsonNumber is the text of a JSON number; absent or null is missing.
func jsonNumber(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", fieldErr(field, "missing")
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		return string(raw), nil
	}
	return "", fieldErr(field, "not a number: %s", quote(raw))
}

// idText renders a string or number id; null or absent is "".
func idText(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fieldErr(field, "%v", err)
		}
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fieldErr(field, "not a string or number")
	}
	return n.String(), nil
}

// jsonErr names the key of a decoding error where encoding/json knows it.
func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return fmt.Errorf("not a JSON object of the format (%s)", te.Value)
		}
		if i := strings.IndexByte(field, '.'); i >= 0 {
			field = field[:i]
		}
		return fieldErr(field, "%s is not a %s", te.Value, kind(te.Type.Kind().String()))
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

func kind(k string) string {
	switch k {
	case "uint64":
		return "non-negative whole number"
	case "slice":
		return "list"
	case "ptr", "struct":
		return "value of the expected type"
	}
	return k
}

// llmprobe's bench --requests.

type llmprobeLine struct {
	Planned      *string         `json:"planned"`
	PromptTokens json.RawMessage `json:"prompt_tokens"`
	OutputTokens json.RawMessage `json:"output_tokens"`
	Conversation string          `json:"conversation"`
	Turn         json.RawMessage `json:"turn"`
}

func parseLLMProbe(line []byte, rec *Record) (stamp, bool, error) {
	var m llmprobeLine
	if err := json.Unmarshal(line, &m); err != nil {
		return stamp{}, false, jsonErr(err)
	}
	if m.Planned == nil {
		return stamp{}, false, fieldErr("planned", "missing")
	}
	planned, err := time.Parse(time.RFC3339Nano, *m.Planned)
	if err != nil {
		return stamp{}, false, fieldErr("planned", "not an RFC 3339 time: %s", quote([]byte(*m.Planned)))
	}
	in, err := jsonNumber("prompt_tokens", m.PromptTokens)
	if err != nil {
		return stamp{}, false, err
	}
	out, err := jsonNumber("output_tokens", m.OutputTokens)
	if err != nil {
		return stamp{}, false, err
	}
	if rec.PromptTokens, err = tokenCount("prompt_tokens", in); err != nil {
		return stamp{}, false, err
	}
	if rec.OutputTokens, err = tokenCount("output_tokens", out); err != nil {
		return stamp{}, false, err
	}
	if err := checkName("conversation", m.Conversation); err != nil {
		return stamp{}, false, err
	}
	rec.Session = m.Conversation
	if len(m.Turn) > 0 && string(m.Turn) != "null" && m.Conversation != "" {
		turn, err := jsonNumber("turn", m.Turn)
		if err != nil {
			return stamp{}, false, err
		}
		if rec.Turn, err = wholeNumber("turn", turn, math.MaxInt32); err != nil {
			return stamp{}, false, err
		}
	}
	return stamp{t: time.Duration(planned.UnixNano()), timed: true}, true, nil
}

// The CSV formats.

var (
	azureColumns = []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
	burstColumns = []string{"Timestamp", "Request tokens", "Response tokens"}
)

// hasColumns: every name is a column (case-insensitively, spaces trimmed).
func hasColumns(cols []string, names ...string) bool {
	for _, n := range names {
		if column(cols, n) < 0 {
			return false
		}
	}
	return true
}

func column(cols []string, name string) int {
	for i, c := range cols {
		if strings.EqualFold(strings.TrimSpace(c), name) {
			return i
		}
	}
	return -1
}

// csvHeader is the column positions of a CSV trace.
type csvHeader struct {
	format               Format
	time, prompt, output int
	model                int // -1: none
	need                 int // fields a row must have
	timeName, promptName string
	outputName           string
	fields               []string // reused
}

func readHeader(line []byte, f Format) (*csvHeader, error) {
	cols := splitCSV(bytes.TrimSpace(line))
	names := azureColumns
	if f == BurstGPT {
		names = burstColumns
	}
	for _, n := range names {
		if column(cols, n) < 0 {
			return nil, fieldErr(n, "missing column (the %s header is %s; this one is %s)", f, strings.Join(names, ","), quote(line))
		}
	}
	h := &csvHeader{format: f, model: -1,
		time: column(cols, names[0]), prompt: column(cols, names[1]), output: column(cols, names[2]),
		timeName: names[0], promptName: names[1], outputName: names[2]}
	if f == BurstGPT {
		h.model = column(cols, "Model")
	}
	h.need = max(h.time, h.prompt, h.output, h.model) + 1
	return h, nil
}

// Azure's times: "2023-11-16 18:15:46.6805900", perhaps with a zone.
var azureLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05Z0700", time.RFC3339Nano, "2006-01-02T15:04:05"}

func parseAzureTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range azureLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fieldErr("TIMESTAMP", "not a time like 2023-11-16 18:15:46.6805900: %s", quote([]byte(s)))
}

func (h *csvHeader) parse(line []byte, rec *Record) (stamp, bool, error) {
	h.fields = splitCSVInto(h.fields[:0], line)
	if len(h.fields) < h.need {
		missing := h.timeName
		for _, c := range []struct {
			i    int
			name string
		}{{h.time, h.timeName}, {h.prompt, h.promptName}, {h.output, h.outputName}, {h.model, "Model"}} {
			if c.i >= len(h.fields) {
				missing = c.name
				break
			}
		}
		return stamp{}, false, fieldErr(missing, "missing: the row has %d columns, the header more", len(h.fields))
	}
	var err error
	if rec.PromptTokens, err = tokenCount(h.promptName, h.fields[h.prompt]); err != nil {
		return stamp{}, false, err
	}
	if rec.OutputTokens, err = tokenCount(h.outputName, h.fields[h.output]); err != nil {
		return stamp{}, false, err
	}
	var t time.Duration
	if h.format == Azure {
		at, err := parseAzureTime(h.fields[h.time])
		if err != nil {
			return stamp{}, false, err
		}
		t = time.Duration(at.UnixNano())
	} else {
		if t, err = sinceOrigin(h.timeName, h.fields[h.time], time.Second); err != nil {
			return stamp{}, false, err
		}
		if rec.OutputTokens == 0 {
			return stamp{}, false, nil // a failed request
		}
	}
	if h.model >= 0 {
		rec.Model = strings.TrimSpace(h.fields[h.model])
		if err := checkName("Model", rec.Model); err != nil {
			return stamp{}, false, err
		}
	}
	return stamp{t: t, timed: true}, true, nil
}

func splitCSV(line []byte) []string { return splitCSVInto(nil, line) }

// splitCSVInto splits one CSV line (RFC 4180 quoting, no line breaks
// inside fields: the traces have none).
func splitCSVInto(dst []string, line []byte) []string {
	for i := 0; ; {
		if i < len(line) && line[i] == '"' {
			var b strings.Builder
			j := i + 1
			for j < len(line) {
				if line[j] == '"' {
					if j+1 < len(line) && line[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					j++
					break
				}
				b.WriteByte(line[j])
				j++
			}
			k := bytes.IndexByte(line[j:], ',')
			if k < 0 {
				return append(dst, b.String()+string(line[j:]))
			}
			dst = append(dst, b.String()+string(line[j:j+k]))
			i = j + k + 1
			continue
		}
		k := bytes.IndexByte(line[i:], ',')
		if k < 0 {
			return append(dst, string(line[i:]))
		}
		dst = append(dst, string(line[i:i+k]))
		i += k + 1
	}
}
