/*
 * lakeline.indexes._native: the inner loops of index entries, in C.
 *
 * Index entries (DataSketches HLL coupons of every column, bloom filters of keys) are
 * computed for every data file a writer or an index build produces, so they sit on
 * the write path. The numpy versions in hashing.py, coupons.py and bloom.py make one
 * pass over memory per arithmetic step; these loops make one pass in all, and run
 * without the GIL so an engine's threads use every core.
 *
 * Every function computes exactly what its numpy reference computes (the tests
 * compare them on random input): entries written by a process with this module are
 * probed by processes without it. Inputs are plain buffers (numpy arrays, Arrow
 * buffers); outputs are preallocated writable buffers the caller sizes.
 *
 * Inputs come from files (offsets of decoded strings, bloom entries, record-index bit
 * tables), so every size, count and offset is checked before it is used, by division
 * where a product could overflow: a malformed one raises lakeline's CorruptFileError,
 * never reads or writes outside a buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static const uint64_t TEXT_BASE = 0x9E3779B97F4A7C15ULL;
static const uint64_t MIX1 = 0xFF51AFD7ED558CCDULL;
static const uint64_t MIX2 = 0xC4CEB9FE1A85EC53ULL;
static const uint64_t LEN_MUL = 0xD6E8FEB86659FD93ULL;

static inline uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= MIX1;
    h ^= h >> 33;
    h *= MIX2;
    h ^= h >> 33;
    return h;
}

/* The little-endian word of up to 8 bytes at p (missing high bytes are zero). */
static inline uint64_t load_le(const uint8_t *p, Py_ssize_t len) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w = 0;
    memcpy(&w, p, (size_t)len);
    return w;
#else
    uint64_t w = 0;
    for (Py_ssize_t i = len - 1; i >= 0; i--) {
        w = (w << 8) | p[i];
    }
    return w;
#endif
}

/* `room`: bytes readable from s on (at least len): a last partial word is loaded
 * whole and masked when the buffer goes on far enough, which saves a byte loop. */
static inline uint64_t text_hash(const uint8_t *s, int64_t len, int64_t room, uint64_t seed) {
    uint64_t h = 0;
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) {
        h = h * TEXT_BASE + load_le(s + j, 8);
    }
    if (j < len) {
        const int64_t left = len - j;
        const uint64_t w = room - j >= 8 ? load_le(s + j, 8) & (~0ULL >> (64 - 8 * left)) : load_le(s + j, left);
        h = h * TEXT_BASE + w;
    }
    h ^= (uint64_t)len * LEN_MUL;
    h ^= seed;
    return fmix64(h);
}

/* lakeline.timeline.errors.CorruptFileError (a ValueError), looked up at the first
 * error rather than when the module loads: lakeline's modules may still be importing
 * one another then. */
static PyObject *corrupt_error_class = NULL;

static PyObject *corrupt_error(void) {
    if (corrupt_error_class == NULL) {
        PyObject *errors = PyImport_ImportModule("lakeline.timeline.errors");
        if (errors != NULL) {
            corrupt_error_class = PyObject_GetAttrString(errors, "CorruptFileError");
            Py_DECREF(errors);
        }
        if (corrupt_error_class == NULL) {
            PyErr_Clear();
            return PyExc_ValueError;
        }
    }
    return corrupt_error_class;
}

static int check_size(Py_buffer *b, Py_ssize_t need, const char *what) {
    if (b->len < need) {
        PyErr_Format(corrupt_error(), "%s holds %zd bytes, %zd needed", what, b->len, need);
        return -1;
    }
    return 0;
}

/* Whether `b` holds n + extra items of `each` bytes (n not negative), checked by division. */
static int check_items(Py_buffer *b, Py_ssize_t n, Py_ssize_t extra, Py_ssize_t each, const char *what) {
    if (n < 0 || n > b->len / each - extra) {
        PyErr_Format(corrupt_error(), "%s holds %zd bytes, too few for %zd items of %zd bytes", what, b->len, n, each);
        return -1;
    }
    return 0;
}

/* The count of 64-bit words in `b`: its length must be a whole number of them. */
static int word_count(Py_buffer *b, const char *what, Py_ssize_t *n) {
    if (b->len % 8) {
        PyErr_Format(corrupt_error(), "%s holds %zd bytes, not a whole number of 64-bit words", what, b->len);
        return -1;
    }
    *n = b->len / 8;
    return 0;
}

static inline int64_t offset_at(const void *offsets, int wide, Py_ssize_t i) {
    return wide ? ((const int64_t *)offsets)[i] : (int64_t)((const int32_t *)offsets)[i];
}

/* Hash strings data[offsets[i]:offsets[i+1]] for i < n (checked against the data) into
 * `out`. Runs without the GIL.
 * Returns 0, or -1 with a Python error for offsets outside the data. */
static int each_text_hash(Py_buffer *data, Py_buffer *offsets, int wide, Py_ssize_t n, uint64_t seed,
                          uint64_t *out) {
    const uint8_t *d = (const uint8_t *)data->buf;
    const Py_ssize_t len = data->len;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t a = offset_at(offsets->buf, wide, i), b = offset_at(offsets->buf, wide, i + 1);
        if (a < 0 || b < a || b > len) {
            bad = 1;
            break;
        }
        const uint64_t h = text_hash(d + a, b - a, len - a, seed);
        out[i] = h;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(corrupt_error(), "offsets point outside the data buffer");
        return -1;
    }
    return 0;
}

/* hash_text(data, offsets, wide, n, seed, out): out[i] = hash of
 * data[offsets[i]:offsets[i+1]]; offsets are int64 when wide, else int32. */
static PyObject *hash_text(PyObject *self, PyObject *args) {
    Py_buffer data, offsets, out;
    int wide;
    Py_ssize_t n;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*y*pnKw*", &data, &offsets, &wide, &n, &seed, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (check_items(&offsets, n, 1, wide ? 8 : 4, "offsets") || check_items(&out, n, 0, 8, "out")) {
        goto done;
    }
    if (each_text_hash(&data, &offsets, wide, n, (uint64_t)seed, (uint64_t *)out.buf)) {
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return result;
}

/* text_min_max(data, offsets, wide, n) -> (i, j): the rows holding the smallest and
 * the largest string in byte order (Arrow's order of strings and binaries). */
static PyObject *text_min_max(PyObject *self, PyObject *args) {
    Py_buffer data, offsets;
    int wide;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*pn", &data, &offsets, &wide, &n)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (n < 1) {
        PyErr_SetString(corrupt_error(), "min/max of no strings");
        goto done;
    }
    if (check_items(&offsets, n, 1, wide ? 8 : 4, "offsets")) {
        goto done;
    }
    const uint8_t *d = (const uint8_t *)data.buf;
    Py_ssize_t lo = 0, hi = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t lo_a = offset_at(offsets.buf, wide, 0), lo_n = offset_at(offsets.buf, wide, 1) - lo_a;
    int64_t hi_a = lo_a, hi_n = lo_n;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a = offset_at(offsets.buf, wide, i), b = offset_at(offsets.buf, wide, i + 1);
        if (a < 0 || b < a || b > data.len) {
            bad = 1;
            break;
        }
        int64_t len = b - a;
        int c = memcmp(d + a, d + lo_a, (size_t)(len < lo_n ? len : lo_n));
        if (c < 0 || (c == 0 && len < lo_n)) {
            lo = i, lo_a = a, lo_n = len;
        }
        c = memcmp(d + a, d + hi_a, (size_t)(len < hi_n ? len : hi_n));
        if (c > 0 || (c == 0 && len > hi_n)) {
            hi = i, hi_a = a, hi_n = len;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(corrupt_error(), "offsets point outside the data buffer");
        goto done;
    }
    result = Py_BuildValue("nn", lo, hi);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return result;
}

/* hash_words(words, seed, out): out[i] = fmix64(words[i] ^ seed), the hash of
 * fixed-width values (hashing.py maps each value to its 64-bit word first). */
static PyObject *hash_words(PyObject *self, PyObject *args) {
    Py_buffer words, out;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*Kw*", &words, &seed, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n;
    if (word_count(&words, "words", &n) || check_items(&out, n, 0, 8, "out")) {
        goto done;
    }
    const uint64_t *w = (const uint64_t *)words.buf;
    uint64_t *o = (uint64_t *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        o[i] = fmix64(w[i] ^ (uint64_t)seed);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&out);
    return result;
}

/* Whether the n words are all distinct (1), or some repeat (0); -1 when out of memory.
 *
 * A sort of 5M words takes 0.3 s here and a batch's deduplication asks this of every
 * write's key hashes (issue 30). Instead: partition the words by their top bits into
 * blocks of about DISTINCT_BLOCK words (one counting pass, one scatter), then put each
 * block in an open-addressing set that fits the L2 cache. 5M words: about 35 ms, most
 * of it the scatter into fresh memory, which is asked for in huge pages where Linux
 * gives them (a fault per 4 KiB page made it 52 ms). The words are hashes, so blocks
 * come out even; skewed input only makes a block's set larger, never the answer wrong.
 * A zero word is tracked apart (zero marks a free slot). */
#define DISTINCT_BLOCK 8192
#define HUGE_PAGE ((size_t)1 << 21)

/* n words of scratch memory, in huge pages where the system gives them; free() it. */
static uint64_t *scratch_words(Py_ssize_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t bytes = ((size_t)n * sizeof(uint64_t) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = NULL;
    if (bytes >= HUGE_PAGE && posix_memalign(&p, HUGE_PAGE, bytes) == 0) {
        madvise(p, bytes, MADV_HUGEPAGE); /* a hint: without it, plain pages */
        return p;
    }
#endif
    return malloc((size_t)n * sizeof(uint64_t));
}

static int words_distinct_c(const uint64_t *w, Py_ssize_t n) {
    if (n < 2) {
        return 1;
    }
    int bits = 0;
    while (bits < 16 && ((Py_ssize_t)DISTINCT_BLOCK << bits) < n) {
        bits++;
    }
    const Py_ssize_t parts = (Py_ssize_t)1 << bits;
    /* The block of a word: its top bits (none when there is one block). */
#define BLOCK_OF(v) (bits ? (Py_ssize_t)((v) >> (64 - bits)) : 0)
    Py_ssize_t *start = calloc((size_t)parts + 1, sizeof(Py_ssize_t));
    Py_ssize_t *fill = malloc((size_t)parts * sizeof(Py_ssize_t));
    uint64_t *grouped = scratch_words(n);
    uint64_t *set = NULL;
    int result = -1;
    if (start == NULL || fill == NULL || grouped == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        start[BLOCK_OF(w[i]) + 1]++;
    }
    Py_ssize_t biggest = 0;
    for (Py_ssize_t p = 0; p < parts; p++) {
        if (start[p + 1] > biggest) {
            biggest = start[p + 1];
        }
        start[p + 1] += start[p];
    }
    memcpy(fill, start, (size_t)parts * sizeof(Py_ssize_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        grouped[fill[BLOCK_OF(w[i])]++] = w[i];
    }
#undef BLOCK_OF
    int set_bits = 4;
    while (((Py_ssize_t)1 << set_bits) < 2 * biggest) {
        set_bits++;
    }
    set = malloc(((size_t)1 << set_bits) * sizeof(uint64_t));
    if (set == NULL) {
        goto done;
    }
    result = 1;
    for (Py_ssize_t p = 0; p < parts && result; p++) {
        const Py_ssize_t size = start[p + 1] - start[p];
        if (size < 2) {
            continue;
        }
        int tb = 4;
        while (((Py_ssize_t)1 << tb) < 2 * size) {
            tb++;
        }
        const uint64_t mask = ((uint64_t)1 << tb) - 1;
        memset(set, 0, ((size_t)1 << tb) * sizeof(uint64_t));
        int zero = 0;
        for (Py_ssize_t i = start[p]; i < start[p + 1]; i++) {
            const uint64_t v = grouped[i];
            if (v == 0) {
                if (zero) {
                    result = 0;
                    break;
                }
                zero = 1;
                continue;
            }
            /* The block's words share their top bits: the slot comes from all of them. */
            uint64_t slot = ((v * TEXT_BASE) >> (64 - tb)) & mask;
            while (set[slot] != 0 && set[slot] != v) {
                slot = (slot + 1) & mask;
            }
            if (set[slot] == v) {
                result = 0;
                break;
            }
            set[slot] = v;
        }
    }
done:
    free(start);
    free(fill);
    free(grouped);
    free(set);
    return result;
}

static PyObject *words_distinct(PyObject *self, PyObject *args) {
    Py_buffer words;
    if (!PyArg_ParseTuple(args, "y*", &words)) {
        return NULL;
    }
    Py_ssize_t n;
    if (word_count(&words, "words", &n)) {
        PyBuffer_Release(&words);
        return NULL;
    }
    int distinct;
    Py_BEGIN_ALLOW_THREADS
    distinct = words_distinct_c((const uint64_t *)words.buf, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&words);
    if (distinct < 0) {
        return PyErr_NoMemory();
    }
    return PyBool_FromLong(distinct);
}

/* Probe i of hash h is the 32-bit (h1 + i * h2) mapped onto [0, m) by multiply-shift;
 * h1 = low 32 bits, h2 = high 32 bits | 1, h1 accumulating in 64 bits (as bloom.py). */
#define FOR_EACH_PROBE(hv, m, k, pos, body)                          \
    do {                                                             \
        uint64_t h1_ = (hv) & 0xFFFFFFFFULL;                         \
        const uint64_t h2_ = ((hv) >> 32) | 1ULL;                    \
        for (int i_ = 0; i_ < (k); i_++) {                           \
            const uint64_t pos = ((h1_ & 0xFFFFFFFFULL) * (m)) >> 32; \
            body;                                                    \
            h1_ += h2_;                                              \
        }                                                            \
    } while (0)

static int bloom_args(Py_buffer *bits, unsigned long long m, int k) {
    if (m == 0 || m > (1ULL << 32) || k < 1) {
        PyErr_SetString(corrupt_error(), "bloom filter of no bits, over 2^32 bits, or no probes");
        return -1;
    }
    return check_size(bits, (Py_ssize_t)((m + 7) / 8), "bits");
}

/* bloom_set(hashes, num_bits, num_hashes, bits): set every probe's bit (little-endian
 * bit order within a byte, as numpy.packbits(bitorder="little")). */
static PyObject *bloom_set(PyObject *self, PyObject *args) {
    Py_buffer hashes, bits;
    unsigned long long m;
    int k;
    if (!PyArg_ParseTuple(args, "y*Kiw*", &hashes, &m, &k, &bits)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n;
    if (bloom_args(&bits, m, k) || word_count(&hashes, "hashes", &n)) {
        goto done;
    }
    const uint64_t *h = (const uint64_t *)hashes.buf;
    uint8_t *b = (uint8_t *)bits.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        FOR_EACH_PROBE(h[j], m, k, pos, b[pos >> 3] |= (uint8_t)(1u << (pos & 7)));
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&bits);
    return result;
}

/* bloom_test(hashes, num_bits, num_hashes, bits, out): out[j] = 1 when every probe's
 * bit is set (the key may be in the filter), else 0. */
static PyObject *bloom_test(PyObject *self, PyObject *args) {
    Py_buffer hashes, bits, out;
    unsigned long long m;
    int k;
    if (!PyArg_ParseTuple(args, "y*Kiy*w*", &hashes, &m, &k, &bits, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = 0;
    if (bloom_args(&bits, m, k) || word_count(&hashes, "hashes", &n) || check_size(&out, n, "out")) {
        goto done;
    }
    const uint64_t *h = (const uint64_t *)hashes.buf;
    const uint8_t *b = (const uint8_t *)bits.buf;
    uint8_t *o = (uint8_t *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        uint8_t hit = 1;
        FOR_EACH_PROBE(h[j], m, k, pos, hit &= (uint8_t)((b[pos >> 3] >> (pos & 7)) & 1));
        o[j] = hit;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&bits);
    PyBuffer_Release(&out);
    return result;
}

/* -- DataSketches HLL coupons ---------------------------------------------------------
 * The NDV sketches of column_stats are Apache DataSketches HLL sketches, so Spark's
 * hll_* functions and the datasketches library read and merge them. A value enters a
 * DataSketches sketch as a "coupon" of its MurmurHash3_x64_128 (seed 9001): the low 26
 * bits of the first half, and 1 + the leading zeros of the second half (at most 63) in
 * the bits above. Longs are hashed as their 8 little-endian bytes (ints widened, as
 * Spark's hll_sketch_agg does), strings and binaries as their bytes; an empty string
 * is not a value (coupon 0 here: a real coupon is never 0). */

static const uint64_t MM_C1 = 0x87C37B91114253D5ULL;
static const uint64_t MM_C2 = 0x4CF5AD432745937FULL;
static const uint64_t DS_SEED = 9001ULL;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline void murmur3_128(const uint8_t *key, int64_t len, uint64_t seed, uint64_t *o1, uint64_t *o2) {
    const int64_t nblocks = len / 16;
    uint64_t h1 = seed, h2 = seed;
    for (int64_t i = 0; i < nblocks; i++) {
        uint64_t k1 = load_le(key + 16 * i, 8), k2 = load_le(key + 16 * i + 8, 8);
        k1 *= MM_C1; k1 = rotl64(k1, 31); k1 *= MM_C2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52DCE729;
        k2 *= MM_C2; k2 = rotl64(k2, 33); k2 *= MM_C1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495AB5;
    }
    const uint8_t *tail = key + 16 * nblocks;
    const int64_t rest = len & 15;
    if (rest > 8) {
        uint64_t k2 = load_le(tail + 8, rest - 8);
        k2 *= MM_C2; k2 = rotl64(k2, 33); k2 *= MM_C1; h2 ^= k2;
    }
    if (rest > 0) {
        uint64_t k1 = load_le(tail, rest > 8 ? 8 : rest);
        k1 *= MM_C1; k1 = rotl64(k1, 31); k1 *= MM_C2; h1 ^= k1;
    }
    h1 ^= (uint64_t)len; h2 ^= (uint64_t)len;
    h1 += h2; h2 += h1;
    h1 = fmix64(h1); h2 = fmix64(h2);
    h1 += h2; h2 += h1;
    *o1 = h1; *o2 = h2;
}

static inline uint32_t ds_coupon(uint64_t h1, uint64_t h2) {
    int lz = h2 == 0 ? 64 : __builtin_clzll(h2);
    uint32_t value = (uint32_t)((lz > 62 ? 62 : lz) + 1);
    return (value << 26) | (uint32_t)(h1 & 0x3FFFFFFULL);
}

/* ds_coupons_words(words, out): out[i] = the coupon of the 8 bytes of words[i]. */
static PyObject *ds_coupons_words(PyObject *self, PyObject *args) {
    Py_buffer words, out;
    if (!PyArg_ParseTuple(args, "y*w*", &words, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = 0;
    if (word_count(&words, "words", &n) || check_items(&out, n, 0, 4, "out")) {
        goto done;
    }
    const uint64_t *w = (const uint64_t *)words.buf;
    uint32_t *o = (uint32_t *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t b[8];
        uint64_t v = w[i], h1, h2;
        for (int j = 0; j < 8; j++) { b[j] = (uint8_t)(v >> (8 * j)); }
        murmur3_128(b, 8, DS_SEED, &h1, &h2);
        o[i] = ds_coupon(h1, h2);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&out);
    return result;
}

/* ds_coupons_text(data, offsets, wide, n, out): out[i] = the coupon of the bytes of
 * value i, 0 for an empty value. */
static PyObject *ds_coupons_text(PyObject *self, PyObject *args) {
    Py_buffer data, offsets, out;
    int wide;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*pnw*", &data, &offsets, &wide, &n, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (check_items(&offsets, n, 1, wide ? 8 : 4, "offsets") || check_items(&out, n, 0, 4, "out")) {
        goto done;
    }
    const uint8_t *d = (const uint8_t *)data.buf;
    const Py_ssize_t len = data.len;
    uint32_t *o = (uint32_t *)out.buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t a = offset_at(offsets.buf, wide, i), b = offset_at(offsets.buf, wide, i + 1);
        if (a < 0 || b < a || b > len) {
            bad = 1;
            break;
        }
        if (b == a) {
            o[i] = 0;
            continue;
        }
        uint64_t h1, h2;
        murmur3_128(d + a, b - a, DS_SEED, &h1, &h2);
        o[i] = ds_coupon(h1, h2);
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(corrupt_error(), "offsets point outside the data buffer");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return result;
}

/* probe_sorted(bits, width, sorted, hashes, out_entry, out_at) -> n: of hashes (int64),
 * those whose bit is set in bits (the top `width` bits of the hash as unsigned, as
 * hash_bits.maybe) and that are in sorted (int64, ascending): their indices in
 * out_entry[0:n] (ascending) and the first index of each in sorted in out_at[0:n]
 * (a lower bound), as hash_bits.find_sorted computes with numpy. */
static PyObject *probe_sorted(PyObject *self, PyObject *args) {
    Py_buffer bits, sorted, hashes, out_entry, out_at;
    int width;
    if (!PyArg_ParseTuple(args, "y*iy*y*w*w*", &bits, &width, &sorted, &hashes, &out_entry, &out_at)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = 0, m = 0;
    if (width < 3 || width > 40) {
        PyErr_SetString(corrupt_error(), "bit table width outside [3, 40]");
        goto done;
    }
    if (word_count(&hashes, "hashes", &n) || word_count(&sorted, "sorted", &m) ||
        check_size(&bits, (Py_ssize_t)1 << (width - 3), "bits") || check_items(&out_entry, n, 0, 8, "out_entry") ||
        check_items(&out_at, n, 0, 8, "out_at")) {
        goto done;
    }
    const uint8_t *b = (const uint8_t *)bits.buf;
    const int64_t *s = (const int64_t *)sorted.buf;
    const int64_t *h = (const int64_t *)hashes.buf;
    int64_t *oe = (int64_t *)out_entry.buf;
    int64_t *oa = (int64_t *)out_at.buf;
    const unsigned shift = (unsigned)(64 - width);
    Py_ssize_t found = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n && m > 0; j++) {
        const uint64_t top = (uint64_t)h[j] >> shift;
        if (!((b[top >> 3] >> (top & 7)) & 1)) {
            continue;
        }
        Py_ssize_t lo = 0, hi = m; /* the first index whose value is >= h[j] */
        while (lo < hi) {
            const Py_ssize_t mid = lo + ((hi - lo) >> 1);
            if (s[mid] < h[j]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo < m && s[lo] == h[j]) {
            oe[found] = (int64_t)j;
            oa[found] = (int64_t)lo;
            found++;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(found);
done:
    PyBuffer_Release(&bits);
    PyBuffer_Release(&sorted);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&out_entry);
    PyBuffer_Release(&out_at);
    return result;
}

static PyMethodDef methods[] = {
    {"hash_text", hash_text, METH_VARARGS, "hash_text(data, offsets, wide, n, seed, out)"},
    {"text_min_max", text_min_max, METH_VARARGS, "text_min_max(data, offsets, wide, n) -> (i, j)"},
    {"hash_words", hash_words, METH_VARARGS, "hash_words(words, seed, out)"},
    {"words_distinct", words_distinct, METH_VARARGS, "words_distinct(words) -> bool"},
    {"bloom_set", bloom_set, METH_VARARGS, "bloom_set(hashes, num_bits, num_hashes, bits)"},
    {"bloom_test", bloom_test, METH_VARARGS, "bloom_test(hashes, num_bits, num_hashes, bits, out)"},
    {"ds_coupons_words", ds_coupons_words, METH_VARARGS, "ds_coupons_words(words, out)"},
    {"ds_coupons_text", ds_coupons_text, METH_VARARGS, "ds_coupons_text(data, offsets, wide, n, out)"},
    {"probe_sorted", probe_sorted, METH_VARARGS, "probe_sorted(bits, width, sorted, hashes, out_entry, out_at) -> n"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "C loops of index entries: text hashes, HLL registers, bloom bits, record-index probes (see _native.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    return PyModule_Create(&module);
}
