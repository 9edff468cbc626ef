# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""An OTLP ExportTraceServiceRequest read straight from its protobuf wire form into the tuples the normaliser reads
(``_wire_py`` documents the shape, and builds the same from protobuf's messages where this module is not compiled).

protobuf's Python messages cost the normaliser about a third of its time: every field read makes a Python object
through the message, and every attribute is two messages (KeyValue, AnyValue). This reader makes only the objects
the normaliser keeps (the ids as hex text, the names, each attribute's key and value in a dict, each event's dict).

What it does not read it skips as protobuf skips an unknown field: links, trace states, schema URLs, a scope's
attributes (only counted), dropped counts of resources, scopes and links. protobuf would refuse a request whose skipped
strings are not UTF-8; this reader keeps it (what is never read cannot be wrong for the store). Everything it reads
it reads as protobuf does: the last of a repeated singular field wins, a message field sent twice is merged, a field
of an unexpected wire type is unknown, a string must be UTF-8. An array or map value, an attribute whose value came in
two parts, a list of attributes over its count limit and a span with events over theirs are handed back raw, for
protobuf's own messages to read (``_wire_py`` does it): they are rare, and their limits are the normaliser's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, unsigned int maxchar)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


class WireError(ValueError):
    """The bytes are not a valid protobuf ExportTraceServiceRequest."""


cdef int MAX_GROUP_DEPTH = 100  # unknown groups nested deeper: refused (protobuf's recursion limit)
cdef uint64_t MAX_NS = (<uint64_t>1) << 63  # span times from it on are refused by the normaliser (BIGINT ns)

cdef const char* HEX = b"0123456789abcdef"


cdef struct Slice:
    Py_ssize_t start
    Py_ssize_t end


cdef struct Vec:
    Slice* items
    Py_ssize_t n
    Py_ssize_t cap


cdef int vec_push(Vec* v, Py_ssize_t start, Py_ssize_t end) except -1:
    cdef Slice* grown
    if v.n == v.cap:
        grown = <Slice*>realloc(v.items, (v.cap * 2 + 16) * sizeof(Slice))
        if grown == NULL:
            raise MemoryError()
        v.items = grown
        v.cap = v.cap * 2 + 16
    v.items[v.n].start = start
    v.items[v.n].end = end
    v.n += 1
    return 0


cdef inline int read_varint(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, uint64_t* out) except -1:
    cdef uint64_t result = 0
    cdef unsigned char byte
    cdef Py_ssize_t i = pos[0]
    cdef int k
    for k in range(10):
        if i >= end:
            raise WireError("truncated varint")
        byte = b[i]
        i += 1
        result |= (<uint64_t>(byte & 0x7F)) << (7 * k)
        if byte < 0x80:
            pos[0] = i
            out[0] = result
            return 0
    raise WireError("varint longer than 10 bytes")


cdef inline int read_tag(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, uint32_t* field, int* wt) except -1:
    cdef uint64_t tag
    read_varint(b, pos, end, &tag)
    if tag > 0xFFFFFFFF or (tag >> 3) == 0:
        raise WireError("invalid field tag")
    field[0] = <uint32_t>(tag >> 3)
    wt[0] = <int>(tag & 7)
    return 0


cdef inline int read_len(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, Py_ssize_t* start) except -1:
    """A length-delimited field's bounds: ``start`` (its first byte) and ``pos`` moved past it."""
    cdef uint64_t n
    read_varint(b, pos, end, &n)
    if n > <uint64_t>(end - pos[0]):
        raise WireError("length past the end of the message")
    start[0] = pos[0]
    pos[0] += <Py_ssize_t>n
    return 0


cdef inline uint64_t read_fixed64(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end) except? 0:
    cdef uint64_t v = 0
    if end - pos[0] < 8:
        raise WireError("truncated fixed64")
    memcpy(&v, b + pos[0], 8)  # little-endian, as x86-64 and aarch64 keep it
    pos[0] += 8
    return v


cdef int skip_field(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, uint32_t field, int wt, int depth) except -1:
    """Skip one field's value (its tag read); a group up to its end tag."""
    cdef uint64_t v
    cdef Py_ssize_t start
    cdef uint32_t f2
    cdef int wt2
    if wt == 0:
        read_varint(b, pos, end, &v)
    elif wt == 1:
        if end - pos[0] < 8:
            raise WireError("truncated fixed64")
        pos[0] += 8
    elif wt == 2:
        read_len(b, pos, end, &start)
    elif wt == 5:
        if end - pos[0] < 4:
            raise WireError("truncated fixed32")
        pos[0] += 4
    elif wt == 3:
        if depth >= MAX_GROUP_DEPTH:
            raise WireError("groups nested too deeply")
        while True:
            if pos[0] >= end:
                raise WireError("group without its end")
            read_tag(b, pos, end, &f2, &wt2)
            if wt2 == 4:
                if f2 != field:
                    raise WireError("group ended by another field's end tag")
                return 0
            skip_field(b, pos, end, f2, wt2, depth + 1)
    else:  # 4: an end-group tag outside its group; 6, 7: no such wire type
        raise WireError("invalid wire type")
    return 0


cdef inline str text(const unsigned char* b, Py_ssize_t start, Py_ssize_t end):
    if start == end:
        return ""
    try:
        return PyUnicode_DecodeUTF8(<const char*>(b + start), end - start, NULL)
    except UnicodeDecodeError:
        raise WireError("a string field is not valid UTF-8") from None


cdef inline str hex_of(const unsigned char* b, Py_ssize_t start, Py_ssize_t end):
    cdef Py_ssize_t n = end - start, i
    cdef object s = PyUnicode_New(2 * n, 127)
    cdef unsigned char* out = <unsigned char*>PyUnicode_DATA(s)
    cdef unsigned char c
    for i in range(n):
        c = b[start + i]
        out[2 * i] = HEX[c >> 4]
        out[2 * i + 1] = HEX[c & 15]
    return s


cdef inline bint all_zero(const unsigned char* b, Py_ssize_t start, Py_ssize_t end):
    cdef Py_ssize_t i
    for i in range(start, end):
        if b[i]:
            return False
    return True


cdef class _Reader:
    """One request's read: the limits and the callbacks the normaliser gave, and reusable slice lists."""

    cdef const unsigned char* b
    cdef Py_ssize_t span_limit, resource_limit, event_limit, max_events, max_length
    cdef object truncate, nested
    cdef Vec kvs, events, event_kvs, res_kvs

    def __dealloc__(self):
        free(self.kvs.items)
        free(self.events.items)
        free(self.event_kvs.items)
        free(self.res_kvs.items)

    cdef object value(self, Py_ssize_t start, Py_ssize_t end):
        """One AnyValue as Python: str (truncated past the length), bool, int, float, bytes as hex, None; an
        array or a map through ``nested`` (protobuf's message and the normaliser's limits)."""
        cdef const unsigned char* b = self.b
        cdef Py_ssize_t pos = start, s = 0, e = 0, vstart
        cdef uint32_t field
        cdef int wt
        cdef int case = 0  # 0 unset, 1 string, 2 bool, 3 int, 4 double, 5 nested, 7 bytes
        cdef uint64_t v = 0
        cdef double d
        cdef str out
        while pos < end:
            read_tag(b, &pos, end, &field, &wt)
            if field == 1 and wt == 2:
                read_len(b, &pos, end, &s)
                e = pos
                case = 1
            elif field == 2 and wt == 0:
                read_varint(b, &pos, end, &v)
                case = 2
            elif field == 3 and wt == 0:
                read_varint(b, &pos, end, &v)
                case = 3
            elif field == 4 and wt == 1:
                v = read_fixed64(b, &pos, end)
                case = 4
            elif (field == 5 or field == 6) and wt == 2:
                read_len(b, &pos, end, &vstart)
                case = 5
            elif field == 7 and wt == 2:
                read_len(b, &pos, end, &s)
                e = pos
                case = 7
            else:
                skip_field(b, &pos, end, field, wt, 0)
        if case == 1:
            out = text(b, s, e)
            if e - s > self.max_length and PyUnicode_GET_LENGTH(out) > self.max_length:
                return self.truncate(out)
            return out
        if case == 3:
            return <int64_t>v
        if case == 2:
            return v != 0
        if case == 4:
            memcpy(&d, &v, 8)
            return d
        if case == 7:
            out = hex_of(b, s, e)
            if 2 * (e - s) > self.max_length:
                return self.truncate(out)
            return out
        if case == 5:
            return self.nested(PyBytes_FromStringAndSize(<const char*>(b + start), end - start))
        return None

    cdef object key_value(self, Py_ssize_t start, Py_ssize_t end, bint raw):
        """One KeyValue: (key, value), the value as Python, or (``raw``) as its AnyValue's bytes."""
        cdef const unsigned char* b = self.b
        cdef Py_ssize_t pos = start, s, ks = 0, ke = 0, vs = 0, ve = 0
        cdef uint32_t field
        cdef int wt
        cdef list parts = None
        while pos < end:
            read_tag(b, &pos, end, &field, &wt)
            if field == 1 and wt == 2:
                read_len(b, &pos, end, &ks)
                ke = pos
            elif field == 2 and wt == 2:
                read_len(b, &pos, end, &s)
                if ve:  # a second value: merged with the first (protobuf's rule), by protobuf
                    if parts is None:
                        parts = [PyBytes_FromStringAndSize(<const char*>(b + vs), ve - vs)]
                    parts.append(PyBytes_FromStringAndSize(<const char*>(b + s), pos - s))
                vs, ve = s, pos
            else:
                skip_field(b, &pos, end, field, wt, 0)
        key = text(b, ks, ke)
        if raw or parts is not None:
            if parts is not None:
                joined = b"".join(parts)
            else:
                joined = PyBytes_FromStringAndSize(<const char*>(b + vs), ve - vs)
            return key, (joined if raw else self.nested(joined))
        if not ve:
            return key, None
        return key, self.value(vs, ve)

    cdef object attributes(self, Vec* kvs, Py_ssize_t limit):
        """The KeyValues in ``kvs`` as a dict (a later key wins); over ``limit``, a list of (key, AnyValue bytes)
        for the normaliser to cut."""
        cdef Py_ssize_t i
        cdef dict out
        cdef list pairs
        if kvs.n > limit:
            pairs = []
            for i in range(kvs.n):
                pairs.append(self.key_value(kvs.items[i].start, kvs.items[i].end, True))
            return pairs
        out = {}
        for i in range(kvs.n):
            key, value = self.key_value(kvs.items[i].start, kvs.items[i].end, False)
            out[key] = value
        return out

    cdef Py_ssize_t count(self, Py_ssize_t start, Py_ssize_t end, uint32_t wanted) except -1:
        """How many length-delimited fields numbered ``wanted`` the message holds."""
        cdef Py_ssize_t pos = start, n = 0
        cdef uint32_t field
        cdef int wt
        while pos < end:
            read_tag(self.b, &pos, end, &field, &wt)
            if field == wanted and wt == 2:
                n += 1
            skip_field(self.b, &pos, end, field, wt, 0)
        return n

    cdef dict event(self, Py_ssize_t start, Py_ssize_t end):
        """One event as the store keeps it (a dict); its attributes are within their count."""
        cdef const unsigned char* b = self.b
        cdef Py_ssize_t pos = start, s, ns = 0, ne = 0
        cdef uint32_t field
        cdef int wt
        cdef uint64_t v, time_ns = 0, dropped = 0
        self.event_kvs.n = 0
        while pos < end:
            read_tag(b, &pos, end, &field, &wt)
            if field == 1 and wt == 1:
                time_ns = read_fixed64(b, &pos, end)
            elif field == 2 and wt == 2:
                read_len(b, &pos, end, &ns)
                ne = pos
            elif field == 3 and wt == 2:
                read_len(b, &pos, end, &s)
                vec_push(&self.event_kvs, s, pos)
            elif field == 4 and wt == 0:
                read_varint(b, &pos, end, &v)
                dropped = v & 0xFFFFFFFF
            else:
                skip_field(b, &pos, end, field, wt, 0)
        out = {"name": text(b, ns, ne), "time_ns": time_ns, "attributes": self.attributes(&self.event_kvs, 0x7FFFFFFF)}
        if dropped:
            out["dropped_attributes_count"] = dropped
        return out

    cdef tuple span(self, Py_ssize_t start, Py_ssize_t end):
        cdef const unsigned char* b = self.b
        cdef Py_ssize_t pos = start, s, p2, ts = 0, te = 0, ss = 0, se = 0, ps = 0, pe = 0, ns = 0, ne = 0
        cdef Py_ssize_t ms = 0, me = 0, i
        cdef uint32_t field, f2
        cdef int wt, wt2
        cdef uint64_t v, start_ns = 0, end_ns = 0, dropped_attrs = 0, dropped_events = 0
        cdef int32_t kind = 0, code = 0
        cdef bint raw_events = False
        self.kvs.n = 0
        self.events.n = 0
        while pos < end:
            read_tag(b, &pos, end, &field, &wt)
            if wt == 2 and field == 9:
                read_len(b, &pos, end, &s)
                vec_push(&self.kvs, s, pos)
            elif wt == 1 and field == 7:
                start_ns = read_fixed64(b, &pos, end)
            elif wt == 1 and field == 8:
                end_ns = read_fixed64(b, &pos, end)
            elif wt == 2 and field == 1:
                read_len(b, &pos, end, &ts)
                te = pos
            elif wt == 2 and field == 2:
                read_len(b, &pos, end, &ss)
                se = pos
            elif wt == 2 and field == 4:
                read_len(b, &pos, end, &ps)
                pe = pos
            elif wt == 2 and field == 5:
                read_len(b, &pos, end, &ns)
                ne = pos
            elif wt == 0 and field == 6:
                read_varint(b, &pos, end, &v)
                kind = <int32_t>(<uint32_t>(v & 0xFFFFFFFF))
            elif wt == 2 and field == 11:
                read_len(b, &pos, end, &s)
                vec_push(&self.events, s, pos)
            elif wt == 0 and field == 10:
                read_varint(b, &pos, end, &v)
                dropped_attrs = v & 0xFFFFFFFF
            elif wt == 0 and field == 12:
                read_varint(b, &pos, end, &v)
                dropped_events = v & 0xFFFFFFFF
            elif wt == 2 and field == 15:  # Status (merged when sent twice: each field's last value wins)
                read_len(b, &pos, end, &s)
                p2 = s
                while p2 < pos:
                    read_tag(b, &p2, pos, &f2, &wt2)
                    if f2 == 2 and wt2 == 2:
                        read_len(b, &p2, pos, &ms)
                        me = p2
                    elif f2 == 3 and wt2 == 0:
                        read_varint(b, &p2, pos, &v)
                        code = <int32_t>(<uint32_t>(v & 0xFFFFFFFF))
                    else:
                        skip_field(b, &p2, pos, f2, wt2, 0)
            else:
                skip_field(b, &pos, end, field, wt, 0)
        name = text(b, ns, ne)
        message = text(b, ms, me)
        trace_id = hex_of(b, ts, te) if te - ts == 16 and not all_zero(b, ts, te) else None
        span_id = hex_of(b, ss, se) if se - ss == 8 and not all_zero(b, ss, se) else None
        if pe == ps:
            parent = None
        elif pe - ps == 8:
            parent = hex_of(b, ps, pe)
        else:
            parent = False
        if (trace_id is None or span_id is None or parent is False or not 0 < start_ns < MAX_NS
                or not 0 < end_ns < MAX_NS):
            # the normaliser rejects the span before it reads its attributes and events: neither is read here
            return (trace_id, span_id, parent, name, kind, start_ns, end_ns, None, dropped_attrs,
                    None, False, dropped_events, code, message)
        attrs = self.attributes(&self.kvs, self.span_limit)
        events = []
        raw_events = self.events.n > self.max_events
        for i in range(self.events.n):  # each event's attributes within their count (before any value is read)
            if raw_events:
                break
            raw_events = self.count(self.events.items[i].start, self.events.items[i].end, 3) > self.event_limit
        if not raw_events:
            for i in range(self.events.n):
                events.append(self.event(self.events.items[i].start, self.events.items[i].end))
        if raw_events:
            events = [
                PyBytes_FromStringAndSize(<const char*>(b + self.events.items[i].start),
                                          self.events.items[i].end - self.events.items[i].start)
                for i in range(self.events.n)
            ]
        return (trace_id, span_id, parent, name, kind, start_ns, end_ns, attrs, dropped_attrs,
                events, raw_events, dropped_events, code, message)

    cdef tuple scope_spans(self, Py_ssize_t start, Py_ssize_t end):
        cdef const unsigned char* b = self.b
        cdef Py_ssize_t pos = start, s, p2, ns = 0, ne = 0, vs = 0, ve = 0
        cdef uint32_t field, f2
        cdef int wt, wt2
        cdef Py_ssize_t scope_attrs = 0
        cdef list spans = []
        while pos < end:
            read_tag(b, &pos, end, &field, &wt)
            if field == 2 and wt == 2:
                read_len(b, &pos, end, &s)
                spans.append(self.span(s, pos))
            elif field == 1 and wt == 2:  # InstrumentationScope (merged when sent twice)
                read_len(b, &pos, end, &s)
                p2 = s
                while p2 < pos:
                    read_tag(b, &p2, pos, &f2, &wt2)
                    if f2 == 1 and wt2 == 2:
                        read_len(b, &p2, pos, &ns)
                        ne = p2
                    elif f2 == 2 and wt2 == 2:
                        read_len(b, &p2, pos, &vs)
                        ve = p2
                    elif f2 == 3 and wt2 == 2:
                        skip_field(b, &p2, pos, f2, wt2, 0)
                        scope_attrs += 1
                    else:
                        skip_field(b, &p2, pos, f2, wt2, 0)
            else:
                skip_field(b, &pos, end, field, wt, 0)
        return (text(b, ns, ne), text(b, vs, ve), scope_attrs, spans)

    cdef tuple resource_spans(self, Py_ssize_t start, Py_ssize_t end):
        cdef const unsigned char* b = self.b
        cdef Py_ssize_t pos = start, s, p2
        cdef uint32_t field, f2
        cdef int wt, wt2
        cdef list scopes = []
        self.res_kvs.n = 0
        while pos < end:
            read_tag(b, &pos, end, &field, &wt)
            if field == 2 and wt == 2:
                read_len(b, &pos, end, &s)
                scopes.append(self.scope_spans(s, pos))
            elif field == 1 and wt == 2:  # Resource (merged when sent twice: its attributes added up)
                read_len(b, &pos, end, &s)
                p2 = s
                while p2 < pos:
                    read_tag(b, &p2, pos, &f2, &wt2)
                    if f2 == 1 and wt2 == 2:
                        read_len(b, &p2, pos, &s)
                        vec_push(&self.res_kvs, s, p2)
                    else:
                        skip_field(b, &p2, pos, f2, wt2, 0)
            else:
                skip_field(b, &pos, end, field, wt, 0)
        return (self.attributes(&self.res_kvs, self.resource_limit), scopes)


def read_request(
    bytes data,
    Py_ssize_t span_limit,
    Py_ssize_t resource_limit,
    Py_ssize_t event_limit,
    Py_ssize_t max_events,
    Py_ssize_t max_length,
    truncate,
    nested,
):
    """The request in ``data``: a list of (resource attributes, [(scope name, scope version, scope attribute count,
    [span tuple, ...]), ...]); see ``_wire_py.read_request`` for each part. Raises WireError."""
    cdef _Reader r = _Reader.__new__(_Reader)
    cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data), pos = 0, s
    cdef uint32_t field
    cdef int wt
    cdef list out = []
    r.b = b
    r.span_limit, r.resource_limit, r.event_limit = span_limit, resource_limit, event_limit
    r.max_events, r.max_length = max_events, max_length
    r.truncate, r.nested = truncate, nested
    while pos < end:
        read_tag(b, &pos, end, &field, &wt)
        if field == 1 and wt == 2:
            read_len(b, &pos, end, &s)
            out.append(r.resource_spans(s, pos))
        else:
            skip_field(b, &pos, end, field, wt, 0)
    return out
