// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

// The KV cache: a fixed number of blocks of BlockSize tokens. A running
// sequence references the blocks that hold its tokens. A block filled with
// tokens is identified by a chain hash (the hash of the previous block and
// its own token ids); with prefix caching on, full blocks are registered
// under their hash, stay in the cache after their sequences end (free but
// reusable, in LRU order) and are evicted only when a new block is needed.
// A later prompt that starts with the same token blocks reuses them and
// skips their prefill: those tokens are its cached_tokens.

// kvBlock is one KV-cache block.
type kvBlock struct {
	hash       uint64
	refs       int32
	registered bool     // present in kvCache.byHash
	prev, next *kvBlock // LRU list links, while refs == 0 && registered
}

type kvCache struct {
	blockSize int
	total     int
	caching   bool

	used    int // blocks with refs > 0
	blank   int // blocks holding nothing (never used, or freed unregistered)
	lruLen  int // cached blocks nothing references (evictable)
	byHash  map[uint64]*kvBlock
	lruHead *kvBlock // least recently freed registered block
	lruTail *kvBlock
	spare   []*kvBlock // recycled block structs
}

func newKVCache(blockSize, total int, caching bool) *kvCache {
	return &kvCache{
		blockSize: blockSize,
		total:     total,
		caching:   caching,
		blank:     total,
		byHash:    make(map[uint64]*kvBlock),
	}
}

// blocksFor returns how many blocks n tokens need.
func (c *kvCache) blocksFor(n int) int {
	return (n + c.blockSize - 1) / c.blockSize
}

// usage is the fraction of blocks referenced by running sequences.
func (c *kvCache) usage() float64 {
	return float64(c.used) / float64(c.total)
}

// free is the number of blocks allocate can still hand out: blank ones
// and cached ones nothing references (evicted to make room).
func (c *kvCache) free() int {
	return c.blank + c.lruLen
}

// idleAmong counts the blocks among the cached hashes (see matchPrefix)
// that nothing references: acquiring them takes them off the free list.
func (c *kvCache) idleAmong(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		if c.byHash[h].refs == 0 {
			n++
		}
	}
	return n
}

// matchPrefix returns how many of the leading block hashes are cached.
func (c *kvCache) matchPrefix(hashes []uint64) int {
	if !c.caching {
		return 0
	}
	for i, h := range hashes {
		if _, ok := c.byHash[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// acquireCached references the cached block with hash h (which must be
// present, see matchPrefix).
func (c *kvCache) acquireCached(h uint64) *kvBlock {
	b := c.byHash[h]
	if b.refs == 0 {
		c.lruRemove(b)
		c.used++
	}
	b.refs++
	return b
}

// allocate takes a blank block, or evicts the least recently used cached
// one. The caller's admission control guarantees one is available; nil
// means it was not (a bug), and the caller treats it as out of memory.
func (c *kvCache) allocate() *kvBlock {
	var b *kvBlock
	switch {
	case c.blank > 0:
		c.blank--
		if n := len(c.spare); n > 0 {
			b = c.spare[n-1]
			c.spare = c.spare[:n-1]
			*b = kvBlock{}
		} else {
			b = &kvBlock{}
		}
	case c.lruHead != nil:
		b = c.lruHead
		c.lruRemove(b)
		delete(c.byHash, b.hash)
		*b = kvBlock{}
	default:
		return nil
	}
	b.refs = 1
	c.used++
	return b
}

// register records a full block under its chain hash, unless another block
// already holds the same tokens (then this one stays anonymous).
func (c *kvCache) register(b *kvBlock, h uint64) {
	if !c.caching || b.registered {
		return
	}
	if _, dup := c.byHash[h]; dup {
		return
	}
	b.hash = h
	b.registered = true
	c.byHash[h] = b
}

// release drops one reference; an unreferenced registered block stays
// cached (most recently used), an anonymous one becomes blank.
func (c *kvCache) release(b *kvBlock) {
	b.refs--
	if b.refs > 0 {
		return
	}
	c.used--
	if b.registered {
		c.lruPush(b)
		return
	}
	c.blank++
	c.spare = append(c.spare, b)
}

func (c *kvCache) lruPush(b *kvBlock) {
	c.lruLen++
	b.prev, b.next = c.lruTail, nil
	if c.lruTail != nil {
		c.lruTail.next = b
	} else {
		c.lruHead = b
	}
	c.lruTail = b
}

func (c *kvCache) lruRemove(b *kvBlock) {
	c.lruLen--
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		c.lruHead = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		c.lruTail = b.prev
	}
	b.prev, b.next = nil, nil
}

// Chain hashing of token blocks: each block's hash mixes the previous
// block's hash with its token ids, so equal hashes mean equal prefixes.
const (
	chainSeed  = 0xcbf29ce484222325
	chainPrime = 0x100000001b3
)

// blockHasher hashes a token stream into per-block chain hashes. It is a
// tokenSink, so prompts are hashed while they are tokenised.
type blockHasher struct {
	blockSize int
	prev      uint64 // hash of the last full block (chainSeed at the start)
	cur       uint64 // running hash of the current block
	n         int    // tokens in the current block
	hashes    []uint64
}

func newBlockHasher(blockSize int, hashes []uint64) blockHasher {
	return blockHasher{blockSize: blockSize, prev: chainSeed, cur: chainSeed, hashes: hashes[:0]}
}

func (h *blockHasher) add(id int) {
	h.cur = (h.cur ^ uint64(id)) * chainPrime
	h.n++
	if h.n == h.blockSize {
		full := splitmix64(h.cur ^ h.prev*chainPrime)
		h.hashes = append(h.hashes, full)
		h.prev, h.cur, h.n = full, chainSeed, 0
	}
}
