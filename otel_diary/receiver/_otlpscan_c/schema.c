/* schema(): the wire rules scan() validates against, compiled from the message
 * descriptors protobuf itself decodes with. */

#include "otlpscan.h"

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

const char schema_doc[] = PyDoc_STR(
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

PyObject *
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
