// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Embeddings answers from hostile servers: large, oversized, and wrong in
// the ways a server can be wrong without breaking JSON.

// embeddingsServer answers every request with n vectors of dims
// components, each component written as comp (so that the answer's size
// is under the test's control), item by item: the server holds one
// vector, not the answer. It returns the answer's size.
func embeddingsServer(t testing.TB, n, dims int, comp string) (*httptest.Server, int) {
	t.Helper()
	vec := []byte("[" + strings.TrimSuffix(strings.Repeat(comp+",", dims), ",") + "]}")
	head := `{"object":"list","data":[`
	tail := fmt.Sprintf(`],"model":"bge-x","usage":{"prompt_tokens":%d,"total_tokens":%d}}`, 3*n, 3*n)
	item := func(i int) string {
		sep := ","
		if i == 0 {
			sep = ""
		}
		return sep + `{"object":"embedding","index":` + strconv.Itoa(i) + `,"embedding":`
	}
	size := len(head) + len(tail) + n*len(vec)
	for i := range n {
		size += len(item(i))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		bw := bufio.NewWriterSize(w, 64<<10)
		bw.WriteString(head)
		for i := range n {
			bw.WriteString(item(i))
			if _, err := bw.Write(vec); err != nil {
				return
			}
		}
		bw.WriteString(tail)
		bw.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv, size
}

// answerServer answers every request with body.
func answerServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func inputs(n int) []string {
	in := make([]string, n)
	for i := range in {
		in[i] = "input " + strconv.Itoa(i)
	}
	return in
}

// allocatedDuring returns the bytes the process allocated while f ran.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestEmbeddingsLargeAnswerNotRetained: a valid 48 MB answer (512 vectors
// of 4096 components) succeeds, and the client never holds it: what it
// allocates reading it is a small fraction of its size (the answer used
// to be buffered whole, up to 64 MiB per request).
func TestEmbeddingsLargeAnswerNotRetained(t *testing.T) {
	const n, dims = 512, 4096
	srv, size := embeddingsServer(t, n, dims, "-0.0123456789012345678")
	if size < 45<<20 {
		t.Fatalf("answer is only %d bytes", size)
	}
	c := newTestClient(t, srv.URL+"/v1", nil)
	req := &Request{API: APIEmbeddings, Model: "bge-x", Inputs: inputs(n)}
	do(t, c, req) // warm the connection and the pools
	var res *Result
	alloc := allocatedDuring(func() { res = do(t, c, req) })
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.PromptTokens != 3*n || res.ResponseModel != "bge-x" {
		t.Errorf("prompt tokens %d model %q", res.PromptTokens, res.ResponseModel)
	}
	if alloc > 8<<20 {
		t.Errorf("reading a %d MiB answer allocated %d MiB: the answer is retained", size>>20, alloc>>20)
	}
}

// TestEmbeddingsAnswerBound: an answer larger than its inputs and
// dimensions allow (70 MB for 64 inputs of 1024 dimensions, whose bound is
// 1 MiB + 64 × (1 KiB + 1024 × 32 B) = 3 MiB) ends as response_too_large
// once it passes the bound, and is not buffered on the way.
func TestEmbeddingsAnswerBound(t *testing.T) {
	const n, dims = 64, 1024
	srv, size := embeddingsServer(t, 2048, dims, "0.0123456789012345678901234567890")
	if size < 68<<20 {
		t.Fatalf("answer is only %d bytes", size)
	}
	c := newTestClient(t, srv.URL+"/v1", nil)
	req := &Request{API: APIEmbeddings, Model: "bge-x", Inputs: inputs(n), ExtraBody: map[string]any{"dimensions": dims}}
	var res *Result
	alloc := allocatedDuring(func() { res = do(t, c, req) })
	expectOutcome(t, res, OutcomeInvalidResponse, "response_too_large")
	if !strings.Contains(res.Error, "the answer passed 3211264 bytes, the most 64 inputs of 1024 dimensions allow") {
		t.Errorf("error %q does not say what the bound is made of", res.Error)
	}
	if alloc > 4<<20 {
		t.Errorf("a %d MiB answer allocated %d MiB before it was refused", size>>20, alloc>>20)
	}
}

func base64Floats(v ...float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestEmbeddingsAnswerChecks: every vector is checked as it goes by
// (without being kept): its index, its kind and its length.
func TestEmbeddingsAnswerChecks(t *testing.T) {
	item := func(index, embedding string) string {
		return `{"object":"embedding","index":` + index + `,"embedding":` + embedding + `}`
	}
	answer := func(items ...string) string {
		return `{"object":"list","data":[` + strings.Join(items, ",") + `],"model":"bge-x","usage":{"prompt_tokens":2,"total_tokens":2}}`
	}
	vec := "[0.1,-0.2,0.3]"
	b64 := `"` + base64Floats(0.1, -0.2, 0.3) + `"`
	// 0x3fffff3f (1.99…) encodes as "P///Pw==": JSON may escape its slashes.
	slashy := `"` + strings.ReplaceAll(base64Floats(math.Float32frombits(0x3fffff3f)), "/", `\/`) + `"`
	for name, tc := range map[string]struct {
		reply, errType, msg string
		dims                int // requested dimensions (0: none)
	}{
		"floats":                   {reply: answer(item("0", vec), item("1", vec))},
		"base64":                   {reply: answer(item("1", b64), item("0", b64))},
		"base64 escaped slash":     {reply: answer(item("0", slashy), item("1", slashy))},
		"base64 infinity":          {reply: answer(item("0", `"`+base64Floats(0.5, float32(math.Inf(1)))+`"`), item("1", b64)), errType: "invalid_embedding", msg: "not finite"},
		"requested dimensions":     {reply: answer(item("0", vec), item("1", vec)), dims: 3},
		"no index":                 {reply: answer(`{"embedding":[1]}`, `{"embedding":[2]}`)},
		"index 1e12":               {reply: answer(item("0", vec), item("1e12", vec)), errType: "invalid_index", msg: "data[1]: index 1e12"},
		"index out of range":       {reply: answer(item("0", vec), item("2", vec)), errType: "invalid_index", msg: "data[1]: index 2"},
		"negative index":           {reply: answer(item("-1", vec), item("1", vec)), errType: "invalid_index"},
		"index twice":              {reply: answer(item("1", vec), item("1", vec)), errType: "invalid_index", msg: "twice"},
		"index a string":           {reply: answer(item(`"0"`, vec), item("1", vec)), errType: "invalid_index"},
		"not base64":               {reply: answer(item("0", `"not base64!"`), item("1", vec)), errType: "invalid_embedding", msg: "data[0]: the embedding is not base64"},
		"base64 of 3 bytes":        {reply: answer(item("0", `"AAAA"`), item("1", vec)), errType: "invalid_embedding", msg: "float32"},
		"base64 NaN":               {reply: answer(item("0", `"`+base64Floats(float32(math.NaN()))+`"`), item("1", vec)), errType: "invalid_embedding", msg: "not finite"},
		"empty vector":             {reply: answer(item("0", "[]"), item("1", "[]")), errType: "invalid_embedding", msg: "empty"},
		"a string in a vector":     {reply: answer(item("0", `[0.1,"x"]`), item("1", vec)), errType: "invalid_embedding", msg: "not a number"},
		"no embedding":             {reply: answer(`{"index":0}`, item("1", vec)), errType: "invalid_embedding", msg: "no embedding"},
		"embedding null":           {reply: answer(item("0", "null"), item("1", vec)), errType: "invalid_embedding"},
		"lengths differ":           {reply: answer(item("0", vec), item("1", "[1,2]")), errType: "invalid_embedding", msg: "2 dimensions, data[0] has 3"},
		"not the dimensions":       {reply: answer(item("0", vec), item("1", vec)), dims: 4, errType: "invalid_embedding", msg: "3 dimensions, 4 requested"},
		"items are junk":           {reply: `{"data":[1,"x"]}`, errType: "invalid_embedding", msg: "data[0] is not an embedding object"},
		"too few":                  {reply: answer(item("0", vec)), errType: "wrong_result_count"},
		"error wins":               {reply: `{"data":null,"error":{"message":"overloaded"}}`, errType: "error_event", msg: "overloaded"},
		"trailing garbage":         {reply: answer(item("0", vec), item("1", vec)) + "x", errType: "malformed_response"},
		"truncated":                {reply: answer(item("0", vec), item("1", vec))[:60], errType: "malformed_response"},
		"not an object":            {reply: `[1,2]`, errType: "malformed_response", msg: "not a JSON object"},
		"huge model name":          {reply: `{"model":"` + strings.Repeat("m", 3<<20) + `"}`, errType: "response_too_large", msg: "a member of the answer"},
		"whitespace is skipped":    {reply: "  \n" + strings.ReplaceAll(answer(item("0", vec), item("1", vec)), "},", "},"+strings.Repeat(" ", 1<<20)) + "\n"},
		"a member past the window": {reply: answer(item("0", "[0.1"+strings.Repeat(" ", 1<<20)+"]"), item("1", vec)), errType: "response_too_large", msg: "one embedding of up to 16384 dimensions"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := answerServer(t, []byte(tc.reply))
			c := newTestClient(t, srv.URL+"/v1", nil)
			req := &Request{API: APIEmbeddings, Model: "bge-x", Inputs: []string{"a", "b"}}
			if tc.dims > 0 {
				req.ExtraBody = map[string]any{"dimensions": tc.dims}
			}
			res := do(t, c, req)
			if tc.errType == "" {
				expectOutcome(t, res, OutcomeSuccess, "")
				return
			}
			expectOutcome(t, res, OutcomeInvalidResponse, tc.errType)
			if !strings.Contains(res.Error, tc.msg) {
				t.Errorf("error %q lacks %q", res.Error, tc.msg)
			}
		})
	}
}

// BenchmarkEmbeddingsAnswer reads a 48 MB answer (512 × 4096 floats):
// B/op is what one answer costs the client (it used to be the answer's
// size, rounded up to a power of two).
func BenchmarkEmbeddingsAnswer(b *testing.B) {
	const n, dims = 512, 4096
	srv, size := embeddingsServer(b, n, dims, "-0.0123456789012345678")
	c, err := NewClient(ClientConfig{BaseURL: srv.URL + "/v1"})
	if err != nil {
		b.Fatal(err)
	}
	req := &Request{API: APIEmbeddings, Model: "bge-x", Inputs: inputs(n)}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		var res Result
		c.Do(b.Context(), req, &res)
		if res.Outcome != OutcomeSuccess {
			b.Fatalf("%s: %s", res.ErrorType, res.Error)
		}
	}
}
