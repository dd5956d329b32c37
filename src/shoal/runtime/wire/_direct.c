/* The small envelope's way between the PEs of one node, in C (docs/compiled.md).
 *
 * One small send through mpi4py and marshal costs about 10,400 instructions, and one
 * receive through mpi4py's test, marshal and the restart of the posted receive about 7,000
 * (callgrind, rank 0 of a ping-pong): most of it is mpi4py's parsing of its arguments, the
 * GIL dropped and taken around each MPI call, and marshal's set-up per call. A Link does
 * the same steps with the MPI library's own functions, called from C with the GIL held:
 *
 *   send(env, dest)  writes a plain envelope (ints, floats, strings, bytes, booleans, None
 *                    and tuples of them) in marshal's version 2, byte for byte what
 *                    marshal.dumps(env, 2) writes, into a buffer it keeps, and sends it by
 *                    MPI_Send with the PLAIN tag: -1 if env is not plain, -2 if it is but
 *                    this path does not take it (larger than EAGER bytes, an int beyond 64
 *                    bits, a string that is not valid UTF-8), else the bytes sent.
 *   poll()           tests the posted receive: None if nothing came; a PLAIN envelope
 *                    decoded from the receive's memory, the receive started again; any
 *                    other tag as an int, the receive left inactive (the caller reads it,
 *                    then calls start()). Get_count() and Get_source() describe the last
 *                    message, as an mpi4py Status would.
 *
 * The GIL is held across MPI_Send since only envelopes of at most EAGER bytes between the
 * ranks of one node take this way, which MPI sends eagerly (the call returns after a
 * copy, see transport.py), and across MPI_Test and MPI_Start, which do not block. (When
 * the receiver's shared-memory cells are full, MPI_Send waits until it takes some: the
 * rank's other Python threads wait with it then.)
 *
 * The functions are those mpi4py's MPI extension calls, taken by dlsym from its handle (the
 * first Link is given its path), so this module links no MPI of its own. It speaks MPICH's
 * ABI (libmpi.so.12: MPICH, Intel MPI, Cray MPICH, MVAPICH): handles are C ints and a status
 * is five ints. transport.py makes a Link only when mpi4py reports those sizes; under any
 * other MPI (Open MPI's handles are pointers) the transport keeps mpi4py's way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <marshal.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

typedef int Handle;  /* MPI_Comm, MPI_Datatype, MPI_Request in MPICH's ABI */
typedef struct {
    int count_lo, count_hi_and_cancelled, source, tag, error;
} Status;

typedef int (*SendFn)(const void *, int, Handle, int, int, Handle);
typedef int (*TestFn)(Handle *, int *, Status *);
typedef int (*StartFn)(Handle *);

static SendFn mpi_send;
static TestFn mpi_test;
static StartFn mpi_start;

#define DEPTH 3  /* levels of tuples below the envelope (transport._plain's depth) */

/* ------------------------------------------------------------------ the MPI library */

/* Take the three functions from the library that `path` (mpi4py's MPI extension, already
 * loaded) resolves them from: dlsym on its handle searches it and what it links, so these
 * are the very functions mpi4py calls. 0, or -1 with an exception set. */
static int
find_mpi(const char *path)
{
    void *lib = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
    if (lib == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s is not loaded: import mpi4py.MPI first", path);
        return -1;
    }
    void *send = dlsym(lib, "MPI_Send"), *test = dlsym(lib, "MPI_Test");
    void *start = dlsym(lib, "MPI_Start");
    if (send == NULL || test == NULL || start == NULL) {
        dlclose(lib);
        PyErr_Format(PyExc_RuntimeError, "%s reaches no MPI_Send, MPI_Test and MPI_Start",
                     path);
        return -1;
    }
    mpi_send = (SendFn)send;  /* (lib stays open: its functions are kept) */
    mpi_test = (TestFn)test;
    mpi_start = (StartFn)start;
    return 0;
}

/* ------------------------------------------------------------------ writing (marshal 2) */

typedef struct {
    char *at, *end;
} Out;

static int
put(Out *o, const void *src, Py_ssize_t n)
{
    if (o->end - o->at < n)
        return -2;
    memcpy(o->at, src, (size_t)n);
    o->at += n;
    return 0;
}

static int
put_byte(Out *o, char c)
{
    return put(o, &c, 1);
}

static int
put_int32(Out *o, int32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                          (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    return put(o, b, 4);
}

static int
put_sized(Out *o, char type, const char *src, Py_ssize_t n)
{
    if (n > INT32_MAX || put_byte(o, type) || put_int32(o, (int32_t)n))
        return -2;
    return put(o, src, n);
}

/* An int as marshal writes it: 'i' and 4 bytes within 32 bits, else 'l', the signed count
 * of its 15-bit digits and the digits, least significant first. */
static int
put_long(Out *o, PyObject *v)
{
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        return -2;  /* (beyond 64 bits: marshal writes it) */
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x >= INT32_MIN && x <= INT32_MAX)
        return put_byte(o, 'i') || put_int32(o, (int32_t)x) ? -2 : 0;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    unsigned char digits[10];
    int n = 0;
    for (; u; u >>= 15, n++) {
        digits[2 * n] = (unsigned char)(u & 0xff);
        digits[2 * n + 1] = (unsigned char)((u >> 8) & 0x7f);
    }
    if (put_byte(o, 'l') || put_int32(o, x < 0 ? -n : n))
        return -2;
    return put(o, digits, 2 * n);
}

static int
put_float(Out *o, PyObject *v)
{
    unsigned char b[8];
#if PY_VERSION_HEX >= 0x030B0000
    if (PyFloat_Pack8(PyFloat_AS_DOUBLE(v), (char *)b, 1) < 0)
#else
    if (_PyFloat_Pack8(PyFloat_AS_DOUBLE(v), b, 1) < 0)
#endif
        return -1;
    return put_byte(o, 'g') || put(o, b, 8) ? -2 : 0;
}

static int put_tuple(Out *o, PyObject *t, int depth);

/* One plain value: 0 written, -1 not plain, -2 plain but not taken here. */
static int
put_value(Out *o, PyObject *v, int depth)
{
    if (v == Py_None)
        return put_byte(o, 'N');
    if (v == Py_True)
        return put_byte(o, 'T');
    if (v == Py_False)
        return put_byte(o, 'F');
    if (PyLong_CheckExact(v))
        return put_long(o, v);
    if (PyUnicode_CheckExact(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) {  /* (a lone surrogate: marshal writes it, "surrogatepass") */
            PyErr_Clear();
            return -2;
        }
        return put_sized(o, 'u', s, n);
    }
    if (PyFloat_CheckExact(v))
        return put_float(o, v);
    if (PyBytes_CheckExact(v))
        return put_sized(o, 's', PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    if (PyTuple_CheckExact(v) && depth > 0)
        return put_tuple(o, v, depth - 1);
    return -1;
}

static int
put_tuple(Out *o, PyObject *t, int depth)
{
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    int rc = 0;
    if (n > INT32_MAX || put_byte(o, '(') || put_int32(o, (int32_t)n))
        rc = -2;
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = put_value(o, PyTuple_GET_ITEM(t, i), depth);
        if (r == -1)
            return -1;  /* (not plain: whatever else was found) */
        if (r)
            rc = r;     /* plain so far: look on for what is not */
        if (rc)
            o->at = o->end;  /* (nothing more is written, the check goes on) */
    }
    return rc;
}

/* ------------------------------------------------------------------ reading (marshal 2) */

typedef struct {
    const unsigned char *at, *end;
} In;

#define UNKNOWN Py_NotImplemented  /* what only marshal reads (no message holds this) */

static int
get_int32(In *in, int32_t *v)
{
    if (in->end - in->at < 4)
        return -1;
    uint32_t u = (uint32_t)in->at[0] | (uint32_t)in->at[1] << 8 | (uint32_t)in->at[2] << 16
                 | (uint32_t)in->at[3] << 24;
    *v = (int32_t)u;
    in->at += 4;
    return 0;
}

static PyObject *get_value(In *in, int depth);

static PyObject *
get_long(In *in)
{
    int32_t n;
    if (get_int32(in, &n) || n < -4 || n > 4 || in->end - in->at < 2 * (n < 0 ? -n : n))
        return UNKNOWN;
    unsigned long long u = 0;
    int count = n < 0 ? -n : n;
    for (int k = count - 1; k >= 0; k--) {
        unsigned d = (unsigned)in->at[2 * k] | (unsigned)in->at[2 * k + 1] << 8;
        if (d > 0x7fff || (d == 0 && k == count - 1))  /* (marshal refuses these) */
            return UNKNOWN;
        u = u << 15 | d;
    }
    in->at += 2 * count;
    return n < 0 ? PyLong_FromLongLong(-(long long)u) : PyLong_FromUnsignedLongLong(u);
}

static PyObject *
get_tuple(In *in, int depth)
{
    int32_t n;
    if (depth < 0 || get_int32(in, &n) || n < 0 || n > in->end - in->at)
        return UNKNOWN;
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        PyObject *v = get_value(in, depth - 1);
        if (v == NULL || v == UNKNOWN) {
            Py_DECREF(t);
            return v;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* One value (a new reference), NULL on an error, or UNKNOWN (borrowed) for what only
 * marshal reads. */
static PyObject *
get_value(In *in, int depth)
{
    if (in->at >= in->end)
        return UNKNOWN;
    int32_t n;
    double x;
    switch (*in->at++) {
    case 'N':
        Py_RETURN_NONE;
    case 'T':
        Py_RETURN_TRUE;
    case 'F':
        Py_RETURN_FALSE;
    case 'i':
        return get_int32(in, &n) ? UNKNOWN : PyLong_FromLong(n);
    case 'l':
        return get_long(in);
    case 'g':
        if (in->end - in->at < 8)
            return UNKNOWN;
#if PY_VERSION_HEX >= 0x030B0000
        x = PyFloat_Unpack8((const char *)in->at, 1);
#else
        x = _PyFloat_Unpack8(in->at, 1);
#endif
        in->at += 8;
        return x == -1.0 && PyErr_Occurred() ? NULL : PyFloat_FromDouble(x);
    case 'u':
        if (get_int32(in, &n) || n < 0 || n > in->end - in->at)
            return UNKNOWN;
        in->at += n;
        return PyUnicode_DecodeUTF8((const char *)in->at - n, n, "surrogatepass");
    case 's':
        if (get_int32(in, &n) || n < 0 || n > in->end - in->at)
            return UNKNOWN;
        in->at += n;
        return PyBytes_FromStringAndSize((const char *)in->at - n, n);
    case '(':
        return get_tuple(in, depth);
    default:
        return UNKNOWN;
    }
}

/* An envelope as marshal.loads reads it (the rest of the memory is ignored). */
static PyObject *
read_envelope(const char *buf, Py_ssize_t n)
{
    In in = {(const unsigned char *)buf, (const unsigned char *)buf + n};
    PyObject *v = get_value(&in, DEPTH + 1);
    if (v != UNKNOWN)
        return v;
    return PyMarshal_ReadObjectFromString(buf, n);  /* (it says what is wrong) */
}

/* ------------------------------------------------------------------ the Link */

typedef struct {
    PyObject_HEAD
    Handle comm, byte, request;
    int plain;          /* the tag of a marshalled envelope */
    Py_buffer inbox;    /* the posted receive's memory */
    char *out;          /* a send's memory, EAGER bytes, reused */
    Py_ssize_t eager;
    PyObject *error;    /* mpi4py's MPI.Exception */
    Py_ssize_t count;   /* bytes of the last message poll found */
    int source;         /* its sender */
} Link;

static int
failed(Link *self, int code)
{
    PyErr_Clear();  /* (MPI's error is the one said: a failed read before it is dropped) */
    PyObject *exc = PyObject_CallFunction(self->error, "i", code);
    if (exc != NULL) {
        PyErr_SetObject(self->error, exc);
        Py_DECREF(exc);
    }
    return -1;
}

static int
Link_init(Link *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"comm", "byte", "request", "inbox", "plain", "eager", "error",
                            "library", NULL};
    unsigned comm, byte, request;  /* (mpi4py may give a handle sign-extended to 64 bits) */
    Py_buffer inbox;
    int plain;
    Py_ssize_t eager;
    PyObject *error;
    const char *library;
    if (self->out != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Link is made once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "IIIw*inOs", names, &comm, &byte, &request,
                                     &inbox, &plain, &eager, &error, &library))
        return -1;
    if (eager <= 0 || eager > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "eager must be 1 to %d bytes, not %zd", INT32_MAX,
                     eager);
        goto fail;
    }
    if (mpi_send == NULL && find_mpi(library) < 0)
        goto fail;
    self->out = PyMem_Malloc((size_t)eager);
    if (self->out == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    self->comm = (Handle)comm;
    self->byte = (Handle)byte;
    self->request = (Handle)request;
    self->inbox = inbox;
    self->plain = plain;
    self->eager = eager;
    Py_INCREF(error);
    self->error = error;
    return 0;
fail:
    PyBuffer_Release(&inbox);
    return -1;
}

/* Is the Link made (its __init__ ran)? Else say so. */
static int
made(Link *self)
{
    if (self->out != NULL)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "this Link was not made (Link(...) makes one)");
    return 0;
}

static void
Link_dealloc(Link *self)
{
    if (self->inbox.obj != NULL)
        PyBuffer_Release(&self->inbox);
    PyMem_Free(self->out);
    Py_XDECREF(self->error);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Link_send(Link *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!made(self))
        return NULL;
    if (nargs != 2 || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "send(env, dest): a tuple and a rank");
        return NULL;
    }
    long rank = PyLong_AsLong(args[1]);
    if (rank == -1 && PyErr_Occurred())
        return NULL;
    if (rank < INT_MIN || rank > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "rank %ld is out of an int's range", rank);
        return NULL;
    }
    int dest = (int)rank;
    if (!PyTuple_CheckExact(args[0]))
        return PyLong_FromLong(-1);
    Out o = {self->out, self->out + self->eager};
    int rc = put_tuple(&o, args[0], DEPTH);
    if (rc)
        return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
    int n = (int)(o.at - self->out);
    int code = mpi_send(self->out, n, self->byte, dest, self->plain, self->comm);
    if (code)
        return failed(self, code), NULL;
    return PyLong_FromLong(n);
}

static PyObject *
Link_poll(Link *self, PyObject *unused)
{
    (void)unused;
    if (!made(self))
        return NULL;
    int flag = 0;
    Status st;
    int code = mpi_test(&self->request, &flag, &st);
    if (code)
        return failed(self, code), NULL;
    if (!flag)
        Py_RETURN_NONE;
    self->count = (Py_ssize_t)(unsigned)st.count_lo;
    self->source = st.source;
    if (st.tag != self->plain)
        return PyLong_FromLong(st.tag);
    PyObject *env = read_envelope(self->inbox.buf, self->count);
    code = mpi_start(&self->request);  /* (read: the memory may take the next one) */
    if (env != NULL && !PyTuple_CheckExact(env)) {
        PyErr_Format(PyExc_ValueError, "rank %d sent a plain message that is no envelope "
                     "(a %.100s)", self->source, Py_TYPE(env)->tp_name);
        Py_CLEAR(env);
    }
    if (code) {
        Py_XDECREF(env);
        return failed(self, code), NULL;
    }
    return env;
}

static PyObject *
Link_start(Link *self, PyObject *unused)
{
    (void)unused;
    if (!made(self))
        return NULL;
    int code = mpi_start(&self->request);
    if (code)
        return failed(self, code), NULL;
    Py_RETURN_NONE;
}

static PyObject *
Link_Get_count(Link *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromSsize_t(self->count);
}

static PyObject *
Link_Get_source(Link *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->source);
}

static PyMethodDef Link_methods[] = {
    {"send", (PyCFunction)(void (*)(void))Link_send, METH_FASTCALL,
     "send(env, dest): send a plain envelope; the bytes sent, -1 not plain, -2 not taken"},
    {"poll", (PyCFunction)Link_poll, METH_NOARGS,
     "poll(): None, a plain envelope, or the tag of another message (then start())"},
    {"start", (PyCFunction)Link_start, METH_NOARGS, "start(): post the receive again"},
    {"Get_count", (PyCFunction)Link_Get_count, METH_NOARGS,
     "the bytes of the last message poll found (as mpi4py's Status says it)"},
    {"Get_source", (PyCFunction)Link_Get_source, METH_NOARGS, "the rank that sent it"},
    {NULL}
};

static PyTypeObject LinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal.runtime.wire._direct.Link",
    .tp_basicsize = sizeof(Link),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Link(comm, byte, request, inbox, plain, eager, error, library): small "
              "envelopes by MPI's own calls (the handles are mpi4py's, library the path of "
              "its MPI extension; see the module's source)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Link_init,
    .tp_dealloc = (destructor)Link_dealloc,
    .tp_methods = Link_methods,
};

/* ------------------------------------------------------------------ the module */

static PyObject *
dumps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Py_ssize_t limit;
    if (nargs != 2 || (limit = PyLong_AsSsize_t(args[1])) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "dumps(env, limit): a tuple and a size");
        return NULL;
    }
    if (!PyTuple_CheckExact(args[0]))
        return PyLong_FromLong(-1);
    PyObject *out = PyBytes_FromStringAndSize(NULL, limit);
    if (out == NULL)
        return NULL;
    Out o = {PyBytes_AS_STRING(out), PyBytes_AS_STRING(out) + limit};
    int rc = put_tuple(&o, args[0], DEPTH);
    if (rc) {
        Py_DECREF(out);
        return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
    }
    if (_PyBytes_Resize(&out, o.at - PyBytes_AS_STRING(out)) < 0)
        return NULL;
    return out;
}

static PyObject *
loads(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *env = read_envelope(view.buf, view.len);
    PyBuffer_Release(&view);
    return env;
}

static PyMethodDef module_methods[] = {
    {"dumps", (PyCFunction)(void (*)(void))dumps, METH_FASTCALL,
     "dumps(env, limit): what send writes (bytes, at most limit), or -1 / -2 as send says"},
    {"loads", loads, METH_O, "loads(data): what poll reads from data"},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "shoal.runtime.wire._direct",
    "Small envelopes between the PEs of one node by the MPI library's own calls "
    "(see the C source's first comment).", -1, module_methods
};

PyMODINIT_FUNC
PyInit__direct(void)
{
    if (PyType_Ready(&LinkType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LinkType);
    if (PyModule_AddObject(m, "Link", (PyObject *)&LinkType) < 0) {
        Py_DECREF(&LinkType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
