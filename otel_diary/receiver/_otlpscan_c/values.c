/* Attribute values as Python objects: strings shared within a scan, plain values read
 * here, arrays and kvlists handed to protobuf; and the estimated size of attributes. */

#include "otlpscan.h"

static PyObject *
cached_text(Texts *texts, const uint8_t *data, size_t size)
{
    if (size > TEXT_CACHED)
        return PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, "replace");
    uint64_t head = 0, tail = 0;  /* hashed: the size and the first and last 8 bytes */
    if (size >= 8) {
        memcpy(&head, data, 8);
        memcpy(&tail, data + size - 8, 8);
    } else {
        for (size_t i = 0; i < size; i++)
            head = head << 8 | data[i];
    }
    uint64_t hash = (head ^ (tail * 0x9E3779B97F4A7C15ULL) ^ size) * 0xFF51AFD7ED558CCDULL;
    PyObject **slot = &texts->slots[(hash >> 40) & (TEXT_SLOTS - 1)];
    PyObject *known = *slot;  /* ASCII: its characters are its UTF-8 bytes */
    if (known != NULL && (size_t)PyUnicode_GET_LENGTH(known) == size &&
        memcmp(PyUnicode_DATA(known), data, size) == 0)
        return Py_NewRef(known);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, "replace");
    if (text != NULL && PyUnicode_IS_ASCII(text))
        Py_XSETREF(*slot, Py_NewRef(text));
    return text;
}

/* An AnyValue as plain data; arrays, kvlists and repeated members go to decode_any. */
static PyObject *
any_value(const Wanted *wanted, const uint8_t *data, size_t size)
{
    Field field = {0}, last = {0};
    Fields fields = fields_of(data, size);
    int got, kind = 0, members = 0, other = 0;
    while ((got = next(&fields, &field)) > 0) {
        int expected;
        switch (field.number) {
        case 1: case 5: case 6: case 7: expected = LEN; break;
        case 2: case 3: expected = VARINT; break;
        case 4: expected = I64; break;
        default: expected = -1;
        }
        if (field.wire != expected) {
            other = 1;  /* a member newer than this reader, or an unknown field */
            continue;
        }
        members++;
        kind = (int)field.number;
        last = field;
    }
    if (got < 0)
        return NULL;
    /* nested, merged or not one of the members above: protobuf decides */
    if (kind == 5 || kind == 6 || members > 1 || other)
        return PyObject_CallFunction(wanted->decode_any, "y#", (const char *)data,
                                     (Py_ssize_t)size);
    switch (kind) {
    case 1: return cached_text(wanted->texts, last.data, last.size);
    case 2: return PyBool_FromLong(last.varint != 0);
    case 3: return PyLong_FromLongLong((long long)last.varint);
    case 4: {
        double value;
        memcpy(&value, &last.varint, sizeof value);
        return PyFloat_FromDouble(value);
    }
    case 7: return PyBytes_FromStringAndSize((const char *)last.data, (Py_ssize_t)last.size);
    default: Py_RETURN_NONE;
    }
}

/* The value of a KeyValue at [data, data + size) as plain data. */
static PyObject *
pair_value(const Wanted *wanted, const uint8_t *data, size_t size, const Pair *pair)
{
    if (pair->values <= 1)
        return any_value(wanted, pair->value, pair->value_size);
    /* a message field given twice is merged: protobuf decides */
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)size);
    if (bytes == NULL)
        return NULL;
    PyObject *value = PyObject_CallFunctionObjArgs(wanted->decode_any, bytes, Py_True, NULL);
    Py_DECREF(bytes);
    return value;
}

/* Sets key -> value of a KeyValue in dict; the key is ``key`` when given, else decoded. */
int
set_pair(const Wanted *wanted, PyObject *dict, PyObject *key, const uint8_t *data,
         size_t size, const Pair *pair)
{
    PyObject *value = pair_value(wanted, data, size, pair);
    if (value == NULL)
        return -1;
    PyObject *decoded = NULL;
    if (key == NULL) {
        key = decoded = cached_text(wanted->texts, pair->key, pair->key_size);
        if (key == NULL) {
            Py_DECREF(value);
            return -1;
        }
    }
    int set = PyDict_SetItem(dict, key, value);
    Py_DECREF(value);
    Py_XDECREF(decoded);
    return set;
}

/* Every KeyValue in the fields ``number`` of a message, into dict (the last key wins). */
int
all_attributes(const Wanted *wanted, PyObject *dict, const uint8_t *data, size_t size,
               uint32_t number)
{
    Field field = {0};
    Fields fields = fields_of(data, size);
    Pair pair;
    int got;
    while ((got = next(&fields, &field)) > 0) {
        if (field.number != number || field.wire != LEN)
            continue;
        if (read_pair(field.data, field.size, &pair, NULL, 0) < 0 ||
            set_pair(wanted, dict, NULL, field.data, field.size, &pair) < 0)
            return -1;
    }
    return got < 0 ? -1 : 0;
}

/* len() of a str or bytes, else 0. */
static Py_ssize_t
text_length(PyObject *value)
{
    if (PyUnicode_Check(value))
        return PyUnicode_GET_LENGTH(value);
    return PyBytes_Check(value) ? PyBytes_GET_SIZE(value) : 0;
}

/* otel_diary.assembly.batch._held(value): the text's length, or for a list, tuple or dict
   64 per item and what its items (and keys) hold, at any depth (decoded values are at most
   MAX_DEPTH deep; containers past HELD_DEPTH, which no decoded value reaches, count nothing
   more, as in batch.HELD_DEPTH). */
enum { HELD_DEPTH = 256 };

static long long
held(PyObject *value, int depth)
{
    if (PyUnicode_Check(value) || PyBytes_Check(value))
        return text_length(value);
    if (depth > HELD_DEPTH)
        return 0;
    long long size = 0;
    if (PyList_Check(value) || PyTuple_Check(value)) {
        Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
        size = 64 * (long long)count;
        for (Py_ssize_t i = 0; i < count; i++)
            size += held(PySequence_Fast_GET_ITEM(value, i), depth + 1);
    } else if (PyDict_Check(value)) {
        Py_ssize_t at = 0;
        PyObject *key, *item;
        size = 64 * (long long)PyDict_GET_SIZE(value);
        while (PyDict_Next(value, &at, &key, &item))
            size += held(key, depth + 1) + held(item, depth + 1);
    }
    return size;
}

/* otel_diary.assembly.batch.held_by_values(attributes): what a dict's values hold besides
   their slots. */
long long
held_by_values(PyObject *attributes)
{
    long long size = 0;
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(attributes, &at, &key, &value)) {
        if (PyUnicode_CheckExact(value) || PyBytes_CheckExact(value))
            size += text_length(value);
        else if (!PyLong_CheckExact(value) && !PyBool_Check(value) && !PyFloat_CheckExact(value))
            size += held(value, 1);
    }
    return size;
}

/* otel_diary.assembly.batch.estimate(attributes): rough bytes held for a dict of attributes. */
long long
estimate(PyObject *attributes)
{
    long long size = 64 + 120 * (long long)PyDict_GET_SIZE(attributes);
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(attributes, &at, &key, &value))
        size += text_length(key);
    return size + held_by_values(attributes);
}
