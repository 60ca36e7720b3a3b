/*
 * lakeline.table._position_filter: drop rows at sorted positions from a fixed-width
 * Arrow array, in C.
 *
 * A merge-on-read read drops the base rows its position logs touch (a few per
 * thousand) from every column it decodes. Arrow's filter kernel looks at every row's
 * selection bit and, for a column with nulls, every validity bit; here the kept rows
 * are runs between the dropped positions, so each run is one memcpy of values and one
 * shifted word-wise copy of validity bits. That is a copy at memory speed, whatever the
 * nulls (store_sales: 21 ms of Arrow filters per read of three columns).
 *
 * Inputs are plain buffers (Arrow buffers, numpy arrays); outputs are writable buffers
 * the caller allocates. No GIL is held while copying.
 *
 * Any width Arrow has is taken (a fixed_size_binary holds up to 2^31 - 1 bytes a value):
 * the bounds are checked by division, so no product of rows and width can overflow.
 * Rows or positions the buffers do not hold raise lakeline's CorruptFileError (the
 * buffers were decoded from a damaged file), never read or write outside them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

/* Whether rows [0, end) of `width` bytes each (0: one bit each) fit in `len` bytes. */
static int rows_fit(Py_ssize_t end, Py_ssize_t width, Py_ssize_t len) {
    if (width == 0) {
        return end / 8 + (end % 8 != 0) <= len;
    }
    return end <= len / width;
}

/* Whether `offset + length` stays a Py_ssize_t (both are not negative). */
static int end_fits(Py_ssize_t offset, Py_ssize_t length) {
    return offset <= PY_SSIZE_T_MAX - length;
}

/* The positions buffer as int64 values: its length a whole number of them. */
static int positions_count(const char *fn, Py_buffer *positions, Py_ssize_t *npos) {
    if (positions->len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(corrupt_error(), "%s: positions hold %zd bytes, not a whole number of int64", fn, positions->len);
        return -1;
    }
    *npos = positions->len / (Py_ssize_t)sizeof(int64_t);
    return 0;
}

/* Positions ascending, unique and below `length`; else a CorruptFileError. The buffer
 * may be unaligned (bytes), so values are copied out. */
static int positions_valid(const char *fn, const uint8_t *raw, Py_ssize_t npos, Py_ssize_t length) {
    int64_t prev = -1;
    for (Py_ssize_t i = 0; i < npos; i++) {
        int64_t p;
        memcpy(&p, raw + i * (Py_ssize_t)sizeof(int64_t), sizeof p);
        if (p < 0 || p >= length || p <= prev) {
            PyErr_Format(corrupt_error(), "%s: positions must be ascending, unique and within the rows", fn);
            return -1;
        }
        prev = p;
    }
    return 0;
}

static inline int64_t position_at(const uint8_t *raw, Py_ssize_t i) {
    int64_t p;
    memcpy(&p, raw + i * (Py_ssize_t)sizeof(int64_t), sizeof p);
    return p;
}

/* Up to 8 bytes at p as a little-endian word (missing high bytes are zero). */
static inline uint64_t load_word(const uint8_t *p, Py_ssize_t room) {
    uint64_t w = 0;
    memcpy(&w, p, (size_t)(room < 8 ? room : 8));
    return w;
}

static inline void store_word(uint8_t *p, Py_ssize_t room, uint64_t w) {
    memcpy(p, &w, (size_t)(room < 8 ? room : 8));
}

/* Copy n bits from src (bit offset s, src_len bytes) to dst (bit offset d, dst_len
 * bytes), up to 56 bits per step: a word loaded at any bit offset holds 57 of them. */
static void copy_bits(const uint8_t *src, Py_ssize_t src_len, int64_t s, uint8_t *dst, Py_ssize_t dst_len,
                      int64_t d, int64_t n) {
    while (n > 0) {
        const int k = n < 56 ? (int)n : 56;
        const Py_ssize_t sb = (Py_ssize_t)(s >> 3), db = (Py_ssize_t)(d >> 3);
        const int sh = (int)(s & 7), dh = (int)(d & 7);
        const uint64_t mask = (1ULL << k) - 1;
        const uint64_t bits = (load_word(src + sb, src_len - sb) >> sh) & mask;
        const uint64_t old = load_word(dst + db, dst_len - db);
        store_word(dst + db, dst_len - db, (old & ~(mask << dh)) | (bits << dh));
        s += k;
        d += k;
        n -= k;
    }
}

/* Zero bits among the n bits from bit `start` on. */
static int64_t count_zero_bits(const uint8_t *bits, int64_t start, int64_t n) {
    int64_t ones = 0, i = start;
    const int64_t end = start + n;
    for (; i < end && (i & 7); i++) {
        ones += (bits[i >> 3] >> (i & 7)) & 1;
    }
    for (; i + 64 <= end; i += 64) {
        uint64_t w;
        memcpy(&w, bits + (i >> 3), 8);
        ones += __builtin_popcountll(w);
    }
    for (; i < end; i++) {
        ones += (bits[i >> 3] >> (i & 7)) & 1;
    }
    return n - ones;
}

/* drop_rows(values, validity, offset, length, width, positions, out_values, out_validity, out_offset)
 *
 * Rows [offset, offset + length) of an array whose values are `width` bytes each
 * (width 0: one bit each, as Arrow's booleans) and whose validity bitmap is
 * `validity` (None: no nulls), without the rows at `positions` (int64, ascending,
 * unique, relative to `offset`), written to `out_values` and `out_validity` (None
 * when `validity` is None) from row `out_offset` on. The output may be the input
 * itself when out_offset <= offset: every run moves towards the start, and a run is
 * read before anything after it is written. Returns the number of nulls written. */
static PyObject *drop_rows(PyObject *self, PyObject *args) {
    Py_buffer values, positions, out_values;
    PyObject *validity_obj, *out_validity_obj;
    Py_ssize_t offset, length, width, out_offset;
    if (!PyArg_ParseTuple(args, "y*Onnny*w*On", &values, &validity_obj, &offset, &length, &width, &positions,
                          &out_values, &out_validity_obj, &out_offset)) {
        return NULL;
    }
    Py_buffer validity = {0}, out_validity = {0};
    const int nullable = validity_obj != Py_None;
    PyObject *result = NULL;
    if (nullable && (PyObject_GetBuffer(validity_obj, &validity, PyBUF_SIMPLE) < 0 ||
                     PyObject_GetBuffer(out_validity_obj, &out_validity, PyBUF_WRITABLE) < 0)) {
        goto done;
    }
    const uint8_t *pos = (const uint8_t *)positions.buf;
    Py_ssize_t npos;
    if (positions_count("drop_rows", &positions, &npos) < 0) {
        goto done;
    }
    const Py_ssize_t kept = length - npos;
    if (offset < 0 || length < 0 || width < 0 || kept < 0 || out_offset < 0 || !end_fits(offset, length) ||
        !end_fits(out_offset, kept) || !rows_fit(offset + length, width, values.len) ||
        !rows_fit(out_offset + kept, width, out_values.len) ||
        (nullable &&
         (!rows_fit(offset + length, 0, validity.len) || !rows_fit(out_offset + kept, 0, out_validity.len)))) {
        PyErr_SetString(corrupt_error(), "drop_rows: a buffer is too small for the rows");
        goto done;
    }
    if (positions_valid("drop_rows", pos, npos, length) < 0) {
        goto done;
    }
    const uint8_t *src = (const uint8_t *)values.buf;
    uint8_t *dst = (uint8_t *)out_values.buf;
    int64_t nulls = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t from = 0, at = out_offset;
    for (Py_ssize_t i = 0; i <= npos; i++) {
        const int64_t to = i < npos ? position_at(pos, i) : length;  /* the run [from, to) is kept */
        const int64_t run = to - from;
        if (run > 0) {
            if (width == 0) {
                copy_bits(src, values.len, offset + from, dst, out_values.len, at, run);
            } else {
                memmove(dst + at * width, src + (offset + from) * width, (size_t)run * (size_t)width);
            }
            if (nullable) {
                copy_bits((const uint8_t *)validity.buf, validity.len, offset + from, (uint8_t *)out_validity.buf,
                          out_validity.len, at, run);
            }
            at += run;
        }
        from = to + 1;
    }
    if (nullable) {
        nulls = count_zero_bits((const uint8_t *)out_validity.buf, out_offset, at - out_offset);
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(nulls);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&positions);
    PyBuffer_Release(&out_values);
    if (validity.obj) {
        PyBuffer_Release(&validity);
    }
    if (out_validity.obj) {
        PyBuffer_Release(&out_validity);
    }
    return result;
}

static inline int get_bit(const uint8_t *bits, int64_t i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}

static inline void set_bit(uint8_t *bits, int64_t i, int v) {
    bits[i >> 3] = (uint8_t)((bits[i >> 3] & ~(1u << (i & 7))) | ((unsigned)v << (i & 7)));
}

/* fill_holes(values, validity, offset, length, width, positions)
 *
 * Drops the rows at `positions` (as drop_rows) from rows [offset, offset + length) in
 * place, without keeping the order: the first `length - len(positions)` rows are
 * kept, and each dropped row among them takes a kept row from beyond them (the
 * earliest first). Only the dropped rows move, so the cost is theirs, not the
 * array's. `validity`: None, or the writable bitmap. Returns how many of the dropped
 * rows were null. */
static PyObject *fill_holes(PyObject *self, PyObject *args) {
    Py_buffer values, positions;
    PyObject *validity_obj;
    Py_ssize_t offset, length, width;
    if (!PyArg_ParseTuple(args, "w*Onnny*", &values, &validity_obj, &offset, &length, &width, &positions)) {
        return NULL;
    }
    Py_buffer validity = {0};
    const int nullable = validity_obj != Py_None;
    PyObject *result = NULL;
    if (nullable && PyObject_GetBuffer(validity_obj, &validity, PyBUF_WRITABLE) < 0) {
        goto done;
    }
    const uint8_t *pos = (const uint8_t *)positions.buf;
    Py_ssize_t npos;
    if (positions_count("fill_holes", &positions, &npos) < 0) {
        goto done;
    }
    if (offset < 0 || length < 0 || width < 0 || npos > length || !end_fits(offset, length) ||
        !rows_fit(offset + length, width, values.len) ||
        (nullable && !rows_fit(offset + length, 0, validity.len))) {
        PyErr_SetString(corrupt_error(), "fill_holes: a buffer is too small for the rows");
        goto done;
    }
    if (positions_valid("fill_holes", pos, npos, length) < 0) {
        goto done;
    }
    uint8_t *v = (uint8_t *)values.buf;
    uint8_t *valid = nullable ? (uint8_t *)validity.buf : NULL;
    int64_t dropped_nulls = 0;
    Py_BEGIN_ALLOW_THREADS
    if (valid) {
        for (Py_ssize_t i = 0; i < npos; i++) {
            dropped_nulls += !get_bit(valid, offset + position_at(pos, i));
        }
    }
    const int64_t kept = length - npos;
    Py_ssize_t t = 0;  /* the first position at or beyond `kept` */
    while (t < npos && position_at(pos, t) < kept) {
        t++;
    }
    int64_t from = kept;  /* the next row beyond `kept` to move, when it is not dropped */
    for (Py_ssize_t i = 0; i < npos && position_at(pos, i) < kept; i++) {
        while (t < npos && position_at(pos, t) == from) {
            t++;
            from++;
        }
        const int64_t to = position_at(pos, i);
        if (width == 0) {
            set_bit(v, offset + to, get_bit(v, offset + from));
        } else {
            memcpy(v + (offset + to) * width, v + (offset + from) * width, (size_t)width);
        }
        if (valid) {
            set_bit(valid, offset + to, get_bit(valid, offset + from));
        }
        from++;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(dropped_nulls);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&positions);
    if (validity.obj) {
        PyBuffer_Release(&validity);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"drop_rows", drop_rows, METH_VARARGS,
     "drop_rows(values, validity, offset, length, width, positions, out_values, out_validity, out_offset) -> nulls"},
    {"fill_holes", fill_holes, METH_VARARGS, "fill_holes(values, validity, offset, length, width, positions) -> nulls"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_position_filter",
    "Drop rows at sorted positions from fixed-width Arrow arrays (see _position_filter.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__position_filter(void) {
    return PyModule_Create(&module);
}
