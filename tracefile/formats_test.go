// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// csvRows reads a fixture with encoding/csv: the reference the reader is
// checked against.
func csvRows(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAzureFixtures(t *testing.T) {
	for _, name := range []string{"azure_2023.csv", "azure_2024.csv"} {
		t.Run(name, func(t *testing.T) {
			path := "testdata/" + name
			rows := csvRows(t, path)
			r, recs := readAll(t, path, Options{})
			if r.Format() != Azure || r.Skipped() != 0 || len(recs) != len(rows)-1 {
				t.Fatalf("format %s, %d records, %d skipped; want azure, %d, 0", r.Format(), len(recs), r.Skipped(), len(rows)-1)
			}
			layout := "2006-01-02 15:04:05"
			if strings.HasSuffix(rows[1][0], "+00:00") {
				layout += "Z07:00"
			}
			first, err := time.Parse(layout, rows[1][0])
			if err != nil {
				t.Fatal(err)
			}
			for i, rec := range recs {
				row := rows[i+1]
				at, err := time.Parse(layout, row[0])
				if err != nil {
					t.Fatal(err)
				}
				if rec.Line != i+2 || rec.Offset != at.Sub(first) || rec.PromptTokens != atoi(t, row[1]) || rec.OutputTokens != atoi(t, row[2]) ||
					rec.HashIDs != nil || rec.Session != "" || rec.Model != "" {
					t.Fatalf("record %d = %+v, want %v", i, rec, row)
				}
			}
			if recs[len(recs)-1].Offset < time.Minute {
				t.Errorf("last offset %v: the fixture spans minutes", recs[len(recs)-1].Offset)
			}
		})
	}
}

// TestBurstGPTFixture: failed requests (0 response tokens) are skipped
// and counted; offsets are seconds from the first row.
func TestBurstGPTFixture(t *testing.T) {
	path := "testdata/burstgpt.csv"
	rows := csvRows(t, path)
	r, recs := readAll(t, path, Options{})
	if r.Format() != BurstGPT {
		t.Fatalf("format %s", r.Format())
	}
	first := atoi(t, rows[1][0])
	var want []Record
	failed := 0
	for i, row := range rows[1:] {
		if row[3] == "0" {
			failed++
			continue
		}
		want = append(want, Record{Line: i + 2, Offset: time.Duration(atoi(t, row[0])-first) * time.Second,
			PromptTokens: atoi(t, row[2]), OutputTokens: atoi(t, row[3]), Model: row[1]})
	}
	if failed == 0 || r.Skipped() != failed || len(recs) != len(want) {
		t.Fatalf("%d records, %d skipped; want %d and %d (the failures)", len(recs), r.Skipped(), len(want), failed)
	}
	for i := range want {
		if g, w := recs[i], want[i]; g.Line != w.Line || g.Offset != w.Offset || g.PromptTokens != w.PromptTokens ||
			g.OutputTokens != w.OutputTokens || g.Model != w.Model || g.HashIDs != nil {
			t.Fatalf("record %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestLLMProbeFixture: bench --requests lines, in completion order, so
// planned times fall behind by up to a request's duration (within the
// 10-minute default) and offsets from the first line may be negative.
func TestLLMProbeFixture(t *testing.T) {
	path := "testdata/llmprobe_requests.jsonl"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	r, recs := readAll(t, path, Options{})
	if r.Format() != LLMProbe || len(recs) != len(lines) {
		t.Fatalf("format %s, %d records; want llmprobe, %d", r.Format(), len(recs), len(lines))
	}
	var first time.Time
	negative, sessions := false, 0
	for i, rec := range recs {
		var w struct {
			Conversation string    `json:"conversation"`
			Turn         int       `json:"turn"`
			Planned      time.Time `json:"planned"`
			PromptTokens int       `json:"prompt_tokens"`
			OutputTokens int       `json:"output_tokens"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &w); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = w.Planned
		}
		if rec.Line != i+1 || rec.Offset != w.Planned.Sub(first) || rec.PromptTokens != w.PromptTokens || rec.OutputTokens != w.OutputTokens ||
			rec.Session != w.Conversation || rec.Turn != w.Turn {
			t.Fatalf("record %d = %+v, want %s", i, rec, lines[i])
		}
		negative = negative || rec.Offset < 0
		if rec.Session != "" {
			sessions++
		}
	}
	if !negative || sessions == 0 {
		t.Errorf("the fixture should hold out-of-order lines and conversations (negative offsets %v, %d conversation turns)", negative, sessions)
	}
	// With the trace formats' 1 s tolerance the completion order is refused.
	_, err = readErr(t, "r.jsonl", string(raw), Options{MaxDisorder: time.Millisecond})
	var le *LineError
	if !errors.As(err, &le) || le.Field != "planned" {
		t.Errorf("1 ms tolerance: %v, want a planned: time goes backwards error", err)
	}
}

// TestAccessLogFixture: the lines fit reads, through the same parser;
// lines without token counts are skipped.
func TestAccessLogFixture(t *testing.T) {
	r, recs := readAll(t, "testdata/accesslog.jsonl", Options{})
	if r.Format() != AccessLog || len(recs) != 100 || r.Skipped() != 4 {
		t.Fatalf("format %s, %d records, %d skipped; want accesslog, 100, 4", r.Format(), len(recs), r.Skipped())
	}
	// Compare with fit's own reading of the same lines: the parser's.
	p, err := NewAccessLogParser(AccessLogFields{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile("testdata/accesslog.jsonl")
	var firstT time.Time
	var latest time.Duration
	i := 0
	for n, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		l, reason := p.Parse([]byte(line))
		if reason != "" {
			if reason != SkipNoPrompt {
				t.Errorf("line %d skipped as %q", n+1, reason)
			}
			continue
		}
		rec := recs[i]
		i++
		want := latest
		if at, ok := l.Time(); ok {
			if firstT.IsZero() {
				firstT = at
			}
			want = at.Sub(firstT)
			latest = max(latest, want)
		}
		m, _ := l.Model()
		if rec.Line != n+1 || rec.PromptTokens != int(l.Prompt) || rec.OutputTokens != int(l.Completion) || rec.Model != m || rec.Offset != want {
			t.Fatalf("record %+v, want line %d %s (offset %v)", rec, n+1, line, want)
		}
	}
}

// TestDetect: every fixture is told by its content, whatever its name.
func TestDetect(t *testing.T) {
	for name, want := range map[string]Format{
		"mooncake.jsonl": Mooncake, "mooncake.jsonl.gz": Mooncake, "mooncake.jsonl.zst": Mooncake,
		"azure_2023.csv": Azure, "azure_2024.csv": Azure, "burstgpt.csv": BurstGPT,
		"llmprobe_requests.jsonl": LLMProbe, "accesslog.jsonl": AccessLog,
	} {
		raw, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(strings.NewReader(string(raw)), "trace", Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Format() != want {
			t.Errorf("%s detected as %s, want %s", name, r.Format(), want)
		}
		r.Close()
	}
}

// TestCSVErrors: header and row problems name the line and the column.
func TestCSVErrors(t *testing.T) {
	azure := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,10,2\n"
	burst := "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,10,2,12,API log\n"
	for _, c := range []struct {
		name, content string
		opts          Options
		field, want   string
	}{
		{"azure short row", azure + "2023-11-16 18:15:47,10\n", Options{}, "GeneratedTokens", "t.csv:3: GeneratedTokens: missing"},
		{"azure not a number", azure + "2023-11-16 18:15:47,ten,2\n", Options{}, "ContextTokens", `t.csv:3: ContextTokens: not a number: "ten"`},
		{"azure negative", azure + "2023-11-16 18:15:47,10,-2\n", Options{}, "GeneratedTokens", "t.csv:3: GeneratedTokens: negative length -2"},
		{"azure bad time", azure + "16/11/2023 18:15,10,2\n", Options{}, "TIMESTAMP", `t.csv:3: TIMESTAMP: not a time like 2023-11-16 18:15:46.6805900: "16/11/2023 18:15"`},
		{"azure backwards", azure + "2023-11-16 18:15:44.6,10,2\n", Options{}, "TIMESTAMP", "t.csv:3: TIMESTAMP: time goes backwards: 2.08059s"},
		{"azure empty field", azure + "2023-11-16 18:15:47,,2\n", Options{}, "ContextTokens", "t.csv:3: ContextTokens: empty"},
		{"azure header missing column", "TIMESTAMP,ContextTokens\n", Options{Format: Azure}, "GeneratedTokens", "t.csv:1: GeneratedTokens: missing column"},
		{"burst header named as azure", burst, Options{Format: Azure}, "ContextTokens", "t.csv:1: ContextTokens: missing column"},
		{"burst negative time", burst + "-1,ChatGPT,10,2,12,API log\n", Options{}, "Timestamp", "t.csv:3: Timestamp: negative time -1"},
		{"burst not a number", burst + "6,ChatGPT,10,x,12,API log\n", Options{}, "Response tokens", `t.csv:3: Response tokens: not a number: "x"`},
		{"burst short row", burst + "6,ChatGPT\n", Options{}, "Request tokens", "t.csv:3: Request tokens: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readErr(t, "t.csv", c.content, c.opts)
			var le *LineError
			if !errors.As(err, &le) || le.Field != c.field || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %v (field %q), want %q... (field %q)", err, fieldOf(le), c.want, c.field)
			}
		})
	}
}

func fieldOf(le *LineError) string {
	if le == nil {
		return "<no LineError>"
	}
	return le.Field
}

// TestCSVQuotingAndColumnOrder: quoted fields, spaces around names, a
// byte order mark, CRLF and columns in another order are read.
func TestCSVQuotingAndColumnOrder(t *testing.T) {
	content := "\xef\xbb\xbf Log Type ,Response tokens,Request tokens,Timestamp,Model\r\n" +
		`"API log, v2",20,10,1.5,"GPT-4 ""turbo"""` + "\r\n" +
		`Conversation log,0,10,2,ChatGPT` + "\r\n" +
		`Conversation log,3,4,3.25,ChatGPT` + "\r\n"
	recs, err := readErr(t, "t.csv", content, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Model != `GPT-4 "turbo"` || recs[0].PromptTokens != 10 || recs[0].OutputTokens != 20 ||
		recs[1].Line != 4 || recs[1].Offset != 1750*time.Millisecond || recs[1].Model != "ChatGPT" {
		t.Errorf("records %+v", recs)
	}
}

// TestLLMProbeErrors: the bench's lines are checked like the traces'.
func TestLLMProbeErrors(t *testing.T) {
	good := `{"planned":"2026-03-02T10:00:00Z","prompt_tokens":1,"output_tokens":1}` + "\n"
	for _, c := range []struct{ line, field, want string }{
		{`{"planned":"yesterday","prompt_tokens":1,"output_tokens":1}`, "planned", `t.jsonl:2: planned: not an RFC 3339 time: "yesterday"`},
		{`{"planned":"2026-03-02T10:00:00Z","output_tokens":1}`, "prompt_tokens", "t.jsonl:2: prompt_tokens: missing"},
		{`{"planned":"2026-03-02T10:00:00Z","prompt_tokens":1,"output_tokens":"1"}`, "output_tokens", `t.jsonl:2: output_tokens: not a number: "\"1\""`},
		{`{"planned":"2026-03-02T10:00:00Z","prompt_tokens":1,"output_tokens":-1}`, "output_tokens", "t.jsonl:2: output_tokens: negative length -1"},
		{`{"planned":"2026-03-02T10:00:00Z","prompt_tokens":1,"output_tokens":1,"conversation":"c","turn":1.5}`, "turn", "t.jsonl:2: turn: not a whole number: 1.5"},
		{`{"planned":"2026-03-02T09:49:59Z","prompt_tokens":1,"output_tokens":1}`, "planned", "t.jsonl:2: planned: time goes backwards: 10m1s"},
		{`{"planned":7,"prompt_tokens":1,"output_tokens":1}`, "planned", "t.jsonl:2: planned: number is not a"},
	} {
		_, err := readErr(t, "t.jsonl", good+c.line+"\n", Options{})
		var le *LineError
		if !errors.As(err, &le) || le.Field != c.field || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v (field %q), want %q... (field %q)", c.line, err, fieldOf(le), c.want, c.field)
		}
	}
}

// TestAccessLogFieldsOption: custom paths are used for detection and
// reading; a bad path is refused naming the file.
func TestAccessLogFieldsOption(t *testing.T) {
	content := `{"req": {"in": 12, "out": 3}, "at": "2026-03-02T10:00:01Z"}` + "\n" + `{"req": {"in": 5.6, "out": 1}, "at": "2026-03-02T10:00:03Z"}` + "\n"
	opts := Options{AccessLog: AccessLogFields{Prompt: []string{"req.in"}, Completion: []string{"req.out"}, Time: []string{"at"}}}
	recs, err := readErr(t, "t.log", content, opts)
	if err != nil || len(recs) != 2 || recs[0].PromptTokens != 12 || recs[1].PromptTokens != 6 || recs[1].Offset != 2*time.Second {
		t.Errorf("records %+v, %v", recs, err)
	}
	if _, err := readErr(t, "t.log", content, Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("default paths: %v, want unknown format", err)
	}
	opts.AccessLog.Prompt = []string{"req..in"}
	if _, err := readErr(t, "t.log", content, opts); err == nil || !strings.Contains(err.Error(), `t.log:1: invalid field path "req..in": empty key`) {
		t.Errorf("bad path: %v", err)
	}
}
