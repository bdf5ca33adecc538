// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// mooncakeIDs is a Mooncake line with n hash ids (all 7: the shortest
// line that holds them) and extra keys, if any, before them.
func mooncakeIDs(n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"timestamp": 0, "input_length": 100, "output_length": 1, %s"hash_ids": [`, extra)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('7')
	}
	b.WriteString("]}")
	return b.String()
}

// TestRecordBounds: a record whose prompt or output is longer than
// MaxTokens, that has more than MaxHashIDs hash ids, or whose session or
// model name is longer than MaxNameBytes, is a *LineError naming its file,
// line and field in every format (the fast path and the full parser
// alike); a record at the bounds is read.
func TestRecordBounds(t *testing.T) {
	over := fmt.Sprint(MaxTokens + 1)
	at := fmt.Sprint(MaxTokens)
	azure := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,10,2\n"
	burst := "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,10,2,12,API log\n"
	llmprobe := `{"planned":"2026-03-02T10:00:00Z","prompt_tokens":1,"output_tokens":1}` + "\n"
	access := `{"usage": {"prompt_tokens": 3, "completion_tokens": 1}}` + "\n"
	mooncake := `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}` + "\n"
	tooLong := fmt.Sprintf("%s tokens is more than the %d a record may ask for", over, MaxTokens)
	longName := strings.Repeat("x", MaxNameBytes+1)
	nameTooLong := fmt.Sprintf("%d bytes, longer than the %d a name may have", MaxNameBytes+1, MaxNameBytes)
	for _, c := range []struct {
		name, content string
		field, want   string // "": read without error
	}{
		{"mooncake input", mooncake + `{"timestamp": 1, "input_length": 2147483647, "output_length": 2}`, "input_length", "t:2: input_length: 2147483647 tokens is more than"},
		{"mooncake input over by one", mooncake + `{"timestamp": 1, "input_length": ` + over + `, "output_length": 2}`, "input_length", "t:2: input_length: " + tooLong},
		{"mooncake input as a float", mooncake + `{"timestamp": 1, "input_length": 4.194305e6, "output_length": 2}`, "input_length", "t:2: input_length: 4.194305e6 tokens is more than"},
		{"mooncake output", mooncake + `{"timestamp": 1, "input_length": 2, "output_length": ` + over + `}`, "output_length", "t:2: output_length: " + tooLong},
		{"mooncake session output", mooncake + `{"timestamp": 1, "input_length": 2, "output_length": ` + over + `, "session_id": "s"}`, "output_length", "t:2: output_length: " + tooLong},
		{"mooncake at the bound", mooncake + `{"timestamp": 1, "input_length": ` + at + `, "output_length": ` + at + `}`, "", ""},
		{"hash ids", mooncake + mooncakeIDs(MaxHashIDs+1, ""), "hash_ids", fmt.Sprintf("t:2: hash_ids: %d ids, more than the %d a record may have", MaxHashIDs+1, MaxHashIDs)},
		{"hash ids, full parser", mooncake + mooncakeIDs(MaxHashIDs+1, `"session_id": "s", `), "hash_ids", fmt.Sprintf("t:2: hash_ids: %d ids, more than", MaxHashIDs+1)},
		{"hash ids filling a line", mooncake + mooncakeIDs((MaxLineBytes-100)/2, ""), "hash_ids", fmt.Sprintf("t:2: hash_ids: %d ids, more than", (MaxLineBytes-100)/2)},
		{"hash ids at the bound", mooncake + mooncakeIDs(MaxHashIDs, "") + "\n" + mooncakeIDs(MaxHashIDs, `"session_id": "s", `), "", ""},
		{"azure context", azure + "2023-11-16 18:15:47,2147483647,2\n", "ContextTokens", "t:3: ContextTokens: 2147483647 tokens is more than"},
		{"azure generated", azure + "2023-11-16 18:15:47,2," + over + "\n", "GeneratedTokens", "t:3: GeneratedTokens: " + tooLong},
		{"burstgpt request", burst + "6,ChatGPT," + over + ",2,12,API log\n", "Request tokens", "t:3: Request tokens: " + tooLong},
		{"burstgpt response", burst + "6,ChatGPT,2," + over + ",12,API log\n", "Response tokens", "t:3: Response tokens: " + tooLong},
		{"llmprobe prompt", llmprobe + `{"planned":"2026-03-02T10:00:01Z","prompt_tokens":` + over + `,"output_tokens":1}`, "prompt_tokens", "t:2: prompt_tokens: " + tooLong},
		{"llmprobe output", llmprobe + `{"planned":"2026-03-02T10:00:01Z","prompt_tokens":1,"output_tokens":2147483647}`, "output_tokens", "t:2: output_tokens: 2147483647 tokens"},
		{"access log prompt", access + `{"usage": {"prompt_tokens": ` + over + `, "completion_tokens": 1}}`, "usage.prompt_tokens", "t:2: usage.prompt_tokens: " + tooLong},
		{"access log completion", access + `{"gen_ai.usage.input_tokens": 1, "gen_ai.usage.output_tokens": 1e12}`, "gen_ai.usage.output_tokens", "t:2: gen_ai.usage.output_tokens: 1000000000000 tokens is more than"},
		{"access log at the bound", access + `{"usage": {"prompt_tokens": ` + at + `, "completion_tokens": ` + at + `}}`, "", ""},
		{"mooncake session", mooncake + `{"timestamp": 1, "input_length": 2, "output_length": 1, "session_id": "` + longName + `"}`, "session_id", "t:2: session_id: " + nameTooLong},
		{"mooncake numeric session", mooncake + `{"timestamp": 1, "input_length": 2, "output_length": 1, "session_id": 1` + strings.Repeat("0", MaxNameBytes) + `}`, "session_id", "t:2: session_id: " + nameTooLong},
		{"llmprobe conversation", llmprobe + `{"planned":"2026-03-02T10:00:01Z","prompt_tokens":1,"output_tokens":1,"conversation":"` + longName + `"}`, "conversation", "t:2: conversation: " + nameTooLong},
		{"burstgpt model", burst + "6," + longName + ",2,2,4,API log\n", "Model", "t:3: Model: " + nameTooLong},
		{"access log model", access + `{"usage": {"prompt_tokens": 3, "completion_tokens": 1}, "response": {"body": {"model": "` + longName + `"}}}`, "response.body.model", "t:2: response.body.model: " + nameTooLong},
		{"names at the bound", mooncake + `{"timestamp": 1, "input_length": 2, "output_length": 1, "session_id": "` + longName[1:] + `"}`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs, err := readErr(t, "t", c.content+"\n", Options{})
			if c.want == "" {
				if want := strings.Count(c.content, "\n") + 1; err != nil || len(recs) != want {
					t.Fatalf("%d records, error %.300v; want all %d read", len(recs), err, want)
				}
				return
			}
			var le *LineError
			if !errors.As(err, &le) || le.Field != c.field || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %.300v (field %q), want %q... (field %q)", err, fieldOf(le), c.want, c.field)
			}
			if len(recs) != 1 {
				t.Errorf("%d records before the error, want 1", len(recs))
			}
		})
	}
}
