/* The wire format: varints, groups, UTF-8, and validation of a whole message against
 * compiled wire rules. Everything here is bounds-checked: what cannot be read raises
 * ValueError. */

#include "otlpscan.h"

int
fail(const char *what)
{
    PyErr_Format(PyExc_ValueError, "malformed protobuf: %s", what);
    return -1;
}

int
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

/* Whether [s, s + size) is UTF-8 as Unicode defines it (no surrogates, overlong forms or
   code points past U+10FFFF), as protobuf and Python's strict codec have it. */
int
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

/* Whether a whole message is as the schema has it (``depth``: its nesting level). */
int
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
