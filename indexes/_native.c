/*
 * lakeline.indexes._native: the inner loops of index entries, in C.
 *
 * Index entries (HyperLogLog sketches of every column, bloom filters of keys) are
 * computed for every data file a writer or an index build produces, so they sit on
 * the write path. The numpy versions in hashing.py, hll.py and bloom.py make one
 * pass over memory per arithmetic step; these loops make one pass in all, and run
 * without the GIL so an engine's threads use every core.
 *
 * Every function computes exactly what its numpy reference computes (the tests
 * compare them on random input): entries written by a process with this module are
 * probed by processes without it. Inputs are plain buffers (numpy arrays, Arrow
 * buffers); outputs are preallocated writable buffers the caller sizes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

static int check_size(Py_buffer *b, Py_ssize_t need, const char *what) {
    if (b->len < need) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", what, b->len, need);
        return -1;
    }
    return 0;
}

static inline int64_t offset_at(const void *offsets, int wide, Py_ssize_t i) {
    return wide ? ((const int64_t *)offsets)[i] : (int64_t)((const int32_t *)offsets)[i];
}

static inline void hll_add(uint8_t *r, int p, uint64_t h);

/* Hash strings data[offsets[i]:offsets[i+1]] for i < n (checked against the data) into
 * `out`, or, when `regs` is set, into those 2^p HLL registers. Runs without the GIL.
 * Returns 0, or -1 with a Python error for offsets outside the data. */
static int each_text_hash(Py_buffer *data, Py_buffer *offsets, int wide, Py_ssize_t n, uint64_t seed,
                          uint64_t *out, uint8_t *regs, int p) {
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
        if (regs != NULL) {
            hll_add(regs, p, h);
        } else {
            out[i] = h;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "offsets point outside the data buffer");
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
    Py_ssize_t width = wide ? 8 : 4;
    if (check_size(&offsets, (n + 1) * width, "offsets") || check_size(&out, n * 8, "out")) {
        goto done;
    }
    if (each_text_hash(&data, &offsets, wide, n, (uint64_t)seed, (uint64_t *)out.buf, NULL, 0)) {
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
        PyErr_SetString(PyExc_ValueError, "min/max of no strings");
        goto done;
    }
    if (check_size(&offsets, (n + 1) * (wide ? 8 : 4), "offsets")) {
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
        PyErr_SetString(PyExc_ValueError, "offsets point outside the data buffer");
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
    const Py_ssize_t n = words.len / 8;
    if (check_size(&out, n * 8, "out")) {
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

/* The HLL register update of one hash (see hll_update). */
static inline void hll_add(uint8_t *r, int p, uint64_t h) {
    const int q = 64 - p;
    const uint64_t low = h & ((1ULL << q) - 1);
    const uint8_t rank = low ? (uint8_t)(q - (63 - __builtin_clzll(low))) : (uint8_t)(q + 1);
    const uint64_t at = h >> q;
    if (rank > r[at]) {
        r[at] = rank;
    }
}

static int hll_args(int p, Py_buffer *regs) {
    if (p < 4 || p > 18) {
        PyErr_Format(PyExc_ValueError, "HLL precision %d outside 4..18", p);
        return -1;
    }
    return check_size(regs, (Py_ssize_t)1 << p, "registers");
}

/* hll_words(words, seed, p, registers): hll_update of hash_words(words, seed) in one
 * pass, without the hashes in memory (an NDV sketch needs nothing else of them). */
static PyObject *hll_words(PyObject *self, PyObject *args) {
    Py_buffer words, regs;
    unsigned long long seed;
    int p;
    if (!PyArg_ParseTuple(args, "y*Kiw*", &words, &seed, &p, &regs)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (hll_args(p, &regs)) {
        goto done;
    }
    const uint64_t *w = (const uint64_t *)words.buf;
    const Py_ssize_t n = words.len / 8;
    uint8_t *r = (uint8_t *)regs.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        hll_add(r, p, fmix64(w[i] ^ (uint64_t)seed));
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&regs);
    return result;
}

/* hll_text(data, offsets, wide, n, seed, p, registers): hll_update of hash_text(...) in
 * one pass. */
static PyObject *hll_text(PyObject *self, PyObject *args) {
    Py_buffer data, offsets, regs;
    int wide, p;
    Py_ssize_t n;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*y*pnKiw*", &data, &offsets, &wide, &n, &seed, &p, &regs)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (hll_args(p, &regs) || check_size(&offsets, (n + 1) * (wide ? 8 : 4), "offsets")) {
        goto done;
    }
    if (each_text_hash(&data, &offsets, wide, n, (uint64_t)seed, NULL, (uint8_t *)regs.buf, p)) {
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&regs);
    return result;
}

/* hll_update(hashes, p, registers): registers[h >> (64 - p)] = max(itself, rank), the
 * rank being the leading zeros of the low 64 - p bits plus one (65 - p when zero). */
static PyObject *hll_update(PyObject *self, PyObject *args) {
    Py_buffer hashes, regs;
    int p;
    if (!PyArg_ParseTuple(args, "y*iw*", &hashes, &p, &regs)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (hll_args(p, &regs)) {
        goto done;
    }
    const uint64_t *h = (const uint64_t *)hashes.buf;
    const Py_ssize_t n = hashes.len / 8;
    uint8_t *r = (uint8_t *)regs.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        hll_add(r, p, h[i]);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&regs);
    return result;
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
        PyErr_SetString(PyExc_ValueError, "bloom filter of no bits, over 2^32 bits, or no probes");
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
    if (bloom_args(&bits, m, k)) {
        goto done;
    }
    const uint64_t *h = (const uint64_t *)hashes.buf;
    const Py_ssize_t n = hashes.len / 8;
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
    const Py_ssize_t n = hashes.len / 8;
    if (bloom_args(&bits, m, k) || check_size(&out, n, "out")) {
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

static PyMethodDef methods[] = {
    {"hash_text", hash_text, METH_VARARGS, "hash_text(data, offsets, wide, n, seed, out)"},
    {"text_min_max", text_min_max, METH_VARARGS, "text_min_max(data, offsets, wide, n) -> (i, j)"},
    {"hash_words", hash_words, METH_VARARGS, "hash_words(words, seed, out)"},
    {"hll_update", hll_update, METH_VARARGS, "hll_update(hashes, p, registers)"},
    {"hll_words", hll_words, METH_VARARGS, "hll_words(words, seed, p, registers)"},
    {"hll_text", hll_text, METH_VARARGS, "hll_text(data, offsets, wide, n, seed, p, registers)"},
    {"bloom_set", bloom_set, METH_VARARGS, "bloom_set(hashes, num_bits, num_hashes, bits)"},
    {"bloom_test", bloom_test, METH_VARARGS, "bloom_test(hashes, num_bits, num_hashes, bits, out)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "C loops of index entries: text hashes, HLL registers, bloom bits (see _native.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    return PyModule_Create(&module);
}
