"""The torch namespace's functions, each declared once (``surface.torchsymbol``) for
``Tensor.x``, ``gc.x`` and ``F.x``: elementwise math and comparisons (``functions``), the
neural-network functions (``functions_nn``: activations, normalisation, convolution, softmax),
reductions, shape methods (``shaping``) and tensor creation (``creation``). A composite op is one
declaration here over existing ops (its gradient comes from autodiff); a primitive adds an
``OpDef`` in ir/ops/ and a kernel in executor/kernels/ (docs/architecture.md).
"""
