// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

// Bounds of LoadDataset: what it keeps in memory, whatever the file's
// size.
const (
	// DefaultDatasetPrompts is the number of prompts read when no other
	// bound is given: the file's first ones, in its order.
	DefaultDatasetPrompts = 100000
	// MaxDatasetTextBytes bounds the prompt text kept, in all.
	MaxDatasetTextBytes = 256 << 20
	// MaxDatasetPromptBytes bounds one prompt's text: a longer one is
	// an error (no server takes it; it is a wrong file or field).
	MaxDatasetPromptBytes = 4 << 20
	// maxDatasetLine bounds a JSONL line.
	maxDatasetLine = 16 << 20
)

// Dataset is a list of real prompts (bench --dataset), sent in its order
// in place of the synthesised ones of single-turn classes; each target
// walks it from the start and wraps around. It implements
// workload.PromptSource.
type Dataset struct {
	Path   string
	Format string // "sharegpt" (a JSON array) or "jsonl"
	// OutputLengths is report.DatasetOutputsDataset (the default) or
	// report.DatasetOutputsWorkload.
	OutputLengths string
	prompts       []workload.DatasetPrompt
	// withOutput counts the prompts with an output length of their own.
	withOutput int
	// skipped counts the entries left out, by reason.
	skipped map[string]int
	// truncated says why reading stopped before the file's end ("": it
	// did not).
	truncated string
	textBytes int
	// base is the offset in the file of the JSON array's reader's first
	// byte (white space and a byte-order mark before it were read).
	base int64

	mu   sync.Mutex
	next map[string]*atomic.Uint64 // by target
}

// Len is the number of prompts.
func (d *Dataset) Len() int { return len(d.prompts) }

// Next implements workload.PromptSource: the target's next prompt, with
// the output length the mode says.
func (d *Dataset) Next(target string) (workload.DatasetPrompt, bool) {
	if len(d.prompts) == 0 {
		return workload.DatasetPrompt{}, false
	}
	i := d.counter(target).Add(1) - 1
	p := d.prompts[i%uint64(len(d.prompts))]
	if d.OutputLengths == report.DatasetOutputsWorkload {
		p.OutputTokens = 0
	}
	return p, true
}

func (d *Dataset) counter(target string) *atomic.Uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next == nil {
		d.next = map[string]*atomic.Uint64{}
	}
	c := d.next[target]
	if c == nil {
		c = new(atomic.Uint64)
		d.next[target] = c
	}
	return c
}

// Info describes the dataset and what the run took of it.
func (d *Dataset) Info() *report.DatasetInfo {
	info := &report.DatasetInfo{Path: d.Path, Format: d.Format, Prompts: len(d.prompts), OutputLengths: d.OutputLengths,
		WithOutputLength: d.withOutput, Skipped: maps.Clone(d.skipped), Truncated: d.truncated}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.next) > 0 {
		info.Sent = map[string]int{}
		for t, c := range d.next {
			info.Sent[t] = int(c.Load())
		}
	}
	return info
}

// LoadDataset reads the prompts of path: a ShareGPT JSON array
// ([{"conversations": [{"from": "human", "value": ...}, {"from": "gpt",
// ...}]}]: the first human turn is the prompt, the gpt turn after it the
// reference answer), or JSON Lines of {"prompt": TEXT}, {"messages":
// [{"role": ..., "content": ...}]} or {"conversations": [...]}, each with
// an optional "output_tokens" (and, for prompt, "completion"; a trailing
// assistant message is the reference answer and is not sent). It reads at
// most maxPrompts prompts (0: DefaultDatasetPrompts) and
// MaxDatasetTextBytes of text, in the file's order; errors name the file
// and line. outputs is report.DatasetOutputsDataset (or empty) or
// report.DatasetOutputsWorkload.
func LoadDataset(ctx context.Context, path string, maxPrompts int, outputs string) (*Dataset, error) {
	switch outputs {
	case "":
		outputs = report.DatasetOutputsDataset
	case report.DatasetOutputsDataset, report.DatasetOutputsWorkload:
	default:
		return nil, fmt.Errorf("dataset output lengths %q: want %s or %s", outputs, report.DatasetOutputsDataset, report.DatasetOutputsWorkload)
	}
	if maxPrompts <= 0 {
		maxPrompts = DefaultDatasetPrompts
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, want a dataset file", path)
	}
	d := &Dataset{Path: path, OutputLengths: outputs, skipped: map[string]int{}}
	br := bufio.NewReaderSize(f, 1<<16)
	first, skipped, newlines, err := firstByte(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty dataset", path)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch first {
	case '[':
		d.Format = "sharegpt"
		d.base = skipped
		err = d.readArray(ctx, br, maxPrompts)
	case '{':
		d.Format = "jsonl"
		err = d.readLines(ctx, br, maxPrompts, newlines)
	default:
		return nil, fmt.Errorf("%s:%d: want a JSON array (ShareGPT) or JSON Lines of objects, got %q", path, newlines+1, first)
	}
	if err != nil {
		return nil, err
	}
	if len(d.prompts) == 0 {
		return nil, fmt.Errorf("%s: no usable prompt (%s)", path, d.describeSkipped())
	}
	return d, nil
}

// firstByte peeks at the first byte that is not white space (or a
// BOM), and says how many bytes and newlines came before it: the
// readers' positions start after them.
func firstByte(br *bufio.Reader) (b byte, skipped int64, newlines int, err error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, skipped, newlines, err
		}
		switch b {
		case '\n':
			newlines++
			fallthrough
		case ' ', '\t', '\r':
			skipped++
			continue
		case 0xEF: // a UTF-8 byte-order mark
			if bom, err := br.Peek(2); err == nil && bom[0] == 0xBB && bom[1] == 0xBF {
				_, _ = br.Discard(2)
				skipped += 3
				continue
			}
		}
		return b, skipped, newlines, br.UnreadByte()
	}
}

// datasetEntry is one entry of either format, as decoded.
type datasetEntry struct {
	Prompt        *string         `json:"prompt"`
	Completion    *string         `json:"completion"`
	Messages      []datasetMsg    `json:"messages"`
	Conversations []shareGPTTurn  `json:"conversations"`
	OutputTokens  json.RawMessage `json:"output_tokens"`
}

type datasetMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type shareGPTTurn struct {
	From  string `json:"from"`
	Value string `json:"value"`
}

// Reasons an entry is skipped (report.DatasetInfo.Skipped).
const (
	skipNoHuman = "no human turn"
	skipEmpty   = "empty prompt"
)

// add turns an entry into a prompt; an error is the entry's fault
// (without position: the caller adds it), a skip reason leaves it out.
func (d *Dataset) add(e *datasetEntry) (skip string, err error) {
	var p workload.DatasetPrompt
	var answer string
	hasAnswer := false
	switch {
	case e.Prompt != nil:
		p.Text = *e.Prompt
		if e.Completion != nil {
			answer, hasAnswer = *e.Completion, true
		}
	case e.Messages != nil:
		msgs := e.Messages
		if n := len(msgs); n > 1 && msgs[n-1].Role == "assistant" {
			answer, hasAnswer = msgs[n-1].Content, true
			msgs = msgs[:n-1]
		}
		for i, m := range msgs {
			if m.Role == "" {
				return "", fmt.Errorf("message %d has no role", i+1)
			}
			p.Messages = append(p.Messages, wire.Message{Role: m.Role, Content: m.Content})
		}
	case e.Conversations != nil:
		h := slices.IndexFunc(e.Conversations, func(t shareGPTTurn) bool { return t.From == "human" || t.From == "user" })
		if h < 0 {
			return skipNoHuman, nil
		}
		p.Text = e.Conversations[h].Value
		if h+1 < len(e.Conversations) {
			if a := e.Conversations[h+1]; a.From != "human" && a.From != "user" && a.From != "system" {
				answer, hasAnswer = a.Value, true
			}
		}
	default:
		return "", errors.New(`no prompt: want "prompt", "messages" or "conversations"`)
	}
	size := len(p.Text)
	empty := strings.TrimSpace(p.Text) == ""
	for _, m := range p.Messages {
		size += len(m.Content)
		empty = empty && strings.TrimSpace(m.Content) == ""
	}
	if empty {
		return skipEmpty, nil
	}
	if size > MaxDatasetPromptBytes {
		return "", fmt.Errorf("the prompt is %d bytes, more than %d", size, MaxDatasetPromptBytes)
	}
	if len(e.OutputTokens) > 0 && string(e.OutputTokens) != "null" {
		var n int
		if err := json.Unmarshal(e.OutputTokens, &n); err != nil || n < 1 {
			return "", fmt.Errorf("output_tokens %s: want a positive whole number", e.OutputTokens)
		}
		p.OutputTokens = n
	} else if hasAnswer {
		p.OutputTokens = max(workload.CountTokens(answer), 1)
	}
	if p.OutputTokens > 0 {
		d.withOutput++
	}
	d.prompts = append(d.prompts, p)
	d.textBytes += size
	return "", nil
}

// full says whether another prompt may be read, and records why not.
func (d *Dataset) full(maxPrompts int) bool {
	switch {
	case len(d.prompts) >= maxPrompts:
		d.truncated = fmt.Sprintf("read the first %d prompts", maxPrompts)
	case d.textBytes >= MaxDatasetTextBytes:
		d.truncated = fmt.Sprintf("read %d prompts, %d MiB of text, the most kept", len(d.prompts), MaxDatasetTextBytes>>20)
	default:
		return false
	}
	return true
}

func (d *Dataset) readLines(ctx context.Context, br *bufio.Reader, maxPrompts, line int) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		raw, err := readLine(br)
		if len(raw) > 0 || err == nil {
			line++
		}
		if errors.Is(err, errLineTooLong) {
			return fmt.Errorf("%s:%d: the line is longer than %d MiB", d.Path, line, maxDatasetLine>>20)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s:%d: %w", d.Path, line, err)
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 {
			if d.full(maxPrompts) {
				return nil
			}
			var e datasetEntry
			if uerr := json.Unmarshal(t, &e); uerr != nil {
				return fmt.Errorf("%s:%d: %v", d.Path, line, uerr)
			}
			skip, aerr := d.add(&e)
			if aerr != nil {
				return fmt.Errorf("%s:%d: %v", d.Path, line, aerr)
			}
			if skip != "" {
				d.skipped[skip]++
			}
		}
		if err != nil {
			return nil // EOF
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline, at most
// maxDatasetLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxDatasetLine {
			return nil, errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(buf, []byte("\n")), err
	}
}

// readArray streams a JSON array of entries: one entry in memory at a
// time.
func (d *Dataset) readArray(ctx context.Context, br *bufio.Reader, maxPrompts int) error {
	dec := json.NewDecoder(br)
	if _, err := dec.Token(); err != nil { // [
		return d.arrayError(dec.InputOffset(), err)
	}
	for dec.More() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.full(maxPrompts) {
			return nil
		}
		at := dec.InputOffset()
		var e datasetEntry
		if err := dec.Decode(&e); err != nil {
			return d.arrayError(at, err)
		}
		skip, err := d.add(&e)
		if err != nil {
			return d.arrayError(at, err)
		}
		if skip != "" {
			d.skipped[skip]++
		}
	}
	if _, err := dec.Token(); err != nil { // ]
		return d.arrayError(dec.InputOffset(), err)
	}
	return nil
}

// arrayError places err at its line: a syntax error's offset is the
// file's, a type error's is from the start of the entry, which began at
// offset at (the lines are counted again from the file: errors are
// rare, and the decoder reads ahead).
func (d *Dataset) arrayError(at int64, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		at = syn.Offset
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		at += typ.Offset
		err = fmt.Errorf("%s is a JSON %s, want %s", cmp.Or(typ.Field, "the entry"), typ.Value, typ.Type)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("the file ends inside the JSON array")
	}
	return fmt.Errorf("%s:%d: %v", d.Path, lineAt(d.Path, d.base+at), err)
}

// lineAt is the 1-based line of byte offset at in path (1 when it cannot
// tell).
func lineAt(path string, at int64) int {
	f, err := os.Open(path)
	if err != nil {
		return 1
	}
	defer f.Close()
	line := 1
	br := bufio.NewReader(f)
	for pos := int64(0); pos < at; pos++ {
		b, err := br.ReadByte()
		if err != nil {
			break
		}
		if b == '\n' {
			line++
		}
	}
	return line
}

func (d *Dataset) describeSkipped() string {
	if len(d.skipped) == 0 {
		return "the file holds no entry"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d.skipped)) {
		parts = append(parts, fmt.Sprintf("%d skipped: %s", d.skipped[k], k))
	}
	return strings.Join(parts, ", ")
}
