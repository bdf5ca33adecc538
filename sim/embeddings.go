// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
)

// POST /v1/embeddings: OpenAI's embeddings API. All the inputs' tokens are
// one engine job that is prefilled (chunked, batched with the other
// requests, through the prefix cache) and produces no token; the answer
// comes when its prefill is done. Each vector is deterministic, a hashed
// bag of the input's tokens (so inputs sharing tokens are similar),
// normalised to unit length, embedding_dimensions long (or the request's
// dimensions: the first that many components, renormalised).

const (
	defaultEmbeddingDimensions = 768
	maxEmbeddingDimensions     = 1 << 16
	maxEmbeddingInputs         = 2048 // OpenAI's limit on inputs per request
	embeddingHashesPerToken    = 16   // components each token adds ±1 to
	embeddingDenseComponents   = 32   // leading components every token adds to
)

// embeddingsSpec: embeddings answer OpenAI-style errors and take no
// faults; they never stream.
var embeddingsSpec = apiSpec{kind: apiEmbeddings, noun: "response", writeError: writeError}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, &embeddingsSpec, &embeddingsExchange{})
}

// embeddingsExchange is one Embeddings request.
type embeddingsExchange struct {
	exchange
	req    embeddingsRequest
	b64    bool
	full   int // the configured vector length
	dims   int // the answer's
	inputs []embeddingInput
	tee    teeSink
	bounds []int // input i's ids are tee.ids[bounds[i]:bounds[i+1]]
}

func (e *embeddingsExchange) parse(body []byte) *apiError {
	s, req := e.s, &e.req
	aerr := decodeJSON(body, req)
	if aerr != nil {
		return aerr
	}
	if aerr = e.useModel(req.Model); aerr != nil {
		return aerr
	}
	if f := req.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			e.b64 = true
		default:
			return badRequest("encoding_format", "encoding_format must be \"float\" or \"base64\", got %q", truncate(*f, maxHeaderEcho))
		}
	}
	e.full = s.cfg.EmbeddingDimensions
	if e.full == 0 {
		e.full = defaultEmbeddingDimensions
	}
	e.dims = e.full
	if d := req.Dimensions; d != nil {
		if *d < 1 || *d > e.dims {
			return badRequest("dimensions", "dimensions must be between 1 and %d, got %d", e.dims, *d)
		}
		e.dims = *d
	}
	if e.inputs, aerr = parseEmbeddingInput(req.Input); aerr != nil {
		return aerr
	}

	sq := e.newSeq()
	e.tee = teeSink{h: &sq.hasher}
	tee := &e.tee
	e.bounds = make([]int, 0, len(e.inputs)+1)
	capacity := s.cfg.NumKVBlocks * s.cfg.BlockSize
	for i, in := range e.inputs {
		e.bounds = append(e.bounds, len(tee.ids))
		n := 0
		if in.isIDs {
			for _, id := range in.ids {
				tee.add(id)
			}
			n = len(in.ids)
		} else {
			n = s.tok.emitText(tee, in.text)
		}
		if n == 0 {
			return badRequest("input", "input[%d] must contain at least one token", i)
		}
		if n > s.cfg.MaxModelLen {
			return badRequest("input", "This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.", s.cfg.MaxModelLen, n)
		}
		if len(tee.ids) > capacity {
			return badRequest("input", "the inputs' %d+ tokens exceed the KV cache (%d tokens); send fewer inputs per request", len(tee.ids), capacity)
		}
	}
	e.bounds = append(e.bounds, len(tee.ids))
	sq.promptTokens = len(tee.ids)
	sq.maxTokens = 0
	return nil
}

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// embeddingInput is one decoded input: text or token ids.
type embeddingInput struct {
	text  string
	ids   []int
	isIDs bool
}

// parseEmbeddingInput decodes input: a string, a list of strings, a list
// of token ids, or a list of lists of token ids.
func parseEmbeddingInput(raw json.RawMessage) ([]embeddingInput, *apiError) {
	raw = bytes.TrimSpace(raw)
	const shape = "input must be a string, an array of strings, an array of token ids or an array of arrays of token ids"
	if isJSONNull(raw) {
		return nil, badRequest("input", "input is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("input", shape)
		}
		return []embeddingInput{{text: s}}, nil
	}
	if raw[0] != '[' {
		return nil, badRequest("input", shape)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", shape)
	}
	if len(items) == 0 {
		return nil, badRequest("input", "input must not be empty")
	}
	first := bytes.TrimSpace(items[0])
	if len(first) > 0 && first[0] != '"' && first[0] != '[' {
		ids, aerr := parseTokenIDs(items, "input")
		if aerr != nil {
			return nil, aerr
		}
		return []embeddingInput{{ids: ids, isIDs: true}}, nil
	}
	if len(items) > maxEmbeddingInputs {
		return nil, badRequest("input", "at most %d inputs per request, got %d", maxEmbeddingInputs, len(items))
	}
	out := make([]embeddingInput, len(items))
	for i, it := range items {
		it = bytes.TrimSpace(it)
		switch {
		case len(it) > 0 && it[0] == '"' && first[0] == '"':
			if err := json.Unmarshal(it, &out[i].text); err != nil {
				return nil, badRequest("input", "input[%d] is not a valid string", i)
			}
		case len(it) > 0 && it[0] == '[' && first[0] == '[':
			var sub []json.RawMessage
			if err := json.Unmarshal(it, &sub); err != nil {
				return nil, badRequest("input", "input[%d] is not an array of token ids", i)
			}
			ids, aerr := parseTokenIDs(sub, fmt.Sprintf("input[%d]", i))
			if aerr != nil {
				return nil, aerr
			}
			out[i] = embeddingInput{ids: ids, isIDs: true}
		default:
			return nil, badRequest("input", "input[%d]: %s (all of one kind)", i, shape)
		}
	}
	return out, nil
}

func parseTokenIDs(items []json.RawMessage, path string) ([]int, *apiError) {
	ids := make([]int, len(items))
	for i, it := range items {
		v, err := strconv.ParseInt(string(bytes.TrimSpace(it)), 10, 64)
		if err != nil {
			return nil, badRequest("input", "%s[%d] is not an integer token id", path, i)
		}
		if v < 0 || v >= VocabSize {
			return nil, badRequest("input", "token id %d at %s[%d] is out of vocabulary range [0, %d)", v, path, i, VocabSize)
		}
		ids[i] = int(v)
	}
	return ids, nil
}

// teeSink feeds the prefix-cache hasher and collects the ids.
type teeSink struct {
	h   *blockHasher
	ids []int
}

func (t *teeSink) add(id int) {
	t.h.add(id)
	t.ids = append(t.ids, id)
}

// unaryBody renders the list of vectors, once the inputs are prefilled.
func (e *embeddingsExchange) unaryBody(_, _ int) ([]byte, *apiError) {
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(e.inputs))
	vec := make([]float32, e.dims)
	acc := make([]float64, e.full)
	for i := range e.inputs {
		embedTokens(vec, acc, e.tee.ids[e.bounds[i]:e.bounds[i+1]])
		var emb any
		if e.b64 {
			raw := make([]byte, 4*e.dims)
			for j, v := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(v))
			}
			emb = base64.StdEncoding.EncodeToString(raw)
		} else {
			emb = append([]float32(nil), vec...)
		}
		data[i] = item{Object: "embedding", Index: i, Embedding: emb}
	}
	body := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: e.s.modelName(e.model)}
	body.Usage.PromptTokens = e.sq.promptTokens
	body.Usage.TotalTokens = e.sq.promptTokens
	b, _ := json.Marshal(body)
	return append(b, '\n'), nil
}

// embeddingSalt separates the embedding hashes from other uses.
const embeddingSalt = 0x7f4a7c159e3779b9

// embedTokens fills vec with the unit-length embedding of ids: each token
// adds a value in [-1, 1) to each of the first embeddingDenseComponents
// components, and ±1 to embeddingHashesPerToken components of acc (the
// full configured length), all chosen by hashing its id, the same for
// every input,
// so the vector is a bag of tokens; vec is the first len(vec) components,
// renormalised (a shorter dimensions is a prefix of the full vector).
func embedTokens(vec []float32, acc []float64, ids []int) {
	clear(vec)
	clear(acc)
	dense := min(embeddingDenseComponents, len(acc))
	for _, id := range ids {
		h := uint64(id) ^ embeddingSalt
		// The first components get a dense contribution from every
		// token, so that short prefixes (small dimensions) are not
		// empty.
		for j := 0; j < dense; j++ {
			acc[j] += float64(int64(splitmix64(h+uint64(j))>>11))/(1<<52) - 1
		}
		for k := 0; k < embeddingHashesPerToken; k++ {
			h = splitmix64(h)
			j := int((h >> 33) % uint64(len(acc)))
			if h&1 != 0 {
				acc[j]++
			} else {
				acc[j]--
			}
		}
	}
	acc = acc[:len(vec)]
	norm := 0.0
	for _, v := range acc {
		norm += v * v
	}
	if norm == 0 {
		// No component of this prefix was hit: a fixed unit vector.
		vec[0] = 1
		return
	}
	inv := 1 / math.Sqrt(norm)
	for j, v := range acc {
		vec[j] = float32(v * inv)
	}
}
