"""podscope annotations for Python training loops, over libpodscope's C ABI (ctypes, no build step).

    import podscope
    podscope.init(cores=[rank], job="my-job")
    for step in range(steps):
        with podscope.step(step):
            with podscope.infeed():
                batch = next(it)
            with podscope.compute("matmul", flops=2 * m ** 3):
                ...
            with podscope.all_reduce(step, nbytes, replica_group="{0,1,2,3}"):
                ...
            with podscope.send(channel_id, dst_core, nbytes):
                ...

An input pipeline (a DataLoader's worker, on any thread) annotates its stages as a tree:

    with podscope.input_stage("batch", "preprocess") as batch:
        with podscope.input_stage("read_shard", "read", parent=batch):
            ...

An allocator (a caching allocator's hooks) reports its blocks for the memory profile:

    podscope.alloc(nbytes, address, "host_pinned")
    podscope.free(address, "host_pinned")

A process that serves TensorFlow's or JAX's profiler tells the local agent, which then proxies it in captures
while the process lives (no `upstream` entry needed):

    tf.profiler.experimental.server.start(6009)    # or jax.profiler.start_server(6009)
    podscope.announce_profiler(6009)

Spans also work without `with`: s = podscope.send(...); ...; s.end().
The library is found through $PODSCOPE_LIBRARY, next to this file, or as libpodscope.so on the loader path.
"""

import ctypes
import os

__all__ = ["init", "shutdown", "set_thread_core", "intern", "dropped_events", "agent_connected", "Span",
           "step", "infeed", "outfeed", "compute", "all_reduce", "send", "recv_done", "trace", "input_stage",
           "INPUT_STAGE_CATEGORIES", "alloc", "free", "announce_profiler"]


class _Span(ctypes.Structure):
    _fields_ = [("begin_tick", ctypes.c_uint64), ("value", ctypes.c_int64), ("value2", ctypes.c_int64),
                ("id", ctypes.c_uint32), ("arg", ctypes.c_uint16), ("kind", ctypes.c_uint8),
                ("reserved", ctypes.c_uint8)]


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("PODSCOPE_LIBRARY"), os.path.join(here, "libpodscope.so"), "libpodscope.so.0",
                  "libpodscope.so"]
    errors = []
    for path in candidates:
        if not path:
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise OSError("libpodscope not found (set PODSCOPE_LIBRARY): " + "; ".join(errors))


_lib = _load()
_I64, _U32, _I32 = ctypes.c_int64, ctypes.c_uint32, ctypes.c_int32
for _name, _args in {"podscope_begin_step": [_I64], "podscope_begin_infeed": [_I64],
                     "podscope_begin_outfeed": [_I64], "podscope_begin_compute": [_U32, _I64, _I64],
                     "podscope_begin_all_reduce": [_I64, _I64, _U32], "podscope_begin_send": [_U32, _I32, _I64],
                     "podscope_begin_recv_done": [_U32, _I32, _I64], "podscope_begin_trace": [_U32]}.items():
    getattr(_lib, _name).argtypes = _args
    getattr(_lib, _name).restype = _Span
_lib.podscope_begin_input_stage.argtypes = [_U32, ctypes.c_int, ctypes.c_uint64]
_lib.podscope_begin_input_stage.restype = _Span
_lib.podscope_input_stage_id.argtypes = [ctypes.POINTER(_Span)]
_lib.podscope_input_stage_id.restype = ctypes.c_uint64
_lib.podscope_end.argtypes = [ctypes.POINTER(_Span)]
_lib.podscope_end.restype = None
_lib.podscope_init.argtypes = [ctypes.POINTER(_I32), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p]
_lib.podscope_init.restype = ctypes.c_int
_lib.podscope_intern.argtypes = [ctypes.c_char_p]
_lib.podscope_intern.restype = _U32
_lib.podscope_set_thread_core.argtypes = [_I32]
_lib.podscope_dropped_events.restype = ctypes.c_uint64
_lib.podscope_agent_connected.restype = ctypes.c_int
_lib.podscope_alloc.argtypes = [_I64, ctypes.c_uint64, _U32, _U32]
_lib.podscope_alloc.restype = None
_lib.podscope_free.argtypes = [ctypes.c_uint64, _U32]
_lib.podscope_free.restype = None
_lib.podscope_announce_profiler.argtypes = [ctypes.c_int]
_lib.podscope_announce_profiler.restype = ctypes.c_int

_names = {}


def init(cores=None, job=None, socket_path=None):
    """Declares this process's cores and job (None: $PODSCOPE_CORE_ID, $PODSCOPE_JOB) and starts the agent link."""
    arr = (_I32 * len(cores))(*cores) if cores else None
    _lib.podscope_init(arr, len(cores) if cores else 0, job.encode() if job else None,
                       socket_path.encode() if socket_path else None)


def announce_profiler(port):
    """This process serves its framework profiler on loopback `port` (after tf.profiler.experimental.server.start
    or jax.profiler.start_server): the local agent forwards its captures there while this process lives."""
    if _lib.podscope_announce_profiler(int(port)) != 0:
        raise ValueError(f"{port} is no TCP port")


def shutdown():
    _lib.podscope_shutdown()


def set_thread_core(core):
    _lib.podscope_set_thread_core(core)


def intern(name):
    """The id of `name` (cached: interning takes a lock in the library)."""
    nid = _names.get(name)
    if nid is None:
        nid = _names[name] = _lib.podscope_intern(name.encode())
    return nid


def dropped_events():
    return _lib.podscope_dropped_events()


def agent_connected():
    return bool(_lib.podscope_agent_connected())


class Span:
    """An annotated interval: ends at end() or at the end of a `with` block."""
    __slots__ = ("_span",)

    def __init__(self, span):
        self._span = span

    def end(self):
        _lib.podscope_end(ctypes.byref(self._span))

    @property
    def input_stage_id(self):
        """The id stages nested in this input stage name as their parent (0: it does not record)."""
        return _lib.podscope_input_stage_id(ctypes.byref(self._span))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()
        return False


def step(step_num):
    return Span(_lib.podscope_begin_step(step_num))


def infeed(nbytes=0):
    return Span(_lib.podscope_begin_infeed(nbytes))


def outfeed(nbytes=0):
    return Span(_lib.podscope_begin_outfeed(nbytes))


def compute(name, flops=0, nbytes=0):
    return Span(_lib.podscope_begin_compute(intern(name), flops, nbytes))


def all_reduce(all_reduce_id, nbytes, replica_group=None):
    return Span(_lib.podscope_begin_all_reduce(all_reduce_id, nbytes, intern(replica_group) if replica_group else 0))


def send(channel_id, dst_core, nbytes):
    return Span(_lib.podscope_begin_send(channel_id, dst_core, nbytes))


def recv_done(channel_id, src_core, nbytes):
    return Span(_lib.podscope_begin_recv_done(channel_id, src_core, nbytes))


def trace(name):
    return Span(_lib.podscope_begin_trace(intern(name)))


# In the order of the C ABI's PODSCOPE_INPUT_* values.
INPUT_STAGE_CATEGORIES = ("read", "preprocess", "enqueue")


def input_stage(name, category, parent=None):
    """One stage of an input pipeline; category is one of INPUT_STAGE_CATEGORIES, parent the enclosing
    input_stage Span (or its input_stage_id), None for a root stage. Recorded during captures only."""
    try:
        category_value = INPUT_STAGE_CATEGORIES.index(category)
    except ValueError:
        raise ValueError(f"input_stage {name!r}: category {category!r} is not one of {INPUT_STAGE_CATEGORIES}")
    parent_id = parent.input_stage_id if isinstance(parent, Span) else (parent or 0)
    return Span(_lib.podscope_begin_input_stage(intern(name), category_value, parent_id))


def alloc(nbytes, address, allocator, op=None):
    """Reports a block of `nbytes` at `address` handed out by the allocator named `allocator` (e.g. "host_pinned"),
    for the memory profile; `op` names what it is for. Recorded during captures only."""
    _lib.podscope_alloc(nbytes, address, intern(allocator), intern(op) if op else 0)


def free(address, allocator):
    """Reports that the block at `address` went back to the allocator named `allocator`."""
    _lib.podscope_free(address, intern(allocator))
