"""Op table entries of the Fourier transforms and complex parts (ir/ops/fft.py): inputs from this
module's own seeded generator, so no other entry's inputs change. References are numpy.fft in
double precision (complex128 / float64), cast to the op's result dtype."""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, OpInfo, S, T, fortran

_RNG = np.random.default_rng(3434)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)


def _real(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _cplx(*shape, dtype=C64):
    return (_RNG.standard_normal(shape) + 1j * _RNG.standard_normal(shape)).astype(dtype)


def _complex_of(a):
    return C128 if a.dtype in (F64, C128) else C64


def _real_of(a):
    return F64 if a.dtype in (F64, C128) else F32


def _wide(a):
    return a.astype(C128 if a.dtype.kind == "c" else F64)


def _c2c_ref(ins, attrs):
    x = ins[0]
    fn = np.fft.ifftn if attrs.get("inverse") else np.fft.fftn
    return [fn(_wide(x), s=attrs["sizes"], axes=attrs["dims"], norm=attrs.get("norm")).astype(_complex_of(x))]


def _r2c_ref(ins, attrs):
    x = ins[0]
    return [np.fft.rfftn(_wide(x), s=attrs["sizes"], axes=attrs["dims"], norm=attrs.get("norm")).astype(_complex_of(x))]


def _c2r_ref(ins, attrs):
    x = ins[0]
    return [np.fft.irfftn(_wide(x), s=attrs["sizes"], axes=attrs["dims"], norm=attrs.get("norm")).astype(_real_of(x))]


def _resize_ref(ins, attrs):
    x = ins[0]
    out = np.zeros([attrs["sizes"][attrs["dims"].index(d)] if d in attrs["dims"] else n
                    for d, n in enumerate(x.shape)], x.dtype)
    keep = tuple(slice(0, min(a, b)) for a, b in zip(x.shape, out.shape))
    out[keep] = x[keep]
    return [out]


def _shift_ref(ins, attrs):
    fn = np.fft.ifftshift if attrs.get("inverse") else np.fft.fftshift
    return [fn(ins[0], axes=attrs["dims"])]


def _torch_c2c(ts, a):
    fn = T().fft.ifftn if a["inverse"] else T().fft.fftn
    return fn(ts[0], s=a["sizes"], dim=a["dims"], norm=a["norm"])


def _torch_shift(ts, a):
    return (T().fft.ifftshift if a["inverse"] else T().fft.fftshift)(ts[0], dim=a["dims"])


def transform_table() -> list[OpInfo]:
    c2c = [S([_real(3, 8)], _c2c_ref, "f32-last", {"dims": [1], "sizes": [8]}),
           S([_real(4, 5, dtype=F64)], _c2c_ref, "f64-2d-ortho", {"dims": [0, 1], "sizes": [4, 5], "norm": "ortho"}),
           S([_cplx(3, 6)], _c2c_ref, "c64-inverse-pad", {"dims": [1], "sizes": [9], "inverse": True}),
           S([fortran(_real(6, 4))], _c2c_ref, "noncontig-cut-forward",
             {"dims": [0], "sizes": [4], "norm": "forward"}, dynamic=False),
           S([_cplx(2, 3, 4, dtype=C128)], _c2c_ref, "c128-3d", {"dims": [2, 0], "sizes": [5, 2]})]
    r2c = [S([_real(3, 8)], _r2c_ref, "f32-even", {"dims": [1], "sizes": [8]}),
           S([_real(4, 5, dtype=F64)], _r2c_ref, "f64-odd-ortho", {"dims": [1], "sizes": [5], "norm": "ortho"}),
           S([fortran(_real(5, 4))], _r2c_ref, "noncontig-2d-pad", {"dims": [1, 0], "sizes": [6, 7]},
             dynamic=False),
           S([_real(2, 6)], _r2c_ref, "cut-forward", {"dims": [1], "sizes": [4], "norm": "forward"})]
    c2r = [S([_real(3, 5, dtype=F64)], _c2r_ref, "f64-real-input", {"dims": [1], "sizes": [9]}),
           S([_cplx(3, 5)], _c2r_ref, "c64-even", {"dims": [1], "sizes": [8]}),
           S([_real(3, 4, dtype=F64)], _c2r_ref, "f64-2d-ortho", {"dims": [1, 0], "sizes": [6, 2], "norm": "ortho"},
             dynamic=False),
           S([fortran(_real(4, 3))], _c2r_ref, "noncontig-forward", {"dims": [1], "sizes": [4], "norm": "forward"}),
           S([_cplx(2, 7, dtype=C128)], _c2r_ref, "c128-cut", {"dims": [1], "sizes": [6]})]
    resize = [S([_real(3, 5)], _resize_ref, "pad", {"dims": [1], "sizes": [7]}),
              S([_real(4, 5, dtype=F64)], _resize_ref, "cut-2d", {"dims": [0, 1], "sizes": [2, 3]}, dynamic=False),
              S([_cplx(3, 4)], _resize_ref, "c64-cut-pad", {"dims": [1], "sizes": [2]}),
              S([fortran(_real(4, 3))], _resize_ref, "noncontig", {"dims": [1], "sizes": [5]})]
    shift = [S([_real(5, 4)], _shift_ref, "all", {"dims": [0, 1]}),
             S([_real(3, 7, dtype=F64)], _shift_ref, "f64-odd-inverse", {"dims": [1], "inverse": True}),
             S([fortran(_real(4, 3))], _shift_ref, "noncontig", {"dims": [1]}),
             S([_cplx(5,)], _shift_ref, "c64-inverse", {"dims": [0], "inverse": True})]
    return [
        OpInfo("fft_c2c", c2c, torch=_torch_c2c),
        OpInfo("fft_r2c", r2c, torch=lambda ts, a: T().fft.rfftn(ts[0], s=a["sizes"], dim=a["dims"], norm=a["norm"])),
        OpInfo("fft_c2r", c2r, torch=lambda ts, a: T().fft.irfftn(ts[0], s=a["sizes"], dim=a["dims"], norm=a["norm"])),
        OpInfo("fft_resize", resize, no_torch="the cut/zero-pad inside torch.fft's n=/s=, and its adjoint: "
                                              "checked through the transforms' gradients (tests/test_fft.py)"),
        OpInfo("fft_shift", shift, torch=_torch_shift),
    ]


def parts_table() -> list[OpInfo]:
    real = [S([_cplx(3, 4)], lambda ins, a: [ins[0].real.copy()], "c64"),
            S([_cplx(2, 3, dtype=C128)], lambda ins, a: [ins[0].real.copy()], "c128"),
            S([fortran(_cplx(4, 3))], lambda ins, a: [ins[0].real.copy()], "noncontig"),
            S([_cplx()], lambda ins, a: [np.asarray(ins[0].real)], "0d")]
    imag = [S([_cplx(3, 4)], lambda ins, a: [ins[0].imag.copy()], "c64"),
            S([_cplx(2, 3, dtype=C128)], lambda ins, a: [ins[0].imag.copy()], "c128"),
            S([fortran(_cplx(4, 3))], lambda ins, a: [ins[0].imag.copy()], "noncontig"),
            S([_cplx()], lambda ins, a: [np.asarray(ins[0].imag)], "0d")]
    mag = [S([_cplx(3, 4)], lambda ins, a: [np.abs(ins[0])], "c64"),
           S([_cplx(2, 3, dtype=C128)], lambda ins, a: [np.abs(ins[0])], "c128"),
           S([fortran(_cplx(4, 3))], lambda ins, a: [np.abs(ins[0])], "noncontig"),
           S([np.array([0j, 1e-30 + 0j, -2j, np.inf + 1j], C64)], lambda ins, a: [np.abs(ins[0])], "zero-tiny-inf",
             grad=False)]
    conj = [S([fortran(_real(4, 3))], lambda ins, a: [ins[0].copy()], "noncontig-real"),
            S([_cplx(3, 4)], lambda ins, a: [np.conjugate(ins[0])], "c64"),
            S([_cplx(2, 3, dtype=C128)], lambda ins, a: [np.conjugate(ins[0])], "c128"),
            S([_real(3, dtype=F64)], lambda ins, a: [ins[0].copy()], "f64-real")]

    def make(ins, a):
        re, im = np.broadcast_arrays(*ins)
        return [(re.astype(F64) + 1j * im.astype(F64)).astype(_complex_of(ins[0]))]
    make_complex = [S([_real(3, 4), _real(3, 4)], make, "f32"),
                    S([_real(2, 3, dtype=F64), _real(3, dtype=F64)], make, "f64-broadcast"),
                    S([fortran(_real(4, 3)), _real(4, 3)], make, "noncontig"),
                    S([_real(), _real(2)], make, "0d-and-1d")]
    return [
        OpInfo("real", real, torch=lambda ts, a: T().real(ts[0])),
        OpInfo("imag", imag, torch=lambda ts, a: T().imag(ts[0])),
        OpInfo("complex_abs", mag, torch=lambda ts, a: T().abs(ts[0])),
        OpInfo("conj", conj, torch=lambda ts, a: T().conj_physical(ts[0])),
        OpInfo("make_complex", make_complex, torch=lambda ts, a: T().complex(ts[0], ts[1])),
    ]


def fft_table() -> list[OpInfo]:
    return transform_table() + parts_table()
