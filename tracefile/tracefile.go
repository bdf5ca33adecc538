// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package tracefile reads the request traces that llmprobe mirrors and
// replays: published production traces and llmprobe's own records, one
// request at a time, streamed, with bounded memory whatever the file's
// size, gzip or zstd compressed or plain.
//
// # Formats
//
// The column names and units below were checked against the datasets'
// own repositories and the tools that replay them:
//
//   - Mooncake (kvcache-ai/Mooncake, FAST25-release/traces: conversation,
//     tool-agent and synthetic traces; Apache-2.0): JSON lines
//     {"timestamp": 27482, "input_length": 6955, "output_length": 52,
//     "hash_ids": [46, 47, ...]}. timestamp is the arrival in
//     milliseconds since the trace's first request (equal for requests
//     that arrive together, the file sorted by it); hash_ids are the
//     prompt's blocks of 512 tokens (Options.BlockSize), equal leading ids
//     meaning a shared prefix. A "session_id" key, which some converters
//     (aiperf) add, becomes Record.Session.
//   - Azure LLM inference (Azure/AzurePublicDataset,
//     AzureLLMInferenceDataset2023 code/conv traces, and the week-long
//     2024 traces, which keep the same columns; CC-BY 4.0): CSV with the
//     header TIMESTAMP,ContextTokens,GeneratedTokens and times like
//     2023-11-16 18:15:46.6805900 (read as UTC unless a zone such as
//     +00:00 follows; 0 to 9 fraction digits; the 2024 files' exact time
//     text was not seen here, hence the tolerance).
//   - BurstGPT (HPMLL/BurstGPT, CC-BY 4.0): CSV with the header
//     Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type;
//     Timestamp is seconds since the trace's start. Rows with 0 Response
//     tokens are the trace's failed requests (BurstGPT_without_fails_*.csv
//     drops them): the reader skips them, since a request that asks for
//     no output cannot be sent, and counts them (Reader.Skipped).
//   - llmprobe: the per-request JSON lines of `llmprobe bench --requests`
//     (planned, prompt_tokens, output_tokens, conversation, turn), every
//     line a record (warm-up and failed requests too: they were sent),
//     written in completion order, so planned times are not sorted.
//   - Access logs: the JSON lines `llmprobe fit` reads, through the same
//     line parser (AccessLogParser); lines without token counts are
//     skipped and counted, as fit does.
//
// # Detection, errors and bounds
//
// Compression is recognised by its magic bytes (gzip 1f 8b, zstd 28 b5 2f
// fd), the format (Auto) by the first non-blank line: a CSV header naming
// the columns above, or a JSON object with Mooncake's or llmprobe's keys,
// else one whose token counts the access-log field paths find. A bad line
// is a *LineError, "file:line: field: problem", and reading stops there:
// a missing column or key, a value that is not a whole number, a negative
// length, a prompt or output longer than MaxTokens (4 Mi tokens), more
// than MaxHashIDs (65,536) hash ids, a session or model name longer than
// MaxNameBytes (256), a line longer than MaxLineBytes (1 MiB), or a
// timestamp more than Options.MaxDisorder (default 1 s; 10 minutes for
// llmprobe and access logs, which are written as requests finish, not as
// they start) before the latest one seen. Offset is measured from the
// first record in file order, so in a file that is not sorted it may be
// negative by at most that tolerance. Between records the reader keeps only the first timestamp,
// the latest one and its line buffer; records come in file order. A zstd
// frame may ask for a window of at most 16 MiB (zstd's levels up to 19
// use 8 MiB; a --long or --ultra file asking for more is refused).
// Mooncake lines of the usual shape take a fast path; every other line,
// and every error, goes through encoding/json.
//
// tracefile imports no llmprobe package but internal/bounded.
package tracefile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/llmprobe/llmprobe/internal/bounded"
)

// Format names a trace format.
type Format string

// The formats.
const (
	Auto      Format = "auto"
	Mooncake  Format = "mooncake"  // JSONL: timestamp (ms), input_length, output_length, hash_ids (blocks of BlockSize tokens)
	Azure     Format = "azure"     // CSV: TIMESTAMP, ContextTokens, GeneratedTokens
	BurstGPT  Format = "burstgpt"  // CSV: Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type
	LLMProbe  Format = "llmprobe"  // llmprobe bench --requests JSONL
	AccessLog Format = "accesslog" // the JSON access logs llmprobe fit reads
)

// Formats are the formats a file can be named with, Auto first.
var Formats = []Format{Auto, Mooncake, Azure, BurstGPT, LLMProbe, AccessLog}

// ParseFormat reads a format name ("" is Auto).
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Auto, nil
	}
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown trace format %q (want one of auto, mooncake, azure, burstgpt, llmprobe, accesslog)", s)
}

// DefaultBlockSize is Mooncake's tokens per hash_ids block.
const DefaultBlockSize = 512

// MaxLineBytes bounds one line of a trace (hash_ids of a long prompt make
// long lines: MaxHashIDs ids of up to 10 digits fit in 1 MiB).
const MaxLineBytes = 1 << 20

// Bounds of a record: a longer prompt or output, or more hash ids, is a
// *LineError, so that what a trace asks for is refused where it is read,
// by every reader alike, rather than allocated by what sends or samples
// it (a prompt's text takes 4 to 8 bytes per token, a hash id 8 bytes
// and one more per block of a session's synthesised prefix).
const (
	// MaxTokens bounds a record's prompt and output lengths: twice the
	// longest context window served (2 Mi tokens), far above real traces'
	// prompts (Mooncake's reach about 130,000 tokens).
	MaxTokens = 1 << 22
	// MaxHashIDs bounds a record's hash ids: a MaxTokens prompt in blocks
	// of 64 tokens, or 32 Mi tokens in Mooncake's 512 (its records have
	// a few hundred at most). 512 KiB per record.
	MaxHashIDs = 1 << 16
	// MaxNameBytes bounds a record's session and model names, which
	// samples keep per record or session (ids and model names are
	// tens of bytes: a UUID is 36).
	MaxNameBytes = 256
)

// Record is one request of a trace, in file order.
type Record struct {
	Line         int           // 1-based line of the file (a CSV header is line 1)
	Offset       time.Duration // arrival since the trace's first record (0 for the first)
	PromptTokens int
	OutputTokens int
	HashIDs      []uint64 // prefix blocks (Mooncake); nil when the format has none
	Session      string   // conversation/session id where the format has one, else ""
	Turn         int      // turn within Session (1-based) where known, else 0
	Model        string   // where the format names it (BurstGPT), else ""
}

// Options configure a Reader.
type Options struct {
	Format    Format // "" = Auto
	BlockSize int    // tokens per hash_ids block; 0 = 512 (Mooncake's)
	// MaxDisorder is how far a record's time may fall behind the latest
	// time before it: 0 is the format's default (1 s; 10 min for llmprobe
	// and access logs), negative is no check.
	MaxDisorder time.Duration
	// AccessLog are the access-log format's field paths; empty lists take
	// fit's defaults (DefaultPromptFields, ...).
	AccessLog AccessLogFields
}

// LineError is a bad line: reading stops there.
type LineError struct {
	File  string
	Line  int
	Field string // the column or key, "" when the line as a whole is wrong
	Err   error
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Field, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ErrLineTooLong is the error of a line longer than MaxLineBytes.
var ErrLineTooLong = fmt.Errorf("line longer than %s", bounded.Size(MaxLineBytes))

// ErrUnknownFormat is the error of a file whose format Auto cannot tell.
var ErrUnknownFormat = errors.New("not a trace of a known format")

// Reader reads the records of a trace.
type Reader struct {
	name   string
	opts   Options
	format Format
	closer []io.Closer

	lines   *lineReader
	pending []byte // the first line, read by detection
	parse   func(line []byte, rec *Record) (stamp, bool, error)
	header  *csvHeader

	// The time origin: the first record's time and the latest one.
	haveFirst bool
	first     time.Duration
	latest    time.Duration
	disorder  time.Duration

	skipped int
	err     error // sticky
}

// Open opens a trace file, gzip or zstd (by magic bytes) or plain, and
// detects its format when opts.Format is Auto. Memory is bounded whatever
// the file size. path must be a regular file or a pipe.
func Open(path string, opts Options) (*Reader, error) {
	return OpenContext(context.Background(), path, opts)
}

// OpenContext is Open whose reads give way to ctx.
func OpenContext(ctx context.Context, path string, opts Options) (*Reader, error) {
	f, err := bounded.Open(ctx, path, 0)
	if err != nil {
		return nil, err // names the file
	}
	r, err := NewReader(f, path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = append(r.closer, f)
	return r, nil
}

// NewReader reads a trace from r; name is used in errors. Close releases
// the decompressor (not r).
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	if opts.Format == "" {
		opts.Format = Auto
	}
	if _, err := ParseFormat(string(opts.Format)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if opts.BlockSize < 0 {
		return nil, fmt.Errorf("%s: negative block size %d", name, opts.BlockSize)
	}
	if opts.BlockSize == 0 {
		opts.BlockSize = DefaultBlockSize
	}
	rd := &Reader{name: name, opts: opts}
	src, err := rd.decompress(r)
	if err != nil {
		return nil, err
	}
	rd.lines = newLineReader(src)
	if err := rd.start(); err != nil {
		rd.Close()
		return nil, err
	}
	return rd, nil
}

// zstdMaxWindow bounds the window a zstd frame may ask for: zstd's levels
// up to 19 use at most 8 MiB; a --long or --ultra file asking for more is
// refused rather than allowed to take the memory.
const zstdMaxWindow = 16 << 20

func (rd *Reader) decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", rd.name, err)
		}
		rd.closer = append(rd.closer, zr)
		return zr, nil
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", rd.name, err)
		}
		rd.closer = append(rd.closer, zstdCloser{zr})
		return zstdErrors{zr, rd.name}, nil
	}
	return br, nil
}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

// zstdErrors names the decompressor in its errors.
type zstdErrors struct {
	d    *zstd.Decoder
	name string
}

func (z zstdErrors) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("zstd: %w", err)
	}
	return n, err
}

// start reads the first non-blank line and chooses the parser.
func (rd *Reader) start() error {
	var first []byte
	for {
		line, err := rd.lines.next()
		if err == io.EOF && line == nil {
			if rd.opts.Format == Auto {
				return fmt.Errorf("%s: empty: %w", rd.name, ErrUnknownFormat)
			}
			break
		}
		if err != nil && err != io.EOF {
			return rd.lineErr("", err)
		}
		if rd.lines.n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
		}
		if len(bytes.TrimSpace(line)) > 0 {
			first = append([]byte(nil), line...)
			break
		}
		if err == io.EOF {
			if rd.opts.Format == Auto {
				return fmt.Errorf("%s: empty: %w", rd.name, ErrUnknownFormat)
			}
			break
		}
	}
	f := rd.opts.Format
	if f == Auto && first != nil {
		var err error
		if f, err = detect(first, rd.opts); err != nil {
			return fmt.Errorf("%s:%d: %w", rd.name, rd.lines.n, err)
		}
	}
	rd.format = f
	switch rd.opts.MaxDisorder {
	case 0:
		rd.disorder = time.Second
		if f == LLMProbe || f == AccessLog {
			rd.disorder = 10 * time.Minute
		}
	default:
		rd.disorder = rd.opts.MaxDisorder
	}
	var err error
	switch f {
	case Mooncake:
		rd.parse = parseMooncake
		rd.pending = first
	case LLMProbe:
		rd.parse = parseLLMProbe
		rd.pending = first
	case Azure, BurstGPT:
		if first == nil {
			return fmt.Errorf("%s: empty: no CSV header", rd.name)
		}
		if rd.header, err = readHeader(first, f); err != nil {
			return rd.asLineErr(err)
		}
		rd.parse = rd.header.parse
	case AccessLog:
		p, err := NewAccessLogParser(rd.opts.AccessLog)
		if err != nil {
			return fmt.Errorf("%s: %w", rd.name, err)
		}
		rd.parse = p.parseRecord
		rd.pending = first
	}
	return nil
}

func (rd *Reader) lineErr(field string, err error) *LineError {
	return &LineError{File: rd.name, Line: rd.lines.n, Field: field, Err: err}
}

// asLineErr places a parser's error at the current line.
func (rd *Reader) asLineErr(err error) *LineError {
	var fe *fieldError
	if errors.As(err, &fe) {
		return rd.lineErr(fe.field, fe.err)
	}
	return rd.lineErr("", err)
}

// Format is the trace's format, detected or named.
func (rd *Reader) Format() Format { return rd.format }

// BlockSize is the tokens per hash_ids block.
func (rd *Reader) BlockSize() int { return rd.opts.BlockSize }

// Skipped is the number of lines skipped so far: BurstGPT's failed
// requests, access-log lines without token counts. Blank lines are not
// counted.
func (rd *Reader) Skipped() int { return rd.skipped }

// Next returns the next record, io.EOF at the end. A bad line is a
// *LineError (file:line: field: what is wrong) and reading stops there.
func (rd *Reader) Next() (Record, error) {
	if rd.err != nil {
		return Record{}, rd.err
	}
	rec, err := rd.next()
	if err != nil {
		rd.err = err
	}
	return rec, err
}

func (rd *Reader) next() (Record, error) {
	for {
		var line []byte
		var err error
		if rd.pending != nil {
			line, rd.pending = rd.pending, nil
		} else {
			line, err = rd.lines.next()
			if err != nil && err != io.EOF {
				return Record{}, rd.lineErr("", err)
			}
			if err == io.EOF && line == nil {
				return Record{}, io.EOF
			}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err == io.EOF {
				return Record{}, io.EOF
			}
			continue
		}
		var rec Record
		at, ok, perr := rd.parse(line, &rec)
		if perr != nil {
			return Record{}, rd.asLineErr(perr)
		}
		if !ok {
			rd.skipped++
			if err == io.EOF {
				return Record{}, io.EOF
			}
			continue
		}
		rec.Line = rd.lines.n
		if at.timed {
			if !rd.haveFirst {
				rd.haveFirst, rd.first, rd.latest = true, at.t, at.t
			}
			if rd.disorder >= 0 && at.t < rd.latest-rd.disorder {
				return Record{}, rd.lineErr(rd.timeField(), fmt.Errorf("time goes backwards: %v before the latest earlier record (line order must follow time within %v)",
					rd.latest-at.t, rd.disorder))
			}
			rd.latest = max(rd.latest, at.t)
			rec.Offset = at.t - rd.first
		} else if rd.haveFirst {
			rec.Offset = rd.latest - rd.first
		}
		return rec, nil
	}
}

// PromptField names the format's prompt length, for errors about it:
// "input_length" (Mooncake), "prompt_tokens" (llmprobe), the column of
// the CSV formats, an access log's first prompt path.
func (rd *Reader) PromptField() string {
	switch rd.format {
	case Mooncake:
		return "input_length"
	case LLMProbe:
		return "prompt_tokens"
	case Azure, BurstGPT:
		return rd.header.promptName
	}
	if len(rd.opts.AccessLog.Prompt) > 0 {
		return rd.opts.AccessLog.Prompt[0]
	}
	return DefaultPromptFields[0]
}

func (rd *Reader) timeField() string {
	switch rd.format {
	case Mooncake:
		return "timestamp"
	case Azure:
		return "TIMESTAMP"
	case BurstGPT:
		return "Timestamp"
	case LLMProbe:
		return "planned"
	}
	return "time"
}

// Close releases the decompressor and, for Open, the file.
func (rd *Reader) Close() error {
	var first error
	for i := len(rd.closer) - 1; i >= 0; i-- {
		if err := rd.closer[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	rd.closer = nil
	return first
}

// stamp is a record's time: since the Unix epoch for formats with
// absolute times, since the trace's start for the others.
type stamp struct {
	t     time.Duration
	timed bool // false: the line has no time (an access log's may not)
}

// fieldError is a parser's complaint about one field.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field string, format string, args ...any) error {
	return &fieldError{field, fmt.Errorf(format, args...)}
}

// lineReader reads lines of at most MaxLineBytes into a reused buffer.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
	n   int // lines read
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its line ending (valid until the
// next call). At the end it returns the last unterminated line with
// io.EOF, or nil and io.EOF.
func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		if len(l.buf)+len(chunk) > MaxLineBytes+2 { // +2: \r\n
			l.n++
			return nil, ErrLineTooLong
		}
		l.buf = append(l.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && len(l.buf) == 0 {
			if err == io.EOF {
				return nil, io.EOF
			}
			l.n++
			return nil, err
		}
		l.n++
		line := bytes.TrimSuffix(l.buf, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > MaxLineBytes {
			return nil, ErrLineTooLong
		}
		return line, err
	}
}
