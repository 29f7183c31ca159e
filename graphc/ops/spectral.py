"""``torch.stft``: the short-time Fourier transform, a composite of padding, framing (slices of
the signal, stacked), the window and ``gc.fft.rfft``/``fft``: differentiable like its parts.
The frame count depends on the signal's length, so the length must be static (a compiled
function whose signal length is its symbolic batch dim is refused)."""
from __future__ import annotations

from ..ir.errors import GraphcError, ShapeError, TraceError
from .surface import torchsymbol


def _frames(signal, n_fft: int, hop: int):
    """``(..., n_frames, n_fft)``: the windows of ``signal`` (last dim) ``hop`` apart."""
    from .creation import stack

    length = signal.dims[-1]
    if not isinstance(length, int):
        raise TraceError(f"stft of a signal along the symbolic dim {length}: the number of frames would depend on the "
                         "size at run time; compile with a fixed signal length (dynamic_batch=False) or run eagerly")
    if length < n_fft:
        raise ShapeError(f"stft: the signal ({length} samples after padding) is shorter than n_fft={n_fft}")
    count = 1 + (length - n_fft) // hop
    return stack([signal[..., t * hop:t * hop + n_fft] for t in range(count)], -2)


def _window(window, win_length: int, n_fft: int, like):
    """The window, zero-padded on both sides to ``n_fft`` (None: ones, a rectangular window)."""
    import graphc.nn.functional as F

    from .creation import ones

    if window is None:
        window = ones(win_length, dtype=like.dtype.to_real if like.dtype.is_complex else like.dtype)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise ShapeError(f"stft: expected a 1D window tensor of size equal to win_length={win_length}, "
                         f"but got window with size {tuple(window.shape)}")
    left = (n_fft - win_length) // 2
    return F.pad(window, (left, n_fft - win_length - left)) if win_length < n_fft else window


@torchsymbol(functional=False)
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """Fourier transforms of the ``n_fft``-long windows of a 1-D signal (or a batch of them):
    ``(n_fft // 2 + 1, n_frames)`` complex for a real signal (``onesided``).

    >>> import graphc as gc
    >>> gc.stft(gc.ones(16), n_fft=8, return_complex=True).shape
    (5, 9)
    """
    import graphc.nn.functional as F

    from ..fft import fft, rfft
    from .complex_ops import view_as_real

    if input.ndim not in (1, 2):
        raise ShapeError(f"stft: expected a 1D or 2D tensor, got {input.ndim}D")
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win_length = n_fft if win_length is None else int(win_length)
    if not (0 < win_length <= n_fft and hop > 0 and n_fft > 0):
        raise ShapeError(f"stft: expected 0 < win_length <= n_fft and hop_length > 0, got n_fft={n_fft}, "
                         f"hop_length={hop}, win_length={win_length}")
    complex_in = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise GraphcError("stft requires the return_complex parameter be given for real inputs, and will "
                              "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    onesided = not complex_in if onesided is None else bool(onesided)
    if onesided and complex_in:
        raise ShapeError("stft: cannot have onesided output if window or input is complex")
    signal = input if input.ndim == 2 else input.reshape(1, -1)
    if center:
        pad = n_fft // 2
        signal = F.pad(signal.reshape(signal.shape[0], 1, -1), (pad, pad), mode=pad_mode).reshape(signal.shape[0], -1)
    frames = _frames(signal, n_fft, hop) * _window(window, win_length, n_fft, input)
    norm = "ortho" if normalized else "backward"
    spectrum = (rfft if onesided else fft)(frames, dim=-1, norm=norm).transpose(-1, -2)
    if input.ndim == 1:
        spectrum = spectrum.reshape(spectrum.shape[1:])
    return spectrum if return_complex else view_as_real(spectrum)
