// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// TestSyntaxErrorPosition: a YAML syntax error is reported at the line
// and column where the file breaks, not where yaml.v3's parser context
// began (a mis-indented key on line 3 of a target list came out as 1:1).
func TestSyntaxErrorPosition(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"key indented too little in a list item", "targets:\n  - name: a\n   url: x\n",
			"x.yml:3:4: did not find expected '-' indicator"},
		{"key indented too little in a mapping", "global:\n  warmup: 5s\n request_timeout: 60s\nworkloads: {}\n",
			"x.yml:3:2: did not find expected key"},
		{"key at the item's dash column", "workloads:\n  w:\n    classes:\n      - name: c\n      prompt_tokens: [10\n",
			"x.yml:5:7: did not find expected '-' indicator"},
		{"tab", "global:\n  warmup: 5s\n\trequest_timeout: 60s\n",
			"x.yml:3:1: found a tab character that violates indentation"},
		{"second colon", "global:\n  warmup: 5s\n  request_timeout: 60s: x\n",
			"x.yml:3:23: mapping values are not allowed in this context"},
		{"unclosed quote", "global:\n  warmup: 5s\n  request_timeout: \"60s\nworkloads: {}\n",
			"x.yml:3:20: found unexpected end of stream (a quote opened here is never closed)"},
		{"character that starts no token", "global:\n  warmup: 5s\n  @bad: 1\n",
			"x.yml:3:3: found character that cannot start any token"},
		{"key without a colon", "global:\n  warmup: 5s\nx\n",
			"x.yml:3:1: could not find expected ':'"},
		{"after multi-byte text", "global:\n  name: \"é\"\n  é: [1\n  b: 2\n",
			"x.yml:3:"},
		{"deep in a long file", strings.Repeat("# comment\n", 500) + validBase + "  - name: u\n   url: x\n",
			"x.yml:514:4: did not find expected '-' indicator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.doc), "x.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) || strings.Contains(got, "\n") {
				t.Errorf("got  %q\nwant %q...", got, tt.want)
			}
		})
	}
}

// TestEditDistance: insertions, deletions, substitutions and adjacent
// transpositions each cost one.
func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"arival", "arrival", 1}, {"rtae", "rate", 1}, {"rat", "rate", 1}, {"modle", "model", 1},
		{"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"same", "same", 0}, {"é", "e", 1},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestUnknownKeySuggestion: an unknown key says which known key of its
// mapping it is likely a typo of, and the errors that follow only from
// the intended key being unset are not reported; errors about what the
// mapping does set still are.
func TestUnknownKeySuggestion(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"arrival", replaced("arrival: {rate: 1}", "arival: {rate: 1}"),
			[]string{`x.yml:12:5: targets[0].arival: unknown field "arival" (did you mean "arrival"?)`}},
		{"nested key", replaced("arrival: {rate: 1}", "arrival: {rtae: 1}"),
			[]string{`x.yml:12:15: targets[0].arrival.rtae: unknown field "rtae" (did you mean "rate"?)`}},
		{"case", replaced("model: m", "Model: m"),
			[]string{`x.yml:10:5: targets[0].Model: unknown field "Model" (did you mean "model"?)`}},
		{"top level", strings.Replace(validBase, "targets:", "target:", 1),
			[]string{`x.yml:7:1: target: unknown field "target" (did you mean "targets"?)`}},
		{"other errors of the block stay", strings.Replace(replaced("arrival: {rate: 1}", "arival: {rate: 1}"), "http://127.0.0.1:8000/v1", "ftp://127.0.0.1/v1", 1),
			[]string{
				`x.yml:9:5: targets[0].url: scheme must be http or https, got "ftp"`,
				`x.yml:12:5: targets[0].arival: unknown field "arival" (did you mean "arrival"?)`,
			}},
		{"nothing close", replaced("arrival: {rate: 1}", "arrival: {rate: 1}\n    zzzzzz: 1"),
			[]string{`x.yml:13:5: targets[0].zzzzzz: unknown field "zzzzzz"`}},
		{"not a key the mapping already has", replaced("arrival: {rate: 1}", "arrival: {rate: 1}\n    arival: 1"),
			[]string{`x.yml:13:5: targets[0].arival: unknown field "arival"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.doc), "x.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestUnknownTopLevelKeyHidesNothing: an unknown top-level key with no
// close match does not hide the file's missing targets.
func TestUnknownTopLevelKeyHidesNothing(t *testing.T) {
	doc := validBase[:strings.Index(validBase, "targets:")] + "zzzzzz: 1\n"
	_, err := Load([]byte(doc), "x.yml")
	if err == nil || !strings.Contains(err.Error(), `unknown field "zzzzzz"`) || !strings.Contains(err.Error(), "targets") {
		t.Errorf("got %v, want the unknown key and the missing targets", err)
	}
}
