// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Helpers for the Responses, Messages and Embeddings tests: SSE streams
// with named events, and images made in the test.

// namedEvent is one SSE event with an `event:` name.
type namedEvent struct {
	name string
	data string
	at   time.Time
	v    map[string]any
}

type namedStream struct {
	status int
	header http.Header
	body   string // the whole body when status is not 200
	events []namedEvent
	start  time.Time
}

// streamNamed posts body and reads an SSE stream of named events; every
// event must have a name and one data line, a JSON object.
func streamNamed(t *testing.T, url string, body any, headers ...string) *namedStream {
	t.Helper()
	ns := &namedStream{start: time.Now()}
	var err error
	ns.status, ns.header, ns.body, err = postSSE(t, url, body, headers, func(name string, data []string, at time.Time) {
		if name == "" || len(data) != 1 {
			t.Fatalf("event %q with %d data lines, want a name and one", name, len(data))
		}
		ev := namedEvent{name: name, data: data[0], at: at}
		if err := json.Unmarshal([]byte(ev.data), &ev.v); err != nil {
			t.Fatalf("event %s data is not a JSON object: %q", name, ev.data)
		}
		ns.events = append(ns.events, ev)
	})
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return ns
}

// names returns the event names in order.
func (ns *namedStream) names() []string {
	out := make([]string, len(ns.events))
	for i, e := range ns.events {
		out[i] = e.name
	}
	return out
}

// count returns how many events are named name.
func (ns *namedStream) count(name string) int {
	n := 0
	for _, e := range ns.events {
		if e.name == name {
			n++
		}
	}
	return n
}

// first returns the first event named name.
func (ns *namedStream) first(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, e := range ns.events {
		if e.name == name {
			return e.v
		}
	}
	t.Fatalf("no %s event in %v", name, ns.names())
	return nil
}

// get walks a decoded JSON value by keys and indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// postJSON posts body and decodes the JSON answer into a map.
func postJSON(t *testing.T, url string, body any, headers ...string) (int, map[string]any, string) {
	t.Helper()
	resp := post(t, url, body, headers...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("status %d, body not JSON: %q", resp.StatusCode, b)
	}
	return resp.StatusCode, v, string(b)
}

// pngDataURL returns a data URL of a w×h PNG.
func pngDataURL(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := 0; x < w; x++ {
		img.Set(x, 0, color.RGBA{R: uint8(x), A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// jpegBase64 returns the base64 of a w×h JPEG.
func jpegBase64(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// pngHeaderOnly returns the base64 of a PNG signature and an IHDR chunk
// claiming w×h pixels, with no image data: a tiny header for a huge image.
func pngHeaderOnly(w, h uint32) string {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(ihdr)))
	b.Write(l[:])
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.BigEndian.PutUint32(l[:], crc32.ChecksumIEEE(chunk))
	b.Write(l[:])
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// anthropicHeaders are the headers a Messages client sends.
var anthropicHeaders = []string{"anthropic-version", "2023-06-01", "x-api-key", "test-key"}

// checkAnthropicError checks an Anthropic error body and returns its
// error.type and message.
func checkAnthropicError(t *testing.T, body string) (string, string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Type != "error" || e.Error == nil || e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("not an Anthropic error body (%v): %q", err, body)
	}
	return e.Error.Type, e.Error.Message
}
