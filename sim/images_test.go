// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Images in chat, Responses and Messages prompts; the request log's api
// and image_tokens; over loopback.

func TestImageTokens(t *testing.T) {
	cfg := zeroConfig()
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg.RequestLog = logPath
	base, s := startSim(t, cfg)
	png := pngDataURL(t, 100, 50) // 5000 px → ceil(5000/784) = 7 tokens
	jpg := jpegBase64(t, 28, 28)  // 784 px → 1 token
	text := CountChatTokens([]ChatMessage{{Role: "user", Content: "describe these"}}, true)

	// Chat: image_url parts.
	chat := chatBody("", 2)
	chat["messages"] = []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "text", "text": "describe these"},
		{"type": "image_url", "image_url": map[string]any{"url": png}},
		{"type": "image_url", "image_url": map[string]any{"url": "data:image/jpeg;base64," + jpg}},
	}}}
	r := stream(t, base+"/v1/chat/completions", chat)
	if !r.done || r.usage == nil || r.usage.PromptTokens != text+8 {
		t.Fatalf("chat with images: usage %+v, want prompt_tokens %d (%s)", r.usage, text+8, r.errorBody)
	}
	// /tokenize counts them the same way.
	status, v, raw := postJSON(t, base+"/tokenize", map[string]any{"messages": chat["messages"]})
	if status != 200 || num(v["count"]) != text+8 {
		t.Errorf("/tokenize: %s", raw)
	}

	// Responses: input_image.
	_, v, raw = postJSON(t, base+"/v1/responses", responsesBody([]map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "input_text", "text": "describe these"},
		{"type": "input_image", "image_url": png},
	}}}, 2))
	if num(get(v, "usage", "input_tokens")) != text+7 {
		t.Errorf("responses with an image: %s", raw)
	}

	// Messages: base64 image blocks; the same image again hits the cache.
	msg := messagesBody("", 2, "messages", []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/jpeg", "data": jpg}},
		{"type": "text", "text": "describe these"},
	}}})
	_, v, raw = postJSON(t, base+"/v1/messages", msg, anthropicHeaders...)
	if num(get(v, "usage", "input_tokens"))+num(get(v, "usage", "cache_read_input_tokens")) != text+1 {
		t.Errorf("messages with an image: %s", raw)
	}

	// Embeddings, for the log.
	postEmbeddings(t, base+"/v1/embeddings", map[string]any{"input": "x"})

	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]RequestLogEntry{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e RequestLogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		got[e.API+" "+e.Path] = e
	}
	for key, wantImages := range map[string]int{
		"chat /v1/chat/completions": 8, "responses /v1/responses": 7, "messages /v1/messages": 1, "embeddings /v1/embeddings": 0,
	} {
		e, ok := got[key]
		if !ok {
			t.Errorf("no %s line in %v", key, got)
			continue
		}
		if e.ImageTokens != wantImages || e.Status != 200 || e.Model != "sim-model" || e.FinishReason == "" {
			t.Errorf("%s: %+v, want image_tokens %d", key, e, wantImages)
		}
	}
	if e := got["messages /v1/messages"]; !strings.HasPrefix(e.ID, "msg_") || e.CompletionTokens != 2 {
		t.Errorf("messages line %+v", e)
	}
	if e := got["embeddings /v1/embeddings"]; e.PromptTokens != 1 || e.CompletionTokens != 0 || e.FinishReason != "stop" {
		t.Errorf("embeddings line %+v", e)
	}
}

func TestImageHostile(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	chatWith := func(url string) map[string]any {
		b := chatBody("", 2)
		b["stream"] = false
		delete(b, "stream_options")
		b["messages"] = []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image_url", "image_url": map[string]any{"url": url}}}}}
		return b
	}
	for _, tc := range []struct {
		name, url, want string
	}{
		{"huge dimensions in a tiny header", "data:image/png;base64," + pngHeaderOnly(100000, 100000), "each side"},
		{"4096² fills the context", "data:image/png;base64," + pngHeaderOnly(4096, 4096), "maximum context length"},
		{"zero width", "data:image/png;base64," + pngHeaderOnly(0, 10), "PNG or JPEG"},
		{"http URL", "https://example.com/cat.png", "never fetches"},
		{"file URL", "file:///etc/passwd", "never fetches"},
		{"malformed base64", "data:image/png;base64,iVBOR*w0K!!", "base64"},
		{"truncated base64", "data:image/png;base64," + pngHeaderOnly(10, 10)[:30] + "=", "base64"},
		{"not base64 encoded", "data:image/png,rawbytes", "base64"},
		{"not an image", "data:image/png;base64,aGVsbG8gd29ybGQ=", "PNG or JPEG"},
		{"gif", "data:image/gif;base64,R0lGODlhAQABAAAAACw=", "image/gif"},
		{"no comma", "data:image/png;base64", "','"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, raw := postJSON(t, base+"/v1/chat/completions", chatWith(tc.url))
			if status != 400 {
				t.Fatalf("status %d: %s", status, raw)
			}
			if e := decodeError(t, raw); !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("message %q, want it to contain %q", e.Error.Message, tc.want)
			}
		})
	}
	// A 4096×4096 header within max_model_len is fine: 21,400 tokens.
	cfg := zeroConfig()
	cfg.MaxModelLen = 32768
	cfg.NumKVBlocks = 4096
	bigBase, _ := startSim(t, cfg)
	status, v, raw := postJSON(t, bigBase+"/v1/chat/completions", chatWith("data:image/png;base64,"+pngHeaderOnly(4096, 4096)))
	if want := 21400 + 4 + 3; status != 200 || num(get(v, "usage", "prompt_tokens")) != want {
		t.Errorf("4096×4096: want prompt_tokens %d: %.300s", want, raw)
	}
}
