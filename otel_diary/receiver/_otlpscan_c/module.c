/* A selective reader of OTLP trace requests, the fast path of otel_diary.receiver.decode.
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
 * request FromString has already accepted. A schema compiled with bytes for strings
 * lets any bytes through (what the Collector takes); the strings it keeps are read with
 * each invalid sequence as U+FFFD, as they are in every case (valid ones are unchanged).
 *
 * It is safe on any input either way: every read is bounds-checked, nesting is
 * depth-limited, and what it cannot read raises ValueError. The pure-Python reader in
 * decode.py is the reference: tests/receiver/test_native.py compares the two, and
 * `make sanitize` runs those tests on a build with AddressSanitizer and
 * UndefinedBehaviorSanitizer. The translation units are listed in otlpscan.h. */

#include "otlpscan.h"

PyDoc_STRVAR(scan_doc,
"scan(body, keys, marker_values, child_errors, contribution, part, decode_any,\n"
"     contribution_bytes, attribute_bytes, task_bytes, schema=None, error_details=None,\n"
"     contributing=None)\n"
"--\n\n"
"The spans of an OTLP ExportTraceServiceRequest ``body`` that matter to assembly.\n\n"
"A span is kept when it is a task span: its marker (the first of ``keys``, a tuple of\n"
"str) is set, to one of ``marker_values`` unless that is None, as Conventions.is_task\n"
"has it; when ``child_errors`` and its status is ERROR; or when it has an attribute\n"
"whose key contributes. ``contributing`` (bytes, one per key, not zero for a key that\n"
"contributes) says which do; None: every key does. Returns ``(parts, held, valid,\n"
"rejected, duplicates, size, links)``.\n\n"
"Kept spans of one trace that follow each other make a ``part(trace id, span ids,\n"
"contributions, tasks, contributions' size)``; ``contribution(attributes, is_error,\n"
"end_ns)`` keeps only the attributes in ``keys``, one per span id. ``tasks`` holds\n"
"``(span id, name, start_ns, end_ns, parent span id, flags, status code, status\n"
"message, attributes, resource attributes, size)`` with every attribute, its size\n"
"being ``batch.weight``'s, ``task_bytes + batch.estimate(attributes) + len(name) +\n"
"len(status message)``, plus ``batch.estimate(resource attributes)``, estimated once\n"
"per resource. A span whose id a span\n"
"kept before in the same part has is left out and counted in ``duplicates``: a part's\n"
"span ids (of contributions and tasks) are unique. ``held`` counts the kept spans;\n"
"``valid`` and ``rejected`` (empty or all-zero ids) every span; ``size`` adds the\n"
"tasks' sizes and ``contribution_bytes + attribute_bytes * len(attributes) +\n"
"batch.held_by_values(attributes)`` per\n"
"contribution. ``links`` holds, per run of valid spans of one trace that have a parent\n"
"span id of 8 bytes, not all zero, ``(trace id, pairs)``: each span's id and its\n"
"parent's, 16 bytes per span. ``contribution`` and ``part`` are NamedTuple classes (tuple subclasses\n"
"without fields of their own): their instances are made as tuple.__new__ makes them.\n"
"``decode_any`` turns the bytes of an AnyValue (or, with a second argument, of a\n"
"KeyValue) into plain data. A failed contribution's attributes are updated with\n"
"``error_details(attributes of its first exception event or None, status message)``\n"
"when that is given. Raises ValueError on malformed input or ids of the wrong\n"
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
    PyObject *schema_capsule = Py_None, *contributing = Py_None;
    wanted.error_details = Py_None;
    if (!PyArg_ParseTuple(args, "y*O!OpO!O!OLLL|OOO:scan", &body, &PyTuple_Type, &wanted.tuple,
                          &wanted.marker_values, &wanted.child_errors, &PyType_Type,
                          &wanted.contribution, &PyType_Type, &wanted.part,
                          &wanted.decode_any, &wanted.contribution_bytes,
                          &wanted.attribute_bytes, &wanted.task_bytes, &schema_capsule,
                          &wanted.error_details, &contributing))
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
    if (contributing != Py_None) {
        if (!PyBytes_Check(contributing) || PyBytes_GET_SIZE(contributing) != wanted.count) {
            PyErr_SetString(PyExc_TypeError, "contributing must be bytes, one per key");
            goto done;
        }
        wanted.contributing = PyBytes_AS_STRING(contributing);
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
    state.links = PyList_New(0);
    if (state.parts == NULL || state.links == NULL)
        goto done;
    if (scan_request(&state, &wanted, body.buf, (size_t)body.len) < 0 ||
        close_part(&state) < 0 || close_links(&state) < 0)
        goto done;
    result = Py_BuildValue("(OLLLLLO)", state.parts, state.held, state.valid, state.rejected,
                           state.duplicates, state.size, state.links);
done:
    for (int i = 0; i < TEXT_SLOTS; i++)
        Py_XDECREF(texts.slots[i]);
    PyMem_Free(wanted.utf8);
    PyMem_Free(wanted.sizes);
    Py_XDECREF(state.parts);
    Py_XDECREF(state.links);
    PyMem_Free(state.link_pairs);
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
    .m_doc = "A selective reader of OTLP trace requests (see otel_diary.receiver.decode).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__otlpscan(void)
{
    return PyModule_Create(&module);
}

