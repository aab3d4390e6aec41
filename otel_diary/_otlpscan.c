/* A selective reader of OTLP trace requests, the fast path of otel_diary._otlp.
 *
 * Reading spans through protobuf's Python API creates a Python object for every span and
 * every attribute, which costs far more than parsing the request. A receiver needs few of
 * them: the ids of every span, and the few attributes and fields of the spans that matter
 * to a diary. scan() walks the wire format of an ExportTraceServiceRequest that
 * ExportTraceServiceRequest.FromString has already accepted (so it is well formed, with
 * valid UTF-8 in its strings) and builds Python objects only for what it keeps.
 *
 * It is written to be safe on any input all the same: every read is bounds-checked, nested
 * groups are depth-limited, and what it cannot read raises ValueError.
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

enum { VARINT = 0, I64 = 1, LEN = 2, SGROUP = 3, EGROUP = 4, I32 = 5 };
enum { MAX_GROUP_DEPTH = 100, STATUS_CODE_ERROR = 2, TRACE_ID = 16, SPAN_ID = 8 };

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
read_varint(const uint8_t **at, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *at;
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
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
    return fail("varint longer than 10 bytes");
}

static uint64_t
little_endian(const uint8_t *p, int bytes)
{
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; i--)
        value = (value << 8) | p[i];
    return value;
}

static int skip_group(const uint8_t **at, const uint8_t *end, uint32_t number, int depth);

/* Reads the next field at *at: 1 when one was read, 0 at the end, -1 on error. */
static int
next_field(const uint8_t **at, const uint8_t *end, Field *field, int depth)
{
    if (*at >= end)
        return 0;
    uint64_t tag;
    if (read_varint(at, end, &tag) < 0)
        return -1;
    field->number = (uint32_t)(tag >> 3);
    field->wire = (int)(tag & 7);
    if (field->number == 0 || (tag >> 3) > 0x1fffffff)
        return fail("invalid field number");
    const uint8_t *p = *at;
    switch (field->wire) {
    case VARINT:
        return read_varint(at, end, &field->varint) < 0 ? -1 : 1;
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
        if (read_varint(&p, end, &size) < 0)
            return -1;
        if (size > (uint64_t)(end - p))
            return fail("truncated length-delimited field");
        field->data = p;
        field->size = (size_t)size;
        *at = p + size;
        return 1;
    }
    case SGROUP:
        return skip_group(at, end, field->number, depth + 1) < 0 ? -1 : 1;
    case EGROUP:  /* the caller tells whether it closes the group it is in */
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
    Field field;
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
static int
next(Fields *fields, Field *field)
{
    int got = next_field(&fields->at, fields->end, field, 0);
    if (got > 0 && field->wire == EGROUP)
        return fail("unexpected end group");
    return got;
}

/* -- what a scan is asked for ---------------------------------------------------------- */

typedef struct {
    PyObject *tuple;           /* the keys, a tuple of str: they stay alive while it does */
    PyObject *marker_values;   /* what the marker (the first key) must be, or None */
    Py_ssize_t count;
    const char **utf8;
    Py_ssize_t *sizes;
    PyObject *contribution;    /* the Contribution class (a tuple subclass) */
    PyObject *decode_any;      /* bytes of an AnyValue -> plain value (arrays, kvlists) */
    int child_errors;
    long long contribution_bytes;
    long long attribute_bytes;
} Wanted;

/* The index of the wanted key equal to [key, key + size), or -1. */
static Py_ssize_t
wanted_index(const Wanted *wanted, const uint8_t *key, size_t size)
{
    for (Py_ssize_t i = 0; i < wanted->count; i++)
        if ((size_t)wanted->sizes[i] == size && memcmp(wanted->utf8[i], key, size) == 0)
            return i;
    return -1;
}

/* An AnyValue as plain data; arrays, kvlists and repeated members go to decode_any. */
static PyObject *
any_value(const Wanted *wanted, const uint8_t *data, size_t size)
{
    Field field, last = {0};
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
    case 1: return PyUnicode_DecodeUTF8((const char *)last.data, (Py_ssize_t)last.size, NULL);
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

static int
read_pair(const uint8_t *data, size_t size, Pair *pair)
{
    Field field;
    Fields fields = fields_of(data, size);
    int got;
    pair->key = pair->value = (const uint8_t *)"";
    pair->key_size = pair->value_size = 0;
    pair->values = 0;
    while ((got = next(&fields, &field)) > 0) {
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
        key = decoded = PyUnicode_DecodeUTF8((const char *)pair->key,
                                             (Py_ssize_t)pair->key_size, NULL);
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
    if (read_pair(data, size, &pair) < 0)
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
    Field field;
    Fields fields = fields_of(data, size);
    Pair pair;
    int got;
    while ((got = next(&fields, &field)) > 0) {
        if (field.number != number || field.wire != LEN)
            continue;
        if (read_pair(field.data, field.size, &pair) < 0 ||
            set_pair(wanted, dict, NULL, field.data, field.size, &pair) < 0)
            return -1;
    }
    return got < 0 ? -1 : 0;
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

typedef struct {
    PyObject *parts;       /* list of parts, see scan_doc */
    PyObject *part;        /* the last one (borrowed from parts) */
    long long part_size;   /* its contributions' size, stored when the part is done */
    const uint8_t *group;  /* the ResourceSpans being read */
    size_t group_size;
    PyObject *resource;    /* its resource attributes, once a task span needed them */
    long long held, valid, rejected, size;
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
    scan->part = NULL;
    return 0;
}

/* The part of trace_id the next kept span goes to: the last one, or a new one. */
static PyObject *
part_for(Scan *scan, const uint8_t *trace_id)
{
    PyObject *part = scan->part;
    if (part != NULL &&
        memcmp(PyBytes_AS_STRING(PyTuple_GET_ITEM(part, PART_TRACE)), trace_id, TRACE_ID) == 0)
        return part;
    if (close_part(scan) < 0)
        return NULL;
    part = PyTuple_New(PART_FIELDS);
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

/* The resource attributes of the ResourceSpans being read (a new reference). */
static PyObject *
resource_attributes(Scan *scan, const Wanted *wanted)
{
    if (scan->resource == NULL) {
        PyObject *dict = PyDict_New();
        if (dict == NULL)
            return NULL;
        Field field;
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
    Field field;
    Fields fields = fields_of(data, size);
    int got, has_marker = 0;
    const uint8_t *trace_id = nothing, *span_id = nothing, *parent = nothing;
    const uint8_t *name = nothing, *message = nothing;
    size_t trace_size = 0, span_size = 0, parent_size = 0, name_size = 0, message_size = 0;
    uint64_t start_ns = 0, end_ns = 0, flags = 0;
    int32_t code = 0;
    PyObject *found = NULL;
    while ((got = next(&fields, &field)) > 0) {
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
                Field inner;
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
    PyObject *part = part_for(scan, trace_id);
    PyObject *span = part ? PyBytes_FromStringAndSize((const char *)span_id, SPAN_ID) : NULL;
    if (span == NULL)
        goto error;
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
        return append_new(PyTuple_GET_ITEM(part, PART_TASKS), Py_BuildValue(
            "(NNKKy#kiNNN)", span, shown, (unsigned long long)start_ns,
            (unsigned long long)end_ns, (const char *)parent, (Py_ssize_t)parent_size,
            (unsigned long)flags, (int)code, status, attributes, resource));
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
    /* tuple.__new__(Contribution, (found, is_error, end_ns)): the NamedTuple without its
       Python-level __new__ */
    PyObject *values = Py_BuildValue("((NOK))", found, is_error ? Py_True : Py_False,
                                     (unsigned long long)end_ns);
    if (values == NULL)
        return -1;  /* "N" released found */
    PyObject *contribution = PyTuple_Type.tp_new((PyTypeObject *)wanted->contribution,
                                                 values, NULL);
    Py_DECREF(values);
    return append_new(PyTuple_GET_ITEM(part, PART_CONTRIBUTIONS), contribution);
error:
    Py_XDECREF(found);
    return -1;
}

static int
scan_request(Scan *scan, const Wanted *wanted, const uint8_t *data, size_t size)
{
    Fields request = fields_of(data, size);
    Field resource_spans;
    int got;
    while ((got = next(&request, &resource_spans)) > 0) {
        if (resource_spans.number != 1 || resource_spans.wire != LEN)
            continue;
        scan->group = resource_spans.data;
        scan->group_size = resource_spans.size;
        Py_CLEAR(scan->resource);
        Fields group = fields_of(resource_spans.data, resource_spans.size);
        Field scope_spans;
        int got_scope;
        while ((got_scope = next(&group, &scope_spans)) > 0) {
            if (scope_spans.number != 2 || scope_spans.wire != LEN)
                continue;
            Fields scope = fields_of(scope_spans.data, scope_spans.size);
            Field span;
            int got_span;
            while ((got_span = next(&scope, &span)) > 0)
                if (span.number == 2 && span.wire == LEN &&
                    scan_span(scan, wanted, span.data, span.size) < 0)
                    return -1;
            if (got_span < 0)
                return -1;
        }
        if (got_scope < 0)
            return -1;
    }
    return got < 0 ? -1 : 0;
}

PyDoc_STRVAR(scan_doc,
"scan(body, keys, marker_values, child_errors, contribution, decode_any,\n"
"     contribution_bytes, attribute_bytes)\n"
"--\n\n"
"The spans of an OTLP ExportTraceServiceRequest ``body`` that matter to assembly.\n\n"
"A span is kept when it has an attribute whose key is in ``keys`` (a tuple of str, the\n"
"task marker first), or when ``child_errors`` and its status is ERROR. It is a task span\n"
"when its marker is set (to one of ``marker_values`` unless that is None), as\n"
"Conventions.is_task has it. Returns ``(parts, held, valid, rejected, size)``.\n\n"
"Kept spans of one trace that follow each other make a part: ``(trace id, span ids,\n"
"contributions, tasks, contributions' size)``; ``contribution(attributes, is_error,\n"
"end_ns)`` keeps only the attributes in ``keys``, one per span id. ``tasks`` holds\n"
"``(span id, name, start_ns, end_ns, parent span id, flags, status code, status\n"
"message, attributes, resource attributes)`` with every attribute. ``held`` counts the\n"
"kept spans; ``valid`` and ``rejected`` (all-zero ids) every span; ``size`` adds\n"
"``contribution_bytes + attribute_bytes * len(attributes)`` per contribution.\n"
"``decode_any`` turns the bytes of an AnyValue (or, with a second argument, of a\n"
"KeyValue) into plain data. Raises ValueError on malformed input or ids of the wrong\n"
"length.");

static PyObject *
scan(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer body;
    Wanted wanted = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*O!OpOOLL:scan", &body, &PyTuple_Type, &wanted.tuple,
                          &wanted.marker_values, &wanted.child_errors, &wanted.contribution,
                          &wanted.decode_any, &wanted.contribution_bytes,
                          &wanted.attribute_bytes))
        return NULL;
    Scan state = {0};
    if (!PyType_Check(wanted.contribution) ||
        !PyType_IsSubtype((PyTypeObject *)wanted.contribution, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "contribution must be a tuple subclass");
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
    }
    state.parts = PyList_New(0);
    if (state.parts == NULL)
        goto done;
    if (scan_request(&state, &wanted, body.buf, (size_t)body.len) < 0 || close_part(&state) < 0)
        goto done;
    result = Py_BuildValue("(OLLLL)", state.parts, state.held, state.valid, state.rejected,
                           state.size);
done:
    PyMem_Free(wanted.utf8);
    PyMem_Free(wanted.sizes);
    Py_XDECREF(state.parts);
    Py_XDECREF(state.resource);
    PyBuffer_Release(&body);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
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
