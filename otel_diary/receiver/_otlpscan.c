/* A selective reader of OTLP trace requests, the fast path of otel_diary._otlp.
 *
 * Reading spans through protobuf's Python API creates a Python object for every span and
 * every attribute, which costs far more than parsing the request. A receiver needs few of
 * them: the ids of every span, and the few attributes and fields of the spans that matter
 * to a diary. scan() walks the wire format of an ExportTraceServiceRequest and builds
 * Python objects only for what it keeps.
 *
 * Given a schema (compiled by schema() from the message descriptors protobuf itself
 * decodes with), it also validates the request while it walks it: every field of every
 * message it knows must have its declared wire type, every message field must hold a
 * valid message and every string field valid UTF-8; groups, messages nested more than
 * MAX_DEPTH deep and anything else it is not sure protobuf accepts raise ValueError. It
 * is stricter than protobuf, never more lenient: what it refuses, the caller hands to
 * ExportTraceServiceRequest.FromString for the verdict. Without a schema it reads a
 * request FromString has already accepted.
 *
 * It is safe on any input either way: every read is bounds-checked, nesting is
 * depth-limited, and what it cannot read raises ValueError.
 *
 * Field numbers (opentelemetry/proto/collector/trace/v1, trace/v1, common/v1):
 *   ExportTraceServiceRequest: resource_spans = 1
 *   ResourceSpans: resource = 1, scope_spans = 2
 *   ScopeSpans: spans = 2
 *   Span: trace_id = 1, span_id = 2, name = 5, end_time_unix_nano = 8 (fixed64),
 *         attributes = 9, status = 15
 *   Status: code = 3
 *   KeyValue: key = 1, value = 2
 *   AnyValue: string = 1, bool = 2, int = 3, double = 4, array = 5, kvlist = 6, bytes = 7
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#ifndef Py_ALWAYS_INLINE  /* Python.h defines it from 3.11 */
#  if defined(__GNUC__) || defined(__clang__)
#    define Py_ALWAYS_INLINE __attribute__((always_inline))
#  elif defined(_MSC_VER)
#    define Py_ALWAYS_INLINE __forceinline
#  else
#    define Py_ALWAYS_INLINE
#  endif
#endif

enum { VARINT = 0, I64 = 1, LEN = 2, SGROUP = 3, EGROUP = 4, I32 = 5 };
enum { MAX_GROUP_DEPTH = 100, STATUS_CODE_ERROR = 2, TRACE_ID = 16, SPAN_ID = 8 };
/* Messages nested deeper than this are refused when validating (protobuf allows 100). */
enum { MAX_DEPTH = 64 };
/* Protobuf refuses tags and lengths in more than 5 bytes (they are 32-bit varints). */
enum { MAX_TAG_BYTES = 5 };
/* The nesting level of a span: in a request (1), its ResourceSpans and its ScopeSpans. */
enum { SPAN_DEPTH = 4 };

typedef struct {
    uint32_t number;
    int wire;
    uint64_t varint;      /* VARINT, I64 and I32 values */
    const uint8_t *data;  /* LEN payload */
    size_t size;
} Field;

static int
fail(const char *what)
{
    PyErr_Format(PyExc_ValueError, "malformed protobuf: %s", what);
    return -1;
}

static int
read_varint(const uint8_t **at, const uint8_t *end, uint64_t *out, int max_bytes)
{
    const uint8_t *p = *at;
    uint64_t value = 0;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
        if (p >= end)
            return fail("truncated varint");
        uint8_t byte = *p++;
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *at = p;
            *out = value;
            return 0;
        }
    }
    return fail(max_bytes == 10 ? "varint longer than 10 bytes"
                                : "tag or length longer than 5 bytes");
}

static inline uint64_t
little_endian(const uint8_t *p, int bytes)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t value = 0;
    memcpy(&value, p, (size_t)bytes);
    return value;
#else
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; i--)
        value = (value << 8) | p[i];
    return value;
#endif
}

static int skip_group(const uint8_t **at, const uint8_t *end, uint32_t number, int depth);

/* A varint at *p, most often one byte (tags, lengths, small values): 0 or -1. */
static inline int
varint_at(const uint8_t **p, const uint8_t *end, uint64_t *out, int max_bytes)
{
    if (*p < end && **p < 0x80) {
        *out = **p;
        (*p)++;
        return 0;
    }
    return read_varint(p, end, out, max_bytes);
}

/* Reads the next field at *at: 1 when one was read, 0 at the end, -1 on error. */
static inline Py_ALWAYS_INLINE int
next_field(const uint8_t **at, const uint8_t *end, Field *field, int depth)
{
    const uint8_t *p = *at;
    if (p >= end)
        return 0;
    uint64_t tag;
    if (varint_at(&p, end, &tag, MAX_TAG_BYTES) < 0)
        return -1;
    field->number = (uint32_t)(tag >> 3);
    field->wire = (int)(tag & 7);
    if (field->number == 0 || (tag >> 3) > 0x1fffffff)
        return fail("invalid field number");
    switch (field->wire) {
    case VARINT:
        if (varint_at(&p, end, &field->varint, 10) < 0)
            return -1;
        *at = p;
        return 1;
    case I64:
        if (end - p < 8)
            return fail("truncated fixed64");
        field->varint = little_endian(p, 8);
        *at = p + 8;
        return 1;
    case I32:
        if (end - p < 4)
            return fail("truncated fixed32");
        field->varint = little_endian(p, 4);
        *at = p + 4;
        return 1;
    case LEN: {
        uint64_t size;
        if (varint_at(&p, end, &size, MAX_TAG_BYTES) < 0)
            return -1;
        if (size > (uint64_t)(end - p))
            return fail("truncated length-delimited field");
        if (size >= 0x7fffffff)  /* protobuf refuses these whatever follows */
            return fail("length-delimited field of 2 GiB or more");
        field->data = p;
        field->size = (size_t)size;
        *at = p + size;
        return 1;
    }
    case SGROUP:
        *at = p;
        return skip_group(at, end, field->number, depth + 1) < 0 ? -1 : 1;
    case EGROUP:  /* the caller tells whether it closes the group it is in */
        *at = p;
        return 1;
    default:
        return fail("unexpected wire type");
    }
}

static int
skip_group(const uint8_t **at, const uint8_t *end, uint32_t number, int depth)
{
    if (depth > MAX_GROUP_DEPTH)
        return fail("groups nested too deeply");
    Field field = {0};
    int got;
    while ((got = next_field(at, end, &field, depth)) > 0) {
        if (field.wire == EGROUP) {
            if (field.number != number)
                return fail("mismatched end group");
            return 0;
        }
    }
    return got < 0 ? -1 : fail("unterminated group");
}

/* The fields of one message, read in turn with next(). */
typedef struct {
    const uint8_t *at, *end;
} Fields;

static Fields
fields_of(const uint8_t *data, size_t size)
{
    Fields fields = {data, data + size};
    return fields;
}

/* 1 when a field was read into *field, 0 at the end of the message, -1 on error. */
static inline Py_ALWAYS_INLINE int
next(Fields *fields, Field *field)
{
    int got = next_field(&fields->at, fields->end, field, 0);
    if (got > 0 && field->wire == EGROUP)
        return fail("unexpected end group");
    return got;
}

/* -- validation ------------------------------------------------------------------------- */

/* What a field's wire value must be, from its descriptor type. */
enum { K_UNKNOWN, K_VARINT, K_I64, K_I32, K_STRING, K_BYTES, K_MESSAGE, K_REFUSED };

/* The messages scan() walks itself, first in a schema, in this order. */
enum { M_REQUEST, M_RESOURCE_SPANS, M_SCOPE_SPANS, M_SPAN, M_KEY_VALUE, M_ANY_VALUE, M_COUNT };
enum { MAX_FIELD_NUMBER = 4096 };  /* rules are indexed by field number */

typedef struct {
    uint8_t kind;
    uint32_t message;  /* K_MESSAGE: the index of its type */
} Rule;

typedef struct {
    uint32_t count;  /* rules[number] for number < count; other numbers are unknown */
    Rule *rules;
} MessageRules;

typedef struct {
    Py_ssize_t count;
    MessageRules *messages;
    int quick_pairs;  /* whether quick_pair() validates KeyValues as these rules have it */
} Schema;

static const char SCHEMA[] = "otel_diary._otlpscan.Schema";

/* Whether [s, s + size) is UTF-8 as Unicode defines it (no surrogates, overlong forms or
   code points past U+10FFFF), as protobuf and Python's strict codec have it. */
static int
is_utf8(const uint8_t *s, size_t size)
{
    /* most strings are ASCII: look at 8 bytes at a time (the last 8 overlap) */
    uint64_t high = 0, word;
    if (size >= 8) {
        for (size_t at = 0; at + 8 <= size; at += 8) {
            memcpy(&word, s + at, 8);
            high |= word;
        }
        memcpy(&word, s + size - 8, 8);
        high |= word;
    } else {
        for (size_t at = 0; at < size; at++)
            high |= s[at];
    }
    if (!(high & 0x8080808080808080ULL))
        return 1;
    size_t i = 0;
    while (i < size) {
        if (size - i >= 8) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (!(word & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t left = size - i;
        if (c >= 0xC2 && c <= 0xDF) {
            if (left < 2 || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (left < 3)
                return 0;
            uint8_t low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
            if (s[i + 1] < low || s[i + 1] > high || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (left < 4)
                return 0;
            uint8_t low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
            if (s[i + 1] < low || s[i + 1] > high || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static int check_message(const Schema *schema, uint32_t message, const uint8_t *data,
                         size_t size, int depth);

/* Whether a field of ``message`` (at nesting ``depth``) is as its rule has it: 0, or -1
   with ValueError. Unknown fields are skipped unless they are groups. */
static inline int
check_field(const Schema *schema, uint32_t message, const Field *field, int depth)
{
    const MessageRules *rules = &schema->messages[message];
    Rule rule = {K_UNKNOWN, 0};
    if (field->number < rules->count)
        rule = rules->rules[field->number];
    switch (rule.kind) {
    case K_UNKNOWN:
        return field->wire == SGROUP ? fail("a group (not validated here)") : 0;
    case K_VARINT:
        return field->wire == VARINT ? 0 : fail("a field with another wire type");
    case K_I64:
        return field->wire == I64 ? 0 : fail("a field with another wire type");
    case K_I32:
        return field->wire == I32 ? 0 : fail("a field with another wire type");
    case K_BYTES:
        return field->wire == LEN ? 0 : fail("a field with another wire type");
    case K_STRING:
        if (field->wire != LEN)
            return fail("a field with another wire type");
        return is_utf8(field->data, field->size) ? 0 : fail("invalid UTF-8 in a string");
    case K_MESSAGE:
        if (field->wire != LEN)
            return fail("a field with another wire type");
        return check_message(schema, rule.message, field->data, field->size, depth + 1);
    default:
        return fail("a field of a kind not validated here");
    }
}

/* Whether a whole message is as the schema has it (``depth``: its nesting level). */
static int
check_message(const Schema *schema, uint32_t message, const uint8_t *data, size_t size,
              int depth)
{
    if (depth > MAX_DEPTH)
        return fail("messages nested too deeply");
    Fields fields = fields_of(data, size);
    Field field = {0};
    int got;
    while ((got = next(&fields, &field)) > 0)
        if (check_field(schema, message, &field, depth) < 0)
            return -1;
    return got;
}

static void
free_schema(Schema *schema)
{
    if (schema->messages != NULL)
        for (Py_ssize_t i = 0; i < schema->count; i++)
            PyMem_Free(schema->messages[i].rules);
    PyMem_Free(schema->messages);
    PyMem_Free(schema);
}

static void
schema_capsule_destructor(PyObject *capsule)
{
    Schema *schema = PyCapsule_GetPointer(capsule, SCHEMA);
    if (schema != NULL)
        free_schema(schema);
}

/* The kind of a field from its FieldDescriptorProto.Type. */
static int
kind_of(long type)
{
    switch (type) {
    case 3: case 4: case 5: case 8: case 13: case 14: case 17: case 18:
        return K_VARINT;  /* int64 uint64 int32 bool uint32 enum sint32 sint64 */
    case 1: case 6: case 16:
        return K_I64;  /* double fixed64 sfixed64 */
    case 2: case 7: case 15:
        return K_I32;  /* float fixed32 sfixed32 */
    case 9: return K_STRING;
    case 12: return K_BYTES;
    case 11: return K_MESSAGE;
    default: return K_REFUSED;  /* groups, and types this reader does not know */
    }
}

PyDoc_STRVAR(schema_doc,
"schema(messages)\n"
"--\n\n"
"Compiles the wire rules scan() validates against. ``messages`` is a sequence of\n"
"sequences of ``(field number, FieldDescriptorProto type, message index)``, one per\n"
"message type, the message index being the position of a message field's type in\n"
"``messages``. The first six are ExportTraceServiceRequest, ResourceSpans, ScopeSpans,\n"
"Span, KeyValue and AnyValue. Scalar fields, repeated or not, are read unpacked only.");

/* The kind of field ``number`` of message ``message`` by the schema. */
static int
kind_in(const Schema *schema, uint32_t message, uint32_t number)
{
    const MessageRules *rules = &schema->messages[message];
    return number < rules->count ? rules->rules[number].kind : K_UNKNOWN;
}

/* Whether the schema has KeyValue and AnyValue as quick_pair() reads them. */
static int
quick_pairs_hold(const Schema *schema)
{
    return kind_in(schema, M_KEY_VALUE, 1) == K_STRING &&
           kind_in(schema, M_KEY_VALUE, 2) == K_MESSAGE &&
           schema->messages[M_KEY_VALUE].rules[2].message == M_ANY_VALUE &&
           kind_in(schema, M_ANY_VALUE, 1) == K_STRING &&
           kind_in(schema, M_ANY_VALUE, 2) == K_VARINT &&
           kind_in(schema, M_ANY_VALUE, 3) == K_VARINT &&
           kind_in(schema, M_ANY_VALUE, 4) == K_I64 &&
           kind_in(schema, M_ANY_VALUE, 7) == K_BYTES;
}

static PyObject *
schema(PyObject *Py_UNUSED(module), PyObject *messages)
{
    /* Copied into tuples and read once each: converting a number may run Python code,
       which must not change what was already read. */
    PyObject *list = PySequence_Tuple(messages);
    if (list == NULL)
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(list);
    Schema *compiled = NULL;
    if (count < M_COUNT) {
        PyErr_SetString(PyExc_ValueError, "a schema starts with the six messages scanned");
        goto error;
    }
    if ((compiled = PyMem_Calloc(1, sizeof(Schema))) == NULL ||
        (compiled->messages = PyMem_Calloc((size_t)count, sizeof(MessageRules))) == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    compiled->count = count;
    for (Py_ssize_t m = 0; m < count; m++) {
        PyObject *fields = PySequence_Tuple(PyTuple_GET_ITEM(list, m));
        if (fields == NULL)
            goto error;
        Py_ssize_t n = PyTuple_GET_SIZE(fields);
        long (*read)[3] = PyMem_Calloc(n ? (size_t)n : 1, sizeof *read);
        if (read == NULL) {
            Py_DECREF(fields);
            PyErr_NoMemory();
            goto error;
        }
        uint32_t highest = 0;
        for (Py_ssize_t f = 0; f < n; f++) {
            long *field = read[f];
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, f), "lll:field", &field[0],
                                  &field[1], &field[2])) {
                PyMem_Free(read);
                Py_DECREF(fields);
                goto error;
            }
            if (field[0] < 1 || field[0] >= MAX_FIELD_NUMBER || field[2] < 0 ||
                field[2] >= count) {
                PyErr_Format(PyExc_ValueError, "field %ld (message %ld) is out of range",
                             field[0], field[2]);
                PyMem_Free(read);
                Py_DECREF(fields);
                goto error;
            }
            if ((uint32_t)field[0] >= highest)
                highest = (uint32_t)field[0] + 1;
        }
        Py_DECREF(fields);
        MessageRules *rules = &compiled->messages[m];
        if ((rules->rules = PyMem_Calloc(highest ? highest : 1, sizeof(Rule))) == NULL) {
            PyMem_Free(read);
            PyErr_NoMemory();
            goto error;
        }
        rules->count = highest;
        for (Py_ssize_t f = 0; f < n; f++) {
            rules->rules[read[f][0]].kind = (uint8_t)kind_of(read[f][1]);
            rules->rules[read[f][0]].message = (uint32_t)read[f][2];
        }
        PyMem_Free(read);
    }
    Py_DECREF(list);
    compiled->quick_pairs = quick_pairs_hold(compiled);
    PyObject *capsule = PyCapsule_New(compiled, SCHEMA, schema_capsule_destructor);
    if (capsule == NULL)
        free_schema(compiled);
    return capsule;
error:
    Py_DECREF(list);
    if (compiled != NULL)
        free_schema(compiled);
    return NULL;
}

/* -- what a scan is asked for ---------------------------------------------------------- */

/* Short ASCII strings decoded during one scan, by a hash of their bytes: attribute values
   repeat (operation names, models), and a repeat shares the str decoded first. */
enum { TEXT_SLOTS = 64, TEXT_CACHED = 64 };
typedef struct {
    PyObject *slots[TEXT_SLOTS];
} Texts;

static PyObject *
cached_text(Texts *texts, const uint8_t *data, size_t size)
{
    if (size > TEXT_CACHED)
        return PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, NULL);
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
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, NULL);
    if (text != NULL && PyUnicode_IS_ASCII(text))
        Py_XSETREF(*slot, Py_NewRef(text));
    return text;
}

typedef struct {
    PyObject *tuple;           /* the keys, a tuple of str: they stay alive while it does */
    PyObject *marker_values;   /* what the marker (the first key) must be, or None */
    Py_ssize_t count;
    const char **utf8;
    Py_ssize_t *sizes;
    uint64_t lengths;          /* bit n set: a key is n bytes long (bit 63: 63 or more) */
    PyTypeObject *contribution;  /* the Contribution class (a tuple subclass) */
    PyTypeObject *part;        /* the Part class (a tuple subclass) */
    PyObject *decode_any;      /* bytes of an AnyValue -> plain value (arrays, kvlists) */
    const Schema *schema;      /* what to validate against, or NULL */
    Texts *texts;              /* strings decoded so far */
    int child_errors;
    long long contribution_bytes;
    long long attribute_bytes;
    long long task_bytes;
} Wanted;

/* The index of the wanted key equal to [key, key + size), or -1. */
static Py_ssize_t
wanted_index(const Wanted *wanted, const uint8_t *key, size_t size)
{
    if (!(wanted->lengths >> (size < 63 ? size : 63) & 1))
        return -1;  /* most keys: no wanted key is that long */
    for (Py_ssize_t i = 0; i < wanted->count; i++)
        if ((size_t)wanted->sizes[i] == size && memcmp(wanted->utf8[i], key, size) == 0)
            return i;
    return -1;
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

/* A KeyValue's key and value; more than one value occurrence (merged by protobuf). */
typedef struct {
    const uint8_t *key, *value;
    size_t key_size, value_size;
    int values;
} Pair;

/* Reads the usual KeyValue: its key, then its value holding one string, bool, int, double
   or bytes, every length in one byte. 1 when the KeyValue is of that form (and, when
   ``validate``, valid as check_message() has it), with *pair filled as read_pair() fills
   it; 0 when it is not, and the caller reads it field by field. */
static inline int
quick_pair(const uint8_t *data, size_t size, Pair *pair, int validate)
{
    const uint8_t *end = data + size;
    if (size < 4 || data[0] != (1 << 3 | LEN) || data[1] >= 0x80 || data[1] > size - 4)
        return 0;  /* past the key, at least a tag and a length are left */
    const uint8_t *key = data + 2, *p = key + data[1];
    if (p[0] != (2 << 3 | LEN) || p[1] >= 0x80 || p[1] != end - p - 2)
        return 0;
    const uint8_t *value = p + 2;
    size_t value_size = p[1];
    if (value_size > 0) {
        size_t member = value_size - 1;  /* after the tag */
        switch (value[0]) {
        case 1 << 3 | LEN:  /* string_value */
        case 7 << 3 | LEN:  /* bytes_value */
            if (member == 0 || value[1] != member - 1)
                return 0;
            if (validate && value[0] == (1 << 3 | LEN) && !is_utf8(value + 2, member - 1))
                return 0;
            break;
        case 2 << 3 | VARINT:  /* bool_value */
        case 3 << 3 | VARINT:  /* int_value: a varint of up to 10 bytes, the last one ends */
            if (member == 0 || member > 10 || value[value_size - 1] >= 0x80)
                return 0;
            for (size_t i = 1; i < value_size - 1; i++)
                if (value[i] < 0x80)
                    return 0;
            break;
        case 4 << 3 | I64:  /* double_value */
            if (member != 8)
                return 0;
            break;
        default:
            return 0;
        }
    }
    if (validate && !is_utf8(key, data[1]))
        return 0;
    pair->key = key;
    pair->key_size = data[1];
    pair->value = value;
    pair->value_size = value_size;
    pair->values = 1;
    return 1;
}

static int
read_pair(const uint8_t *data, size_t size, Pair *pair, const Schema *schema, int depth)
{
    if ((schema == NULL || schema->quick_pairs) && quick_pair(data, size, pair, schema != NULL))
        return 0;
    Field field = {0};
    Fields fields = fields_of(data, size);
    int got;
    pair->key = pair->value = (const uint8_t *)"";
    pair->key_size = pair->value_size = 0;
    pair->values = 0;
    while ((got = next(&fields, &field)) > 0) {
        if (schema != NULL && check_field(schema, M_KEY_VALUE, &field, depth) < 0)
            return -1;
        if (field.wire != LEN)
            continue;
        if (field.number == 1) {
            pair->key = field.data;
            pair->key_size = field.size;
        } else if (field.number == 2) {
            pair->value = field.data;
            pair->value_size = field.size;
            pair->values++;
        }
    }
    return got < 0 ? -1 : 0;
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
static int
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

/* Adds a KeyValue to *found when its key is wanted; *found is created on the first one. */
static int
take_attribute(const Wanted *wanted, const uint8_t *data, size_t size, PyObject **found,
               int *has_marker)
{
    Pair pair;
    if (read_pair(data, size, &pair, wanted->schema, SPAN_DEPTH + 1) < 0)
        return -1;
    Py_ssize_t index = wanted_index(wanted, pair.key, pair.key_size);
    if (index < 0)
        return 0;
    if (*found == NULL && (*found = PyDict_New()) == NULL)
        return -1;
    if (index == 0)
        *has_marker = 1;
    return set_pair(wanted, *found, PyTuple_GET_ITEM(wanted->tuple, index), data, size,
                    &pair);
}

/* Every KeyValue in the fields ``number`` of a message, into dict (the last key wins). */
static int
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

/* An instance of ``type``, a tuple subclass without fields of its own (a NamedTuple), of
   ``size`` items the caller sets: what tuple.__new__(type, items) makes, without the
   tuple of items it copies them from. */
static PyObject *
new_tuple(PyTypeObject *type, Py_ssize_t size)
{
    return type->tp_alloc(type, size);
}

/* Appends item to list and drops the caller's reference; -1 when item is NULL. */
static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return -1;
    int appended = PyList_Append(list, item);
    Py_DECREF(item);
    return appended;
}

static int
is_zero(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (data[i])
            return 0;
    return 1;
}

enum { PART_TRACE, PART_SPAN_IDS, PART_CONTRIBUTIONS, PART_TASKS, PART_SIZE, PART_FIELDS };

/* The span ids kept in one part, by open addressing: a slot holds an id when its stamp
   is the number of the part (starting a part empties the set without touching it).
   Slots are chosen by Python's hash of the id's bytes, which is keyed at random per
   process as for Python's own sets: ids a sender picks cannot be made to collide. */
typedef struct {
    uint64_t id;
    Py_hash_t hash;
    uint32_t stamp;
} IdSlot;

typedef struct {
    IdSlot *slots;
    size_t mask;   /* the number of slots (a power of two) minus one */
    size_t count;  /* ids in the current part */
    uint32_t part;
} IdSet;

/* Whether the span id ``span`` (a bytes object of 8) is in the set; adds it if not.
   1 if it was, 0 if not, -1 on error. */
static int
id_seen(IdSet *set, PyObject *span)
{
    Py_hash_t hash = PyObject_Hash(span);
    if (hash == -1)
        return -1;
    uint64_t id = little_endian((const uint8_t *)PyBytes_AS_STRING(span), SPAN_ID);
    if (2 * (set->count + 1) > set->mask + 1) {  /* at most half full: grow */
        size_t size = set->slots == NULL ? 64 : 2 * (set->mask + 1);
        IdSlot *slots = PyMem_Calloc(size, sizeof *slots);
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; set->slots != NULL && i <= set->mask; i++) {
            IdSlot slot = set->slots[i];
            if (slot.stamp != set->part)
                continue;
            size_t at = (size_t)slot.hash & (size - 1);
            while (slots[at].stamp == set->part)
                at = (at + 1) & (size - 1);
            slots[at] = slot;
        }
        PyMem_Free(set->slots);
        set->slots = slots;
        set->mask = size - 1;
    }
    size_t at = (size_t)hash & set->mask;
    for (; set->slots[at].stamp == set->part; at = (at + 1) & set->mask)
        if (set->slots[at].id == id)
            return 1;
    set->slots[at] = (IdSlot){id, hash, set->part};
    set->count++;
    return 0;
}

typedef struct {
    PyObject *parts;       /* list of parts, see scan_doc */
    PyObject *part;        /* the last one (borrowed from parts) */
    long long part_size;   /* its contributions' size, stored when the part is done */
    int part_tracked;      /* whether one of its contributions is tracked by the GC */
    const uint8_t *group;  /* the ResourceSpans being read */
    size_t group_size;
    PyObject *resource;    /* its resource attributes, once a task span needed them */
    IdSet ids;             /* span ids kept in the last part */
    long long held, valid, rejected, duplicates, size;
} Scan;

/* Stores the size of the last part's contributions in it. */
static int
close_part(Scan *scan)
{
    if (scan->part == NULL)
        return 0;
    PyObject *size = PyLong_FromLongLong(scan->part_size);
    if (size == NULL)
        return -1;
    PyObject *placeholder = PyTuple_GET_ITEM(scan->part, PART_SIZE);
    PyTuple_SET_ITEM(scan->part, PART_SIZE, size);
    Py_DECREF(placeholder);
    /* Assembly keeps these lists as they are, and only adds span ids to them, and
       contributions into a list that is tracked when they are (the rule of Part, which
       tests/assembly/test_untracked.py enforces). So one of span ids (bytes), or of
       contributions none of which is tracked, can be in no reference cycle: leave it out
       of garbage collection, which would otherwise walk it and its items while held. */
    PyObject_GC_UnTrack(PyTuple_GET_ITEM(scan->part, PART_SPAN_IDS));
    if (!scan->part_tracked)
        PyObject_GC_UnTrack(PyTuple_GET_ITEM(scan->part, PART_CONTRIBUTIONS));
    scan->part = NULL;
    return 0;
}

/* The part of trace_id the next kept span goes to: the last one, or a new one. */
static PyObject *
part_for(Scan *scan, const Wanted *wanted, const uint8_t *trace_id)
{
    PyObject *part = scan->part;
    if (part != NULL &&
        memcmp(PyBytes_AS_STRING(PyTuple_GET_ITEM(part, PART_TRACE)), trace_id, TRACE_ID) == 0)
        return part;
    if (close_part(scan) < 0)
        return NULL;
    scan->ids.part++;  /* stamps start at 0, parts at 1 */
    scan->ids.count = 0;
    part = new_tuple(wanted->part, PART_FIELDS);
    if (part == NULL)
        return NULL;
    for (int i = 0; i < PART_SIZE; i++) {  /* one at a time: no call with an error set */
        PyObject *item = i == PART_TRACE
            ? PyBytes_FromStringAndSize((const char *)trace_id, TRACE_ID) : PyList_New(0);
        if (item == NULL) {
            Py_DECREF(part);
            return NULL;
        }
        PyTuple_SET_ITEM(part, i, item);
    }
    PyTuple_SET_ITEM(part, PART_SIZE, PyLong_FromLong(0));  /* replaced by close_part */
    if (PyTuple_GET_ITEM(part, PART_SIZE) == NULL) {
        Py_DECREF(part);
        return NULL;
    }
    if (append_new(scan->parts, part) < 0)
        return NULL;
    scan->part = part;
    scan->part_size = 0;
    scan->part_tracked = 0;
    return part;
}

/* Whether the marker's value makes a task span, as Conventions.is_task has it. */
static int
is_task(const Wanted *wanted, PyObject *found)
{
    PyObject *value = PyDict_GetItemWithError(found, PyTuple_GET_ITEM(wanted->tuple, 0));
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (wanted->marker_values == Py_None)
        return value != Py_None && !(PyUnicode_Check(value) && PyUnicode_GET_LENGTH(value) == 0);
    return PyUnicode_Check(value) ? PySequence_Contains(wanted->marker_values, value) : 0;
}

/* len() of a str or bytes, else 0. */
static Py_ssize_t
text_length(PyObject *value)
{
    if (PyUnicode_Check(value))
        return PyUnicode_GET_LENGTH(value);
    return PyBytes_Check(value) ? PyBytes_GET_SIZE(value) : 0;
}

/* _otlp.estimate(attributes): rough bytes held for a dict of attributes. */
static long long
estimate(PyObject *attributes)
{
    long long size = 64 + 120 * (long long)PyDict_GET_SIZE(attributes);
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(attributes, &at, &key, &value)) {
        size += text_length(key);
        if (PyUnicode_CheckExact(value) || PyBytes_CheckExact(value)) {
            size += text_length(value);
        } else if (PyList_Check(value) || PyDict_Check(value)) {
            /* 64 per item, and the length of the str items (of the keys, for a dict) */
            Py_ssize_t item_at = 0;
            PyObject *item, *ignored;
            if (PyList_Check(value)) {
                size += 64 * (long long)PyList_GET_SIZE(value);
                for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++)
                    if (PyUnicode_Check(item = PyList_GET_ITEM(value, i)))
                        size += PyUnicode_GET_LENGTH(item);
            } else {
                size += 64 * (long long)PyDict_GET_SIZE(value);
                while (PyDict_Next(value, &item_at, &item, &ignored))
                    if (PyUnicode_Check(item))
                        size += PyUnicode_GET_LENGTH(item);
            }
        }
    }
    return size;
}

/* The resource attributes of the ResourceSpans being read (a new reference). */
static PyObject *
resource_attributes(Scan *scan, const Wanted *wanted)
{
    if (scan->resource == NULL) {
        PyObject *dict = PyDict_New();
        if (dict == NULL)
            return NULL;
        Field field = {0};
        Fields fields = fields_of(scan->group, scan->group_size);
        int got;
        while ((got = next(&fields, &field)) > 0)
            if (field.number == 1 && field.wire == LEN &&
                all_attributes(wanted, dict, field.data, field.size, 1) < 0)
                break;
        if (got != 0) {
            Py_DECREF(dict);
            return NULL;
        }
        scan->resource = dict;
    }
    return Py_NewRef(scan->resource);
}

static PyObject *
text(const uint8_t *data, size_t size)
{
    return PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, NULL);
}

static int
scan_span(Scan *scan, const Wanted *wanted, const uint8_t *data, size_t size)
{
    static const uint8_t nothing[1];
    Field field = {0};
    Fields fields = fields_of(data, size);
    int got, has_marker = 0;
    const uint8_t *trace_id = nothing, *span_id = nothing, *parent = nothing;
    const uint8_t *name = nothing, *message = nothing;
    size_t trace_size = 0, span_size = 0, parent_size = 0, name_size = 0, message_size = 0;
    uint64_t start_ns = 0, end_ns = 0, flags = 0;
    int32_t code = 0;
    PyObject *found = NULL;
    const Schema *schema = wanted->schema;
    while ((got = next(&fields, &field)) > 0) {
        if (schema != NULL && (field.number != 9 || field.wire != LEN) &&
            check_field(schema, M_SPAN, &field, SPAN_DEPTH) < 0)
            goto error;  /* attributes are validated as they are read */
        switch (field.number) {
        case 1: if (field.wire == LEN) { trace_id = field.data; trace_size = field.size; } break;
        case 2: if (field.wire == LEN) { span_id = field.data; span_size = field.size; } break;
        case 4: if (field.wire == LEN) { parent = field.data; parent_size = field.size; } break;
        case 5: if (field.wire == LEN) { name = field.data; name_size = field.size; } break;
        case 7: if (field.wire == I64) start_ns = field.varint; break;
        case 8: if (field.wire == I64) end_ns = field.varint; break;
        case 16: if (field.wire == I32) flags = field.varint; break;
        case 9:
            if (field.wire == LEN &&
                take_attribute(wanted, field.data, field.size, &found, &has_marker) < 0)
                goto error;
            break;
        case 15:
            if (field.wire == LEN) {
                Fields status = fields_of(field.data, field.size);
                Field inner = {0};
                int read;
                while ((read = next(&status, &inner)) > 0) {
                    if (inner.number == 3 && inner.wire == VARINT)
                        code = (int32_t)(uint32_t)inner.varint;
                    else if (inner.number == 2 && inner.wire == LEN) {
                        message = inner.data;
                        message_size = inner.size;
                    }
                }
                if (read < 0)
                    goto error;
            }
            break;
        }
    }
    if (got < 0)
        goto error;
    if (trace_size != TRACE_ID || span_size != SPAN_ID) {
        PyObject *full = PyUnicode_DecodeUTF8((const char *)name, (Py_ssize_t)name_size,
                                              "replace");
        if (full != NULL) {
            PyObject *shown = PyUnicode_Substring(full, 0, 64);
            if (shown != NULL) {
                PyErr_Format(PyExc_ValueError,
                             "span %R: trace id must be 16 bytes and span id 8 "
                             "(got %zu and %zu)", shown, trace_size, span_size);
                Py_DECREF(shown);
            }
            Py_DECREF(full);
        }
        goto error;
    }
    if (is_zero(trace_id, TRACE_ID) || is_zero(span_id, SPAN_ID)) {
        scan->rejected++;
        Py_XDECREF(found);
        return 0;
    }
    scan->valid++;
    int is_error = wanted->child_errors && code == STATUS_CODE_ERROR;
    if (found == NULL && !is_error)
        return 0;
    int task = has_marker ? is_task(wanted, found) : 0;
    if (task < 0)
        goto error;
    PyObject *part = part_for(scan, wanted, trace_id);
    PyObject *span = part ? PyBytes_FromStringAndSize((const char *)span_id, SPAN_ID) : NULL;
    int copy = span ? id_seen(&scan->ids, span) : -1;
    if (copy != 0) {  /* a copy of a span kept before in this part, or an error */
        scan->duplicates += copy > 0;
        Py_XDECREF(span);
        Py_XDECREF(found);
        return copy > 0 ? 0 : -1;
    }
    scan->held++;
    if (task) {
        /* everything a SpanRecord holds, with every attribute */
        Py_DECREF(found);
        PyObject *attributes = PyDict_New();
        if (attributes == NULL || all_attributes(wanted, attributes, data, size, 9) < 0) {
            Py_XDECREF(attributes);
            Py_DECREF(span);
            return -1;
        }
        PyObject *resource = resource_attributes(scan, wanted);
        PyObject *shown = resource ? text(name, name_size) : NULL;
        PyObject *status = shown ? text(message, message_size) : NULL;
        if (status == NULL) {
            Py_XDECREF(shown);
            Py_XDECREF(resource);
            Py_DECREF(attributes);
            Py_DECREF(span);
            return -1;
        }
        long long task_size = wanted->task_bytes + estimate(attributes) +
                              PyUnicode_GET_LENGTH(shown);
        scan->size += task_size;
        return append_new(PyTuple_GET_ITEM(part, PART_TASKS), Py_BuildValue(
            "(NNKKy#kiNNNL)", span, shown, (unsigned long long)start_ns,
            (unsigned long long)end_ns, (const char *)parent, (Py_ssize_t)parent_size,
            (unsigned long)flags, (int)code, status, attributes, resource, task_size));
    }
    if (append_new(PyTuple_GET_ITEM(part, PART_SPAN_IDS), span) < 0) {
        Py_XDECREF(found);
        return -1;
    }
    if (found == NULL && (found = PyDict_New()) == NULL)
        return -1;
    long long size_of = wanted->contribution_bytes +
                        wanted->attribute_bytes * (long long)PyDict_GET_SIZE(found);
    scan->part_size += size_of;
    scan->size += size_of;
    PyObject *end = PyLong_FromUnsignedLongLong(end_ns);
    PyObject *contribution = end ? new_tuple(wanted->contribution, 3) : NULL;
    if (contribution == NULL) {
        Py_XDECREF(end);
        Py_DECREF(found);
        return -1;
    }
    PyTuple_SET_ITEM(contribution, 0, found);
    PyTuple_SET_ITEM(contribution, 1, Py_NewRef(is_error ? Py_True : Py_False));
    PyTuple_SET_ITEM(contribution, 2, end);
    /* Immutable, and holding nothing the collector tracks (a dict of plain values, a bool,
       an int), it can be in no reference cycle as long as nothing changes its dict
       afterwards (the rule of Part, tests/assembly/test_untracked.py): as CPython does
       for exact tuples of untracked items, leave it out of garbage collection, which
       would otherwise walk every contribution held for assembly. */
    if (!PyObject_GC_IsTracked(found))
        PyObject_GC_UnTrack(contribution);
    else
        scan->part_tracked = 1;
    return append_new(PyTuple_GET_ITEM(part, PART_CONTRIBUTIONS), contribution);
error:
    Py_XDECREF(found);
    return -1;
}

/* The next occurrence of the message field ``number`` in a message of type ``message``
   at nesting ``depth``; every other field is validated (given a schema) and passed over.
   1 when one was read into *field, 0 at the end, -1 on error. */
static int
next_of(Fields *fields, Field *field, const Wanted *wanted, uint32_t message,
        uint32_t number, int depth)
{
    int got;
    while ((got = next(fields, field)) > 0) {
        if (field->number == number && field->wire == LEN)
            return 1;
        if (wanted->schema != NULL &&
            check_field(wanted->schema, message, field, depth) < 0)
            return -1;
    }
    return got;
}

static int
scan_request(Scan *scan, const Wanted *wanted, const uint8_t *data, size_t size)
{
    Fields request = fields_of(data, size);
    Field resource_spans = {0};
    int got;
    while ((got = next_of(&request, &resource_spans, wanted, M_REQUEST, 1, 1)) > 0) {
        scan->group = resource_spans.data;
        scan->group_size = resource_spans.size;
        Py_CLEAR(scan->resource);
        Fields group = fields_of(resource_spans.data, resource_spans.size);
        Field scope_spans = {0};
        while ((got = next_of(&group, &scope_spans, wanted, M_RESOURCE_SPANS, 2, 2)) > 0) {
            Fields scope = fields_of(scope_spans.data, scope_spans.size);
            Field span = {0};
            while ((got = next_of(&scope, &span, wanted, M_SCOPE_SPANS, 2, 3)) > 0)
                if (scan_span(scan, wanted, span.data, span.size) < 0)
                    return -1;
            if (got < 0)
                return -1;
        }
        if (got < 0)
            return -1;
    }
    return got < 0 ? -1 : 0;
}

PyDoc_STRVAR(scan_doc,
"scan(body, keys, marker_values, child_errors, contribution, part, decode_any,\n"
"     contribution_bytes, attribute_bytes, task_bytes, schema=None)\n"
"--\n\n"
"The spans of an OTLP ExportTraceServiceRequest ``body`` that matter to assembly.\n\n"
"A span is kept when it has an attribute whose key is in ``keys`` (a tuple of str, the\n"
"task marker first), or when ``child_errors`` and its status is ERROR. It is a task span\n"
"when its marker is set (to one of ``marker_values`` unless that is None), as\n"
"Conventions.is_task has it. Returns ``(parts, held, valid, rejected, duplicates,\n"
"size)``.\n\n"
"Kept spans of one trace that follow each other make a ``part(trace id, span ids,\n"
"contributions, tasks, contributions' size)``; ``contribution(attributes, is_error,\n"
"end_ns)`` keeps only the attributes in ``keys``, one per span id. ``tasks`` holds\n"
"``(span id, name, start_ns, end_ns, parent span id, flags, status code, status\n"
"message, attributes, resource attributes, size)`` with every attribute, its size\n"
"being ``task_bytes + _otlp.estimate(attributes) + len(name)``. A span whose id a span\n"
"kept before in the same part has is left out and counted in ``duplicates``: a part's\n"
"span ids (of contributions and tasks) are unique. ``held`` counts the kept spans;\n"
"``valid`` and ``rejected`` (all-zero ids) every span; ``size`` adds the\n"
"tasks' sizes and ``contribution_bytes + attribute_bytes * len(attributes)`` per\n"
"contribution. ``contribution`` and ``part`` are NamedTuple classes (tuple subclasses\n"
"without fields of their own): their instances are made as tuple.__new__ makes them.\n"
"``decode_any`` turns the bytes of an AnyValue (or, with a second argument, of a\n"
"KeyValue) into plain data. Raises ValueError on malformed input or ids of the wrong\n"
"length; with a ``schema`` (see schema()), also on anything that is not valid by it.");

/* Whether ``type`` is a tuple subclass whose instances are bare tuples (a NamedTuple):
   what new_tuple() can make. */
static int
is_plain_tuple_type(PyTypeObject *type)
{
    return PyType_IsSubtype(type, &PyTuple_Type) &&
           type->tp_basicsize == PyTuple_Type.tp_basicsize &&
           type->tp_itemsize == PyTuple_Type.tp_itemsize && type->tp_dictoffset == 0;
}

static PyObject *
scan(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer body;
    Wanted wanted = {0};
    PyObject *result = NULL;
    PyObject *schema_capsule = Py_None;
    if (!PyArg_ParseTuple(args, "y*O!OpO!O!OLLL|O:scan", &body, &PyTuple_Type, &wanted.tuple,
                          &wanted.marker_values, &wanted.child_errors, &PyType_Type,
                          &wanted.contribution, &PyType_Type, &wanted.part,
                          &wanted.decode_any, &wanted.contribution_bytes,
                          &wanted.attribute_bytes, &wanted.task_bytes, &schema_capsule))
        return NULL;
    Scan state = {0};
    Texts texts = {{0}};
    wanted.texts = &texts;
    if (schema_capsule != Py_None &&
        (wanted.schema = PyCapsule_GetPointer(schema_capsule, SCHEMA)) == NULL)
        goto done;
    if (!is_plain_tuple_type(wanted.contribution) || !is_plain_tuple_type(wanted.part)) {
        PyErr_SetString(PyExc_TypeError,
                        "contribution and part must be tuple subclasses without fields of "
                        "their own");
        goto done;
    }
    wanted.count = PyTuple_GET_SIZE(wanted.tuple);
    if (wanted.count == 0) {
        PyErr_SetString(PyExc_TypeError, "keys must hold the task marker at least");
        goto done;
    }
    wanted.utf8 = PyMem_New(const char *, wanted.count ? wanted.count : 1);
    wanted.sizes = PyMem_New(Py_ssize_t, wanted.count ? wanted.count : 1);
    if (wanted.utf8 == NULL || wanted.sizes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < wanted.count; i++) {
        PyObject *key = PyTuple_GET_ITEM(wanted.tuple, i);
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be str");
            goto done;
        }
        if ((wanted.utf8[i] = PyUnicode_AsUTF8AndSize(key, &wanted.sizes[i])) == NULL)
            goto done;
        wanted.lengths |= (uint64_t)1 << (wanted.sizes[i] < 63 ? wanted.sizes[i] : 63);
    }
    state.parts = PyList_New(0);
    if (state.parts == NULL)
        goto done;
    if (scan_request(&state, &wanted, body.buf, (size_t)body.len) < 0 || close_part(&state) < 0)
        goto done;
    result = Py_BuildValue("(OLLLLL)", state.parts, state.held, state.valid, state.rejected,
                           state.duplicates, state.size);
done:
    for (int i = 0; i < TEXT_SLOTS; i++)
        Py_XDECREF(texts.slots[i]);
    PyMem_Free(wanted.utf8);
    PyMem_Free(wanted.sizes);
    Py_XDECREF(state.parts);
    Py_XDECREF(state.resource);
    PyMem_Free(state.ids.slots);
    PyBuffer_Release(&body);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
    {"schema", schema, METH_O, schema_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_otlpscan",
    .m_doc = "A selective reader of OTLP trace requests (see otel_diary._otlp).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__otlpscan(void)
{
    return PyModule_Create(&module);
}
