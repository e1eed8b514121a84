"""One compiled Stan model with data: log density, gradients, transforms, batched.

A thin ctypes layer over the C ABI of ``csrc/bridge.hpp``.  Argument types are
declared once per library; the hot path passes raw array addresses (about a
microsecond per call), after checking shapes in Python so that a wrong shape
fails here and not in C.  Batched methods evaluate an (n, d) array in one call,
spread over threads; their results do not depend on the thread count.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .compile import DEFAULT_STANC_ARGS, CompiledModel, Program, compile_model
from .data import DataLike, to_json_value, to_stan_json
from ..errors import InputError, StanDataError, StanEvaluationError

__all__ = ["StanModel", "Library", "load_library", "variable_shapes", "as_points",
           "output_array"]

logger = logging.getLogger("bread_stan")

_p = ctypes.c_void_p
_b = ctypes.c_bool
_i = ctypes.c_int
_d = ctypes.c_double
_err = ctypes.POINTER(ctypes.c_char_p)
_dptr = ctypes.POINTER(ctypes.c_double)

_SIGNATURES: dict[str, tuple[Any, list]] = {
    "bs_model_construct": (_p, [ctypes.c_char_p, ctypes.c_uint, _err]),
    "bs_model_destruct": (None, [_p]),
    "bs_free_error_msg": (None, [_p]),
    "bs_name": (ctypes.c_char_p, [_p]),
    "bs_model_info": (ctypes.c_char_p, [_p]),
    "bs_param_names": (ctypes.c_char_p, [_p, _b, _b]),
    "bs_param_unc_names": (ctypes.c_char_p, [_p]),
    "bs_param_num": (_i, [_p, _b, _b]),
    "bs_param_unc_num": (_i, [_p]),
    "bs_param_constrain": (_i, [_p, _b, _b, _p, _p, _p, _err]),
    "bs_param_unconstrain": (_i, [_p, _p, _p, _err]),
    "bs_param_unconstrain_json": (_i, [_p, ctypes.c_char_p, _p, _err]),
    "bs_log_density": (_i, [_p, _b, _b, _p, _dptr, _err]),
    "bs_log_density_gradient": (_i, [_p, _b, _b, _p, _dptr, _p, _err]),
    "bs_log_density_hessian": (_i, [_p, _b, _b, _p, _dptr, _p, _p, _err]),
    "bs_rng_construct": (_p, [ctypes.c_uint, _err]),
    "bs_rng_destruct": (None, [_p]),
    "bread_abi_version": (_i, []),
    "bread_log_density_batch": (_i, [_p, _b, _b, _i, _p, _p, _i, _err]),
    "bread_log_density_gradient_batch": (_i, [_p, _b, _b, _i, _p, _p, _p, _i, _err]),
    "bread_split_batch": (_i, [_p, _p, _b, _i, _p, _p, _p, _p, _p, _i, _err]),
    "bread_param_unconstrain_batch": (_i, [_p, _i, _p, _p, _err]),
    "bread_param_constrain_batch": (_i, [_p, _b, _i, _p, _p, _i, _err]),
    "bread_generate_batch": (_i, [_p, ctypes.c_uint, ctypes.c_longlong, _i, _p, _p, _i,
                                  _err]),
    "bread_bench_gradient": (_i, [_p, _i, _p, _i, _dptr, _err]),
}
# The native transitions (bread_stan.stan.native) with the signatures of ABI version 4
# (a Gaussian base after the two models); absent (None) from older libraries.
_NATIVE_ABI = 4
_OPTIONAL_SIGNATURES: dict[str, tuple[Any, list]] = {
    "bread_hmc_transition": (_i, [_p, _p, _p, _b, _i, _p, _p, _p, _p, _p, _p, _p, _p, _b, _b,
                                  _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _i, _err]),
    "bread_nuts_transition": (_i, [_p, _p, _p, _b, _i, _p, _p, _p, _p, _p, _p, _p, _i, _b, _b,
                                   _p, _p, _p, _i, _p, _p, _p, _p, _p, _p, _p, _i, _err]),
}


class Library:
    """A loaded model library with its C functions typed once."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.cdll = ctypes.CDLL(str(self.path))
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(self.cdll, name)
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, name, function)
        native = self.bread_abi_version() >= _NATIVE_ABI
        for name, (restype, argtypes) in _OPTIONAL_SIGNATURES.items():
            function = getattr(self.cdll, name, None) if native else None
            if function is not None:
                function.restype = restype
                function.argtypes = argtypes
            setattr(self, name, function)

    def take_error(self, err: ctypes.c_char_p) -> str:
        """The message behind ``err`` (freed), or a placeholder when there is none."""
        if not err:
            return "unknown error (no message from Stan)"
        address = ctypes.cast(err, ctypes.c_void_p).value
        message = ctypes.string_at(address).decode("utf-8", "replace")
        self.bs_free_error_msg(address)
        return message


@functools.lru_cache(maxsize=None)
def load_library(path: str | os.PathLike) -> Library:
    """The :class:`Library` at ``path`` (loaded once per process)."""
    return Library(Path(path))


def variable_shapes(names: Sequence[str]) -> list[tuple[str, tuple[int, ...]]]:
    """Variables and their shapes from Stan's flat indexed names ("beta.2.1").

    The flat order is column-major within each variable.  Names whose indices
    are not all integers (complex parts, tuples) give a flat shape.
    """
    out: list[tuple[str, list[int] | None, int]] = []
    for full in names:
        base, _, rest = full.partition(".")
        parts = rest.split(".") if rest else []
        if out and out[-1][0] == base:
            name, shape, count = out[-1]
            if shape is not None and all(p.isdigit() for p in parts) and len(parts) == len(shape):
                shape = [max(s, int(p)) for s, p in zip(shape, parts)]
            else:
                shape = None
            out[-1] = (name, shape, count + 1)
        else:
            shape = [int(p) for p in parts] if all(p.isdigit() for p in parts) else None
            out.append((base, shape, 1))
    return [(n, tuple(s) if s is not None and int(np.prod(s)) == c else (c,))
            for n, s, c in out]


def unflatten_draws(flat: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Flat draws (n, outputs) in Stan's order as a dict name -> ``(n, *stan_shape)``."""
    flat = np.asarray(flat, dtype=np.float64)
    flat = flat[None, :] if flat.ndim == 1 else flat
    n = flat.shape[0]
    draws, column = {}, 0
    for name, shape in variable_shapes(names):
        size = int(np.prod(shape))
        block = flat[:, column:column + size]
        column += size
        # Stan's flat order is column-major within a variable.
        value = block.reshape((n, *shape[::-1])).transpose(0, *range(len(shape), 0, -1))
        draws[name] = np.ascontiguousarray(value)
    return draws


def _address(array: np.ndarray) -> int:
    """Address of an array's data (three times faster than ``array.ctypes.data``)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty buffer
        return array.ctypes.data


def as_points(points: np.ndarray, d: int) -> np.ndarray:
    """``points`` as a C-contiguous float64 (n, d) array; a one-line error otherwise."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != d:
        raise InputError(f"expected an array of shape (n, {d}), got {points.shape}")
    return points


def _as_vector(u: np.ndarray, d: int) -> np.ndarray:
    u = np.ascontiguousarray(u, dtype=np.float64)
    if u.shape != (d,):
        raise InputError(f"expected an array of shape ({d},), got {u.shape}")
    return u


def output_array(out: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """A new float64 array of ``shape``, or ``out`` checked to be one a C call can fill."""
    if out is None:
        return np.empty(shape)
    if out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise InputError(f"out must be a writeable C-contiguous float64 array of shape {shape}")
    return out


class StanModel:
    """A Stan model with its data, evaluated through the bread_stan bridge.

    ``program`` is a ``.stan`` path, program text, or a :class:`CompiledModel`;
    ``data`` a dict (numbers, lists, numpy or pandas values) or a JSON path.
    ``threads`` is the default thread count of batched calls (None: all cores).
    Compile options (``stanc_args``, ``cxxflags``, ``user_header``) go to
    :func:`bread_stan.stan.compile.compile_model`.

    Unlike ``bridgestan.StanModel``, whose density methods default to
    ``propto=True`` (constants dropped), every density method here defaults to
    ``propto=False``: the normalising constants are kept, since log p(y) and the
    bounds on it are only right with them (dropping them shifts the prior and
    the likelihood apart and breaks the sandwich).  Pass ``propto=True`` for
    BridgeStan's numbers.
    """

    def __init__(self, program: str | os.PathLike | Program | CompiledModel,
                 data: DataLike = None, *, seed: int = 0, threads: int | None = None,
                 stanc_args: Sequence[str] = DEFAULT_STANC_ARGS, **compile_options):
        if not isinstance(program, CompiledModel):
            program = compile_model(program, stanc_args=stanc_args, **compile_options)
        self.compiled = program
        self.threads = 0 if threads is None else int(threads)
        self.lib = load_library(str(program.library))
        int_vars = {k for k, v in program.data_variables.items() if v.get("type") == "int"}
        self.data_json = to_stan_json(data, int_variables=int_vars)
        err = ctypes.c_char_p()
        self._ptr = self.lib.bs_model_construct(self.data_json.encode(), seed,
                                                ctypes.byref(err))
        if not self._ptr:
            message = self.lib.take_error(err)
            given = json.loads(self.data_json)
            missing = [k for k in program.data_variables if k not in given]
            hint = (f"\nThe data lack the variable(s) {missing} declared in the program's "
                    "data block." if missing else "")
            raise StanDataError(f"Stan could not build model {program.program.name} from "
                                f"the data:\n{message}{hint}")
        self.dim = self.lib.bs_param_unc_num(self._ptr)
        self.last_errors: dict[int, str] = {}

    def __del__(self):
        if getattr(self, "_ptr", None):
            self.lib.bs_model_destruct(self._ptr)
            self._ptr = None

    def __repr__(self) -> str:
        if not getattr(self, "_ptr", None):
            return "StanModel(<not constructed>)"
        return f"StanModel({self.name!r}, dim={self.dim})"

    # -- description -------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.lib.bs_name(self._ptr).decode()

    def model_info(self) -> str:
        """Versions and compile flags of the library."""
        return self.lib.bs_model_info(self._ptr).decode()

    def param_num(self, include_tp: bool = False, include_gq: bool = False) -> int:
        """Number of constrained parameters (optionally with tp / gq)."""
        return self.lib.bs_param_num(self._ptr, include_tp, include_gq)

    def param_unc_num(self) -> int:
        """Number of unconstrained parameters (the dimension ``d``)."""
        return self.dim

    def param_names(self, include_tp: bool = False, include_gq: bool = False) -> list[str]:
        """Indexed names of the constrained parameters, e.g. ``beta.1``."""
        text = self.lib.bs_param_names(self._ptr, include_tp, include_gq).decode()
        return text.split(",") if text else []

    def param_unc_names(self) -> list[str]:
        """Indexed names of the unconstrained parameters."""
        text = self.lib.bs_param_unc_names(self._ptr).decode()
        return text.split(",") if text else []

    # -- errors ------------------------------------------------------------------

    def _raise(self, err: ctypes.c_char_p, what: str) -> None:
        raise StanEvaluationError(f"{what} failed in model {self.name}: "
                                  f"{self.lib.take_error(err)}")

    def _batch_status(self, rc: int, err: ctypes.c_char_p, what: str) -> None:
        """Record per-point failures of a batched call (or raise if the call failed)."""
        if rc == 0:
            self.last_errors = {}
            return
        if rc < 0:
            self._raise(err, what)
        errors = {}
        for line in self.lib.take_error(err).splitlines():
            index, _, message = line.partition("\t")
            errors[int(index)] = message
        self.last_errors = errors
        logger.debug("%s: %d point(s) failed, first: %s", what, rc,
                     next(iter(errors.values()), ""))

    def _threads(self, threads: int | None) -> int:
        return self.threads if threads is None else int(threads)

    # -- single points -------------------------------------------------------------

    def log_density(self, u: np.ndarray, *, propto: bool = False,
                    jacobian: bool = True) -> float:
        """Log density at the unconstrained point ``u``; raises on a Stan error.

        ``propto`` defaults to False (constants kept), where BridgeStan's
        same-named method defaults to True: see the class docstring."""
        u = _as_vector(u, self.dim)
        lp, err = ctypes.c_double(), ctypes.c_char_p()
        if self.lib.bs_log_density(self._ptr, propto, jacobian, _address(u),
                                   ctypes.byref(lp), ctypes.byref(err)):
            self._raise(err, "log_density")
        return lp.value

    def log_density_gradient(self, u: np.ndarray, *, propto: bool = False,
                             jacobian: bool = True, out: np.ndarray | None = None
                             ) -> tuple[float, np.ndarray]:
        """Log density and its gradient at ``u`` (gradient written to ``out`` if given)."""
        u = _as_vector(u, self.dim)
        grad = output_array(out, (self.dim,))
        lp, err = ctypes.c_double(), ctypes.c_char_p()
        if self.lib.bs_log_density_gradient(self._ptr, propto, jacobian, _address(u),
                                            ctypes.byref(lp), _address(grad),
                                            ctypes.byref(err)):
            self._raise(err, "log_density_gradient")
        return lp.value, grad

    def log_density_hessian(self, u: np.ndarray, *, propto: bool = False,
                            jacobian: bool = True) -> tuple[float, np.ndarray, np.ndarray]:
        """Log density, gradient and Hessian (finite differences of gradients)."""
        u = _as_vector(u, self.dim)
        grad, hess = np.empty(self.dim), np.empty((self.dim, self.dim))
        lp, err = ctypes.c_double(), ctypes.c_char_p()
        if self.lib.bs_log_density_hessian(self._ptr, propto, jacobian, _address(u),
                                           ctypes.byref(lp), _address(grad),
                                           _address(hess), ctypes.byref(err)):
            self._raise(err, "log_density_hessian")
        return lp.value, grad, hess

    # -- calls for the rest of the Stan layer: every ctypes call stays in this module ---

    def generate_batch(self, seed: int, first: int, out: np.ndarray,
                       threads: int | None = None) -> int:
        """Draws ``first .. first + len(out) - 1`` of a simulator program (no parameters)
        written into the C-contiguous (n, outputs) ``out``.  Returns how many draws
        failed (their messages in ``last_errors``, which is left as it was when none
        did); raises if the call itself failed."""
        err, empty = ctypes.c_char_p(), np.empty((1, 0))
        rc = self.lib.bread_generate_batch(self._ptr, int(seed), int(first), out.shape[0],
                                           _address(empty), _address(out),
                                           self._threads(threads), ctypes.byref(err))
        if rc:
            self._batch_status(rc, err, "simulate")
        return rc

    def split_batch(self, prior: "StanModel", points: np.ndarray, log_prior: np.ndarray,
                    log_lik: np.ndarray, grad_prior: np.ndarray | None,
                    grad_lik: np.ndarray | None, threads: int, what: str) -> None:
        """Log prior (from ``prior``, this program's ``prior_only`` twin) and log
        likelihood (this model's density minus the prior), with their gradients when
        ``grad_*`` are given, of the (n, d) ``points`` in one call, written into the
        arrays given; per-point failures in ``last_errors``."""
        err = ctypes.c_char_p()
        rc = self.lib.bread_split_batch(
            prior._ptr, self._ptr, True, points.shape[0], _address(points),
            _address(log_prior), _address(log_lik),
            None if grad_prior is None else _address(grad_prior),
            None if grad_lik is None else _address(grad_lik), threads, ctypes.byref(err))
        self._batch_status(rc, err, what)

    def native_transition(self, function: str, prior: "StanModel | None", args: Sequence,
                          threads: int) -> None:
        """Call the bridge's native kernel ``function`` (``bread_hmc_transition``,
        ``bread_nuts_transition``; see ``bridge.hpp``) on this model and its ``prior``
        twin: ``args`` in the C order, arrays passed by address, ``None`` as a null
        pointer, numbers as they are; raises with Stan's message if it failed."""
        err = ctypes.c_char_p()
        rc = getattr(self.lib, function)(
            None if prior is None else prior._ptr, self._ptr,
            *(_address(a) if isinstance(a, np.ndarray) else a for a in args),
            threads, ctypes.byref(err))
        if rc:
            self._raise(err, "native transition")

    # -- batches -----------------------------------------------------------------------

    def log_density_batch(self, points: np.ndarray, *, propto: bool = False,
                          jacobian: bool = True, out: np.ndarray | None = None,
                          threads: int | None = None) -> np.ndarray:
        """Log densities of the rows of ``points`` (n, d); failed points -> -inf/NaN.

        Messages of failed points are in ``self.last_errors`` (index -> message).
        """
        points = as_points(points, self.dim)
        n = points.shape[0]
        lp, err = output_array(out, (n,)), ctypes.c_char_p()
        rc = self.lib.bread_log_density_batch(self._ptr, propto, jacobian, n,
                                              _address(points), _address(lp),
                                              self._threads(threads), ctypes.byref(err))
        self._batch_status(rc, err, "log_density_batch")
        return lp

    def log_density_gradient_batch(self, points: np.ndarray, *, propto: bool = False,
                                   jacobian: bool = True,
                                   out: tuple[np.ndarray, np.ndarray] | None = None,
                                   threads: int | None = None
                                   ) -> tuple[np.ndarray, np.ndarray]:
        """Log densities (n,) and gradients (n, d) of the rows of ``points``."""
        points = as_points(points, self.dim)
        n = points.shape[0]
        lp_out, grad_out = out if out is not None else (None, None)
        lp, grad = output_array(lp_out, (n,)), output_array(grad_out, (n, self.dim))
        err = ctypes.c_char_p()
        rc = self.lib.bread_log_density_gradient_batch(
            self._ptr, propto, jacobian, n, _address(points), _address(lp),
            _address(grad), self._threads(threads), ctypes.byref(err))
        self._batch_status(rc, err, "log_density_gradient_batch")
        return lp, grad

    def bench_gradient(self, points: np.ndarray, repeats: int = 1) -> float:
        """Seconds per gradient of the tight C++ loop over ``points`` (benchmarks)."""
        points = as_points(points, self.dim)
        seconds, err = ctypes.c_double(), ctypes.c_char_p()
        if self.lib.bread_bench_gradient(self._ptr, points.shape[0], _address(points),
                                         repeats, ctypes.byref(seconds), ctypes.byref(err)):
            self._raise(err, "bench_gradient")
        return abs(seconds.value) / (repeats * points.shape[0])

    # -- transforms ------------------------------------------------------------------------

    def param_constrain(self, u: np.ndarray, include_tp: bool = False,
                        include_gq: bool = False, *, seed: int | None = None,
                        threads: int | None = None) -> np.ndarray:
        """Constrained values (flat, Stan's order) of ``u`` (d,) or of each row of (n, d).

        Generated quantities need ``seed``; row i then uses the Stan RNG stream
        (seed, i + 1), so results do not depend on batching.
        """
        if include_gq and seed is None:
            raise InputError("include_gq=True needs a seed for the generated quantities")
        u = np.ascontiguousarray(u, dtype=np.float64)
        single = u.ndim == 1
        points = as_points(u[None, :] if single else u, self.dim)
        n = points.shape[0]
        err = ctypes.c_char_p()
        if include_gq:
            everything = np.empty((n, self.param_num(True, True)))
            rc = self.lib.bread_generate_batch(self._ptr, int(seed), 0, n,
                                               _address(points), _address(everything),
                                               self._threads(threads), ctypes.byref(err))
            if include_tp:
                out = everything
            else:
                keep = set(self.param_names(False, True))
                out = everything[:, [i for i, name in enumerate(self.param_names(True, True))
                                     if name in keep]]
        else:
            out = np.empty((n, self.param_num(include_tp, False)))
            rc = self.lib.bread_param_constrain_batch(self._ptr, include_tp, n,
                                                      _address(points), _address(out),
                                                      self._threads(threads),
                                                      ctypes.byref(err))
        self._batch_status(rc, err, "param_constrain")
        if rc and single:
            raise StanEvaluationError(f"param_constrain failed in model {self.name}: "
                                      f"{self.last_errors[0]}")
        return out[0] if single else out

    def param_unconstrain(self, values: Mapping[str, Any]) -> np.ndarray:
        """The unconstrained vector (d,) of a dict of constrained values in Stan's shapes."""
        text = json.dumps({k: to_json_value(v, name=k) for k, v in values.items()})
        out, err = np.empty(self.dim), ctypes.c_char_p()
        if self.lib.bs_param_unconstrain_json(self._ptr, text.encode(), _address(out),
                                              ctypes.byref(err)):
            raise StanDataError(f"cannot unconstrain these parameter values: "
                                f"{self.lib.take_error(err)}")
        return out

    def param_unconstrain_batch(self, values: Mapping[str, Any]) -> np.ndarray:
        """Unconstrained vectors (n, d) of a dict whose arrays have a leading draw axis n."""
        shapes = variable_shapes(self.param_names())
        missing = [name for name, _ in shapes if name not in values]
        if missing:
            raise StanDataError(f"parameter values missing for {missing}")
        n = len(np.asarray(values[shapes[0][0]])) if shapes else 0
        columns = []
        for name, shape in shapes:
            array = np.asarray(values[name], dtype=np.float64)
            if array.shape != (n, *shape) and array.size == n * int(np.prod(shape)):
                array = array.reshape((n, *shape))
            if array.shape != (n, *shape):
                raise StanDataError(f"parameter {name!r} has shape {array.shape[1:]} per draw,"
                                    f" the model declares {shape}")
            # Stan's flat order is column-major: reverse the axes, then read row-major.
            axes = (0, *range(array.ndim - 1, 0, -1))
            columns.append(array.transpose(axes).reshape(n, -1))
        flat = np.ascontiguousarray(np.concatenate(columns, axis=1) if columns
                                    else np.empty((n, 0)))
        out, err = np.empty((n, self.dim)), ctypes.c_char_p()
        if self.lib.bread_param_unconstrain_batch(self._ptr, n, _address(flat),
                                                  _address(out), ctypes.byref(err)):
            raise StanDataError(f"cannot unconstrain these parameter values: "
                                f"{self.lib.take_error(err)}")
        return out
