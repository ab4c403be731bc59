"""ctypes declarations of runtime/include/blockcast.h and the one context of this process.

The library is found, in order: $BLOCKCAST_LIBRARY; a copy installed beside this package
(blockcast/lib/, made by `pip install build/python`); the source tree's build/lib (after
./build.sh); the system's loader path.
"""
import ctypes
import os

c_int64_p = ctypes.POINTER(ctypes.c_int64)

BC_OK = 0
STATUS_NAMES = ("BC_OK", "BC_ERR_ARG", "BC_ERR_SPEC", "BC_ERR_UNSUPPORTED", "BC_ERR_NOMEM", "BC_ERR_CUDA",
                "BC_ERR_NVRTC", "BC_ERR_NCCL", "BC_ERR_UNAVAILABLE", "BC_ERR_INTERNAL")
BC_FP32, BC_BF16, BC_FP16 = 0, 1, 2
BC_ROWWISE, BC_COLUMNWISE = 1, 2
AMAX_ALGOS = {"max": 0, "most_recent": 1}
BLOCK_KINDS = ("tensor", "1d", "2d")


class BlockcastError(RuntimeError):
    """A failed blockcast call: `status` is the C status name ("BC_ERR_ARG"), `message` the
    library's message (bc_last_error) saying what was wrong and what would be right."""

    def __init__(self, status, message):
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}")

    def __reduce__(self):  # pickled across processes (multiprocessing, DataLoader workers) whole
        return (BlockcastError, (self.status, self.message))


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rows", ctypes.c_int64),
                ("cols", ctypes.c_int64), ("row_stride", ctypes.c_int64)]


class QTensor(ctypes.Structure):
    _fields_ = [("format", ctypes.c_void_p), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
                ("rowwise_data", ctypes.c_void_p), ("rowwise_scale_inv", ctypes.c_void_p),
                ("columnwise_data", ctypes.c_void_p), ("columnwise_scale_inv", ctypes.c_void_p),
                ("amax", ctypes.c_void_p), ("scale", ctypes.c_void_p), ("scale_swizzled", ctypes.c_int),
                ("stochastic_rounding", ctypes.c_int), ("sr_seed", ctypes.c_uint64), ("sr_offset", ctypes.c_uint64)]


class FormatInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("description", ctypes.c_char_p), ("spec_file", ctypes.c_char_p),
                ("element", ctypes.c_char_p), ("element_bits", ctypes.c_int), ("block", ctypes.c_int),
                ("element_max", ctypes.c_float), ("has_rowwise", ctypes.c_int), ("has_columnwise", ctypes.c_int),
                ("columnwise_transposed", ctypes.c_int), ("block_rows", ctypes.c_int), ("block_cols", ctypes.c_int),
                ("scale_type", ctypes.c_char_p), ("scale_rule", ctypes.c_char_p), ("scale_bytes", ctypes.c_int),
                ("two_level", ctypes.c_int), ("stochastic_rounding", ctypes.c_int), ("element_pack", ctypes.c_int),
                ("element_pack_bytes", ctypes.c_int), ("nan_policy", ctypes.c_char_p)]


class QLayout(ctypes.Structure):
    _fields_ = [("data_rows", ctypes.c_int64), ("data_cols", ctypes.c_int64), ("data_bytes", ctypes.c_size_t),
                ("scale_rows", ctypes.c_int64), ("scale_cols", ctypes.c_int64),
                ("scale_valid_rows", ctypes.c_int64), ("scale_valid_cols", ctypes.c_int64),
                ("scale_elem_bytes", ctypes.c_size_t), ("scale_bytes", ctypes.c_size_t)]


def _candidates():
    env = os.environ.get("BLOCKCAST_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "lib", "libblockcast.so.0")]
    # runtime/python/blockcast/ -> the repository root
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    build = os.environ.get("BC_BUILD", os.path.join(root, "build"))
    out.append(os.path.join(build if os.path.isabs(build) else os.path.join(root, build), "lib", "libblockcast.so"))
    out.append("libblockcast.so.0")
    return out


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("blockcast: cannot load libblockcast; tried " + "; ".join(tried) +
                      ". Build it with ./build.sh, or set BLOCKCAST_LIBRARY to the path of libblockcast.so")


lib, library_path = _load()

_P, _I64, _SZ = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t


def _proto(name, args, res=ctypes.c_int):
    f = getattr(lib, name)
    f.argtypes = args
    f.restype = res
    return f


bc_status_string = _proto("bc_status_string", [ctypes.c_int], ctypes.c_char_p)
bc_ctx_create = _proto("bc_ctx_create", [ctypes.POINTER(_P), ctypes.c_char_p, _SZ])
bc_ctx_destroy = _proto("bc_ctx_destroy", [_P], None)
bc_last_error = _proto("bc_last_error", [_P], ctypes.c_char_p)
bc_format_get = _proto("bc_format_get", [_P, ctypes.c_char_p, ctypes.POINTER(_P)])
bc_format_load = _proto("bc_format_load", [_P, ctypes.c_char_p, ctypes.POINTER(_P)])
bc_format_count = _proto("bc_format_count", [_P], _SZ)
bc_format_at = _proto("bc_format_at", [_P, _SZ], _P)
bc_format_get_info = _proto("bc_format_get_info", [_P, _P, ctypes.POINTER(FormatInfo)])
bc_qtensor_layout = _proto("bc_qtensor_layout", [_P, _P, _I64, _I64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(QLayout)])
bc_scale_swizzle = _proto("bc_scale_swizzle", [_P, _P, _I64, _I64, ctypes.c_int, _P, ctypes.c_int, _P, _P])
bc_amax = _proto("bc_amax", [_P, ctypes.POINTER(Tensor), _P, _P])
bc_compute_scale = _proto("bc_compute_scale", [_P, _P, _P, _P, _P, _P])
bc_quantize = _proto("bc_quantize", [_P, ctypes.POINTER(Tensor), ctypes.POINTER(QTensor), _P])
bc_quantize_cast = _proto("bc_quantize_cast", [_P, ctypes.POINTER(Tensor), ctypes.POINTER(QTensor), _P])
bc_quantize_list = _proto("bc_quantize_list", [_P, _I64, ctypes.POINTER(Tensor), ctypes.POINTER(QTensor), _P])
bc_dequantize = _proto("bc_dequantize", [_P, ctypes.POINTER(QTensor), ctypes.c_int, ctypes.POINTER(Tensor), _P])
bc_delayed_scale_update = _proto("bc_delayed_scale_update", [_P, _P, _I64, ctypes.c_int, _P, _P, _P, ctypes.c_int,
                                                             ctypes.c_int, _P])
bc_ref_delayed_scale_update = _proto("bc_ref_delayed_scale_update", [_P, _P, _I64, ctypes.c_int, _P, _P, _P,
                                                                     ctypes.c_int, ctypes.c_int])
bc_ref_encode = _proto("bc_ref_encode", [_P, _P, ctypes.c_float, ctypes.POINTER(ctypes.c_uint8)])
bc_ref_decode = _proto("bc_ref_decode", [_P, _P, ctypes.c_uint8, ctypes.POINTER(ctypes.c_float)])
bc_ref_scale = _proto("bc_ref_scale", [_P, _P, ctypes.c_float, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)])
bc_ref_amax = _proto("bc_ref_amax", [_P, ctypes.POINTER(Tensor), ctypes.POINTER(ctypes.c_float)])
bc_ref_quantize = _proto("bc_ref_quantize", [_P, ctypes.POINTER(Tensor), ctypes.POINTER(QTensor)])
bc_ref_quantize_cast = _proto("bc_ref_quantize_cast", [_P, ctypes.POINTER(Tensor), ctypes.POINTER(QTensor)])
bc_ref_dequantize = _proto("bc_ref_dequantize", [_P, ctypes.POINTER(QTensor), ctypes.c_int, ctypes.POINTER(Tensor)])


class GroupOffsets(ctypes.Structure):
    _fields_ = [("rowwise_data", ctypes.c_size_t), ("rowwise_scale_inv", ctypes.c_size_t),
                ("columnwise_data", ctypes.c_size_t), ("columnwise_scale_inv", ctypes.c_size_t)]


bc_grouped_layout = _proto("bc_grouped_layout", [_P, _P, _I64, c_int64_p, _I64, ctypes.c_int, ctypes.c_int,
                                                 ctypes.POINTER(GroupOffsets)])
bc_quantize_grouped = _proto("bc_quantize_grouped", [_P, ctypes.POINTER(Tensor), _I64, c_int64_p, ctypes.POINTER(QTensor), _P])
bc_ref_quantize_grouped = _proto("bc_ref_quantize_grouped", [_P, ctypes.POINTER(Tensor), _I64, c_int64_p,
                                                             ctypes.POINTER(QTensor)])


class CommInfo(ctypes.Structure):
    _fields_ = [("transport", ctypes.c_int), ("rank", ctypes.c_int), ("size", ctypes.c_int),
                ("collectives", ctypes.c_uint64), ("bytes_sent", ctypes.c_uint64)]


_PP = ctypes.POINTER(_P)
bc_comm_id_create = _proto("bc_comm_id_create", [_P, ctypes.c_char_p])
bc_comm_id_to_string = _proto("bc_comm_id_to_string", [_P, ctypes.c_char_p, ctypes.c_char_p])
bc_comm_create_local = _proto("bc_comm_create_local", [_P, ctypes.c_int, _PP])
bc_comm_bootstrap = _proto("bc_comm_bootstrap", [_P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_double, _PP])
bc_comm_wrap_nccl = _proto("bc_comm_wrap_nccl", [_P, _P, _PP])
bc_comm_destroy = _proto("bc_comm_destroy", [_P], None)
bc_comm_get_info = _proto("bc_comm_get_info", [_P, _P, ctypes.POINTER(CommInfo)])
bc_amax_allreduce = _proto("bc_amax_allreduce", [_P, _P, _P, _I64, _P])
bc_quantize_comm = _proto("bc_quantize_comm", [_P, _P, ctypes.POINTER(Tensor), ctypes.POINTER(QTensor), _P])
bc_all_gather = _proto("bc_all_gather", [_P, _P, ctypes.POINTER(Tensor), c_int64_p, ctypes.POINTER(QTensor), _P])
bc_all_gather_quantized = _proto("bc_all_gather_quantized", [_P, _P, ctypes.POINTER(QTensor), c_int64_p,
                                                             ctypes.POINTER(QTensor), _P])


class Shard(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("start", ctypes.c_int64), ("len", ctypes.c_int64),
                ("given_scale", ctypes.c_int)]


bc_shard_cast = _proto("bc_shard_cast", [_P, _P, _I64, ctypes.POINTER(Shard), ctypes.POINTER(QTensor), _P])
bc_shard_finish = _proto("bc_shard_finish", [_P, _I64, ctypes.POINTER(QTensor), _P])
BC_TRANSPORTS = {1: "nccl", 2: "local"}


def _create():
    h = _P()
    err = ctypes.create_string_buffer(4096)
    s = bc_ctx_create(ctypes.byref(h), err, len(err))
    if s != BC_OK:
        raise BlockcastError(STATUS_NAMES[s] if 0 <= s < len(STATUS_NAMES) else str(s), err.value.decode(errors="replace"))
    return h


# One context for the process. The library keeps the last error's message per thread and
# context, so calls from several threads need no lock here (ctypes releases the GIL during a
# call): the rank threads of a local communicator wait for each other inside the library.
ctx = _create()


def call(fn, *args):
    """fn(ctx, *args); a failure raises BlockcastError with the library's message."""
    s = fn(ctx, *args)
    if s != BC_OK:
        raise BlockcastError(STATUS_NAMES[s] if 0 <= s < len(STATUS_NAMES) else str(s),
                             bc_last_error(ctx).decode(errors="replace"))
