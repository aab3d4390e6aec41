/* The walk over a request's spans: each span's ids and attribute keys are read, and a
 * span becomes Python objects only when it is kept (a task span, or one that contributes
 * to its task), into parts of consecutive spans of one trace. Every span's parent link
 * goes into one bytes object per run of spans of one trace. */

#include "otlpscan.h"

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

/* Adds a KeyValue to *found when its key is wanted; *found is created on the first one.
   Sets *has_marker for the task marker, *contributes for a key that contributes. */
static int
take_attribute(const Wanted *wanted, const uint8_t *data, size_t size, PyObject **found,
               int *has_marker, int *contributes)
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
    if (wanted->contributing == NULL || wanted->contributing[index])
        *contributes = 1;
    return set_pair(wanted, *found, PyTuple_GET_ITEM(wanted->tuple, index), data, size,
                    &pair);
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

int
close_links(Scan *scan)
{
    if (scan->link_size == 0)
        return 0;
    PyObject *run = Py_BuildValue("(y#y#)", (const char *)scan->link_trace,
                                  (Py_ssize_t)TRACE_ID, (const char *)scan->link_pairs,
                                  (Py_ssize_t)scan->link_size);
    scan->link_size = 0;
    return append_new(scan->links, run);
}

/* Adds a span's parent link to the run of its trace (a new run when the trace changes). */
static int
add_link(Scan *scan, const uint8_t *trace_id, const uint8_t *span_id, const uint8_t *parent)
{
    if (scan->link_size > 0 && memcmp(scan->link_trace, trace_id, TRACE_ID) != 0 &&
        close_links(scan) < 0)
        return -1;
    if (scan->link_size == 0)
        memcpy(scan->link_trace, trace_id, TRACE_ID);
    if (scan->link_capacity - scan->link_size < 2 * SPAN_ID) {
        size_t capacity = scan->link_capacity ? 2 * scan->link_capacity : 64 * 2 * SPAN_ID;
        uint8_t *grown = PyMem_Realloc(scan->link_pairs, capacity);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        scan->link_pairs = grown;
        scan->link_capacity = capacity;
    }
    memcpy(scan->link_pairs + scan->link_size, span_id, SPAN_ID);
    memcpy(scan->link_pairs + scan->link_size + SPAN_ID, parent, SPAN_ID);
    scan->link_size += 2 * SPAN_ID;
    return 0;
}

/* Stores the size of the last part's contributions in it. */
int
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
        scan->resource_size = estimate(dict);
    }
    return Py_NewRef(scan->resource);
}

static PyObject *
text(const uint8_t *data, size_t size)
{
    return PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, "replace");
}

/* Adds to ``found`` what a failed span's first exception event and status message tell,
   as wanted->error_details has it: 0, or -1 with an exception set. */
static int
add_error_details(const Wanted *wanted, PyObject *found, const uint8_t *data, size_t size,
                  const uint8_t *message, size_t message_size)
{
    PyObject *exception = Py_NewRef(Py_None);
    Field field = {0};
    Fields fields = fields_of(data, size);
    int got;
    while ((got = next(&fields, &field)) > 0) {
        if (field.number != 11 || field.wire != LEN)
            continue;
        Field inner = {0};
        Fields event = fields_of(field.data, field.size);
        const uint8_t *name = NULL;
        size_t name_size = 0;
        int read;
        while ((read = next(&event, &inner)) > 0)
            if (inner.number == 2 && inner.wire == LEN) {
                name = inner.data;
                name_size = inner.size;
            }
        if (read < 0)
            goto error;
        if (name_size == 9 && memcmp(name, "exception", 9) == 0) {
            Py_DECREF(exception);
            if ((exception = PyDict_New()) == NULL)
                return -1;
            if (all_attributes(wanted, exception, field.data, field.size, 3) < 0)
                goto error;
            break;
        }
    }
    if (got < 0)
        goto error;
    PyObject *status = text(message, message_size);
    if (status == NULL)
        goto error;
    PyObject *details = PyObject_CallFunctionObjArgs(wanted->error_details, exception, status,
                                                     NULL);
    Py_DECREF(status);
    Py_DECREF(exception);
    if (details == NULL)
        return -1;
    int merged = PyDict_Update(found, details);
    Py_DECREF(details);
    return merged;
error:
    Py_DECREF(exception);
    return -1;
}

static int
scan_span(Scan *scan, const Wanted *wanted, const uint8_t *data, size_t size)
{
    static const uint8_t nothing[1];
    Field field = {0};
    Fields fields = fields_of(data, size);
    int got, has_marker = 0, contributes = 0;
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
                take_attribute(wanted, field.data, field.size, &found, &has_marker,
                               &contributes) < 0)
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
    if ((trace_size != TRACE_ID && trace_size != 0) ||
        (span_size != SPAN_ID && span_size != 0)) {
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
    if (trace_size == 0 || span_size == 0 ||  /* empty: zero, as protobuf reads it */
        is_zero(trace_id, TRACE_ID) || is_zero(span_id, SPAN_ID)) {
        scan->rejected++;
        Py_XDECREF(found);
        return 0;
    }
    scan->valid++;
    if (parent_size == SPAN_ID && !is_zero(parent, SPAN_ID) &&
        add_link(scan, trace_id, span_id, parent) < 0)
        goto error;
    int is_error = wanted->child_errors && code == STATUS_CODE_ERROR;
    if (found == NULL && !is_error)
        return 0;
    int task = has_marker ? is_task(wanted, found) : 0;
    if (task < 0)
        goto error;
    if (!task && !is_error && !contributes) {  /* say, captured messages alone */
        Py_DECREF(found);
        return 0;
    }
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
                              PyUnicode_GET_LENGTH(shown) + PyUnicode_GET_LENGTH(status) +
                              scan->resource_size;
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
    if (is_error && wanted->error_details != Py_None &&
        add_error_details(wanted, found, data, size, message, message_size) < 0)
        goto error;
    long long size_of = wanted->contribution_bytes +
                        wanted->attribute_bytes * (long long)PyDict_GET_SIZE(found) +
                        held_by_values(found);
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

int
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
