/* Internal header of the C reader otel_diary.receiver._otlpscan (see module.c).
 *
 * What the translation units share: the wire format (fields read in turn from a message),
 * the compiled wire rules a request is validated against, what a scan is asked for, and
 * its state. The functions read for every field and attribute are static inline here,
 * so that each unit that walks a message has them inlined as in one file.
 *
 *   wire.c    varints, groups, UTF-8, whole-message validation
 *   schema.c  schema(): wire rules compiled from protobuf's descriptors
 *   values.c  attribute values as Python objects, estimated sizes
 *   scan.c    the walk over a request's spans and what it keeps of them
 *   module.c  scan(), its arguments, and the module
 *
 * Field numbers (opentelemetry/proto/collector/trace/v1, trace/v1, common/v1):
 *   ExportTraceServiceRequest: resource_spans = 1
 *   ResourceSpans: resource = 1, scope_spans = 2
 *   ScopeSpans: spans = 2
 *   Span: trace_id = 1, span_id = 2, parent_span_id = 4, name = 5,
 *         end_time_unix_nano = 8 (fixed64),
 *         attributes = 9, events = 11, status = 15
 *   Event: name = 2, attributes = 3
 *   Status: message = 2, code = 3
 *   KeyValue: key = 1, value = 2
 *   AnyValue: string = 1, bool = 2, int = 3, double = 4, array = 5, kvlist = 6, bytes = 7
 */

#ifndef OTLPSCAN_H
#define OTLPSCAN_H

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

/* Functions shared between the translation units are not exported from the extension. */
#if defined(__GNUC__) || defined(__clang__)
#  define INTERNAL __attribute__((visibility("hidden")))
#else
#  define INTERNAL
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

/* -- the wire format (wire.c) ----------------------------------------------------------- */

/* Sets ValueError("malformed protobuf: <what>") and returns -1. */
INTERNAL int fail(const char *what);
/* Moves *at past the group ``number`` that starts there: 0, or -1 on error. */
INTERNAL int skip_group(const uint8_t **at, const uint8_t *end, uint32_t number, int depth);

/* A varint of at most ``max_bytes`` at *at, which it moves past it: 0, or -1 on error.
   Inlined: it reads every length and integer of more than one byte. */
static inline int
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

/* The fields of one message, read in turn with next(). */
typedef struct {
    const uint8_t *at, *end;
} Fields;

static inline Fields
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

static const char SCHEMA[] = "otel_diary.receiver._otlpscan.Schema";

/* Whether [s, s + size) is UTF-8 as Unicode defines it, as protobuf and Python's strict
   codec have it (wire.c). */
INTERNAL int is_utf8(const uint8_t *s, size_t size);
/* Whether a whole message is as the schema has it (wire.c): 0, or -1 with ValueError. */
INTERNAL int check_message(const Schema *schema, uint32_t message, const uint8_t *data,
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

/* schema(messages), a method of the module (schema.c). */
INTERNAL PyObject *schema(PyObject *module, PyObject *messages);
INTERNAL extern const char schema_doc[];

/* -- what a scan is asked for ---------------------------------------------------------- */

/* Short ASCII strings decoded during one scan, by a hash of their bytes: attribute values
   repeat (operation names, models), and a repeat shares the str decoded first. */
enum { TEXT_SLOTS = 64, TEXT_CACHED = 64 };
typedef struct {
    PyObject *slots[TEXT_SLOTS];
} Texts;

typedef struct {
    PyObject *tuple;           /* the keys, a tuple of str: they stay alive while it does */
    PyObject *marker_values;   /* what the marker (the first key) must be, or None */
    const char *contributing;  /* per key, whether it makes a span contribute, or NULL:
                                  every key does */
    Py_ssize_t count;
    const char **utf8;
    Py_ssize_t *sizes;
    uint64_t lengths;          /* bit n set: a key is n bytes long (bit 63: 63 or more) */
    PyTypeObject *contribution;  /* the Contribution class (a tuple subclass) */
    PyTypeObject *part;        /* the Part class (a tuple subclass) */
    PyObject *decode_any;      /* bytes of an AnyValue -> plain value (arrays, kvlists) */
    PyObject *error_details;   /* (exception event attributes or None, status message) ->
                                  what a failed contributing span adds, or None */
    const Schema *schema;      /* what to validate against, or NULL */
    Texts *texts;              /* strings decoded so far */
    int child_errors;
    long long contribution_bytes;
    long long attribute_bytes;
    long long task_bytes;
} Wanted;

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

static inline int
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

/* -- values.c --------------------------------------------------------------------------- */

/* Sets key -> value of a KeyValue in dict; the key is ``key`` when given, else decoded. */
INTERNAL int set_pair(const Wanted *wanted, PyObject *dict, PyObject *key,
                      const uint8_t *data, size_t size, const Pair *pair);
/* Every KeyValue in the fields ``number`` of a message, into dict (the last key wins). */
INTERNAL int all_attributes(const Wanted *wanted, PyObject *dict, const uint8_t *data,
                            size_t size, uint32_t number);
/* otel_diary.assembly.batch.estimate(attributes): rough bytes held for a dict of attributes. */
INTERNAL long long estimate(PyObject *attributes);
/* otel_diary.assembly.batch.held_by_values(attributes): what a dict's values hold. */
INTERNAL long long held_by_values(PyObject *attributes);

/* -- scan.c ----------------------------------------------------------------------------- */

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

typedef struct {
    PyObject *parts;       /* list of parts, see scan_doc */
    PyObject *part;        /* the last one (borrowed from parts) */
    long long part_size;   /* its contributions' size, stored when the part is done */
    int part_tracked;      /* whether one of its contributions is tracked by the GC */
    const uint8_t *group;  /* the ResourceSpans being read */
    size_t group_size;
    PyObject *resource;    /* its resource attributes, once a task span needed them */
    long long resource_size; /* and their estimate, added to each task span's size */
    IdSet ids;             /* span ids kept in the last part */
    long long held, valid, rejected, duplicates, size;
    PyObject *links;       /* list of (trace id, parent links) runs, see scan_doc */
    uint8_t link_trace[TRACE_ID];  /* the trace of the run being read */
    uint8_t *link_pairs;   /* its links: span id and parent span id, 8 bytes each */
    size_t link_size, link_capacity;
} Scan;

/* Reads the spans of a request into scan->parts: 0, or -1 with an exception set. */
INTERNAL int scan_request(Scan *scan, const Wanted *wanted, const uint8_t *data,
                          size_t size);
/* Appends the run of parent links being read to scan->links: 0, or -1 with an exception
   set. */
INTERNAL int close_links(Scan *scan);
/* Stores the size of the last part's contributions in it, and leaves out of garbage
   collection what can be in no reference cycle: 0, or -1 with an exception set. */
INTERNAL int close_part(Scan *scan);

#endif  /* OTLPSCAN_H */
