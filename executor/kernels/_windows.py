"""Window geometry shared by the convolution, depthwise and pooling kernels: padding into a
persistent buffer, and strided views of every kernel offset's window."""
from __future__ import annotations


def im2col(xp, x, kernel, stride, dilation, out_hw):
    """View ``x`` (n, c, H, W) as windows (n, c, kh, kw, oh, ow) without copying."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    s0, s1, s2, s3 = x.strides
    return xp.lib.stride_tricks.as_strided(
        x, shape=(x.shape[0], x.shape[1], kh, kw, oh, ow),
        strides=(s0, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw))


class Padder:
    """Copies inputs into a persistent buffer whose border (zeros, or ``fill``) is written once."""

    def __init__(self, xp, shape, padding, dtype, fill=0.0):
        n, c, h, w = shape
        self.ph, self.pw = padding
        self.h, self.w = h, w
        self.buf = xp.full((n, c, h + 2 * self.ph, w + 2 * self.pw), fill, dtype=dtype) if any(padding) else None

    def __call__(self, x):
        if self.buf is None:
            return x
        self.buf[:, :, self.ph:self.ph + self.h, self.pw:self.pw + self.w] = x
        return self.buf


def window_views(x, kernel, stride, dilation, out_hw):
    """Yield one strided view per kernel offset, each shaped like the output."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    for i in range(kh):
        for j in range(kw):
            yield x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
