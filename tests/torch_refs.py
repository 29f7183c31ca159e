"""PyTorch reference outputs for the parity tests, computed live or read from a recording.

Every parity test obtains torch's side of a comparison through one call::

    ref = torch_ref(inputs, compute, name="")   # the fixture in conftest.py

``compute()`` runs PyTorch and returns a dict of arrays (tensors are converted to numpy);
``inputs`` is everything torch's result depends on that the test generates itself (sample
arrays, attrs, initial weights, batches). The reference is keyed by the test's name plus
``name`` and lives in ``tests/data/torch_<test module>.npz``. Three modes:

- torch importable (CI installs torch==2.13.0): ``compute()`` runs live, as before. The
  recording must still exist and fit the inputs (else the test errors at teardown, after its
  own comparison), so a changed test cannot leave stale recordings behind for machines
  without torch.
- ``pytest --record-torch-refs`` (``tests/record_torch_refs.py`` runs it): live, and the
  results are written at the end of the session (entries of tests that did not run are kept).
- no torch: the recorded outputs are returned. A missing entry fails and says to regenerate;
  so does an entry recorded for different inputs.

Only torch's outputs are stored (compressed npz, no pickles); inputs are regenerated from
seeds and checked against a *fingerprint* stored with each entry: a hash of the structure
(shapes, dtypes, attrs, integer and bool data, and the places of NaN and +-inf, exactly) plus
three float64 moments of the finite values of every floating-point array (sum |x|, sum x,
sum x*w with fixed weights). The moments are compared
to 1e-6 of the array's scale rather than hashed, so a last-bit difference from another numpy
build (seeded inputs that go through einsum or a reduction) does not read as a changed test.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

DATA_DIR = Path(__file__).resolve().parent / "data"
RECORD_OPTION = "--record-torch-refs"
REGENERATE = f"regenerate with `python tests/record_torch_refs.py` (torch==2.13.0) or `pytest {RECORD_OPTION}`"
SEP = "::"  # npz member names are "<test>[::<name>]::<output>"
MOMENT_TOL = 1e-6


def fingerprint(inputs) -> tuple[str, np.ndarray]:
    """(short hash of everything but float values, float64 moments of the float arrays)."""
    h = hashlib.sha256()
    moments: list[float] = []

    def walk(obj):
        if isinstance(obj, dict):
            h.update(b"{")
            for k, v in obj.items():
                h.update(repr(k).encode())
                walk(v)
            h.update(b"}")
        elif isinstance(obj, (list, tuple)):
            h.update(b"[")
            for v in obj:
                walk(v)
            h.update(b"]")
        elif isinstance(obj, (np.ndarray, np.generic)):
            a = np.asarray(obj)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            if a.dtype.kind == "f":
                x = a.astype(np.float64).ravel()
                special = ~np.isfinite(x)
                if special.any():  # NaN and +-inf: where and which exactly, the finite values by moments
                    h.update(np.flatnonzero(special).tobytes())
                    h.update(np.where(np.isnan(x[special]), 0, np.sign(x[special])).tobytes())
                    x = np.where(special, 0.0, x)
                w = np.arange(x.size) % 13 - 6.0  # integer weights: a permutation changes the moment
                moments.extend([np.abs(x).sum(), x.sum(), x @ w])
            else:
                h.update(np.ascontiguousarray(a).tobytes())
        elif hasattr(obj, "detach"):
            raise TypeError("fingerprint numpy inputs, not torch tensors (they must exist without torch)")
        else:  # python scalars, strings, None
            h.update(repr(obj).encode())

    walk(inputs)
    return h.hexdigest()[:16], np.array(moments, np.float64)


def _moments_match(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    scale = 1.0 + 6.0 * np.repeat(want[0::3], 3)  # sum |x| bounds all three moments (|w| <= 6)
    return bool(np.all(np.abs(got - want) <= MOMENT_TOL * scale))


def _to_numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


@dataclass
class _Entry:
    """One reference: its inputs' fingerprint and torch's outputs (arrays, or npz member names
    for entries still on disk)."""

    sha: str
    moments: np.ndarray
    outputs: dict


class RefStore:
    """The reference files of one pytest session. ``mode``: "live", "record" or "replay".

    File layout (one npz per test module), tables first, so that the zip holds few members
    with short names (per-member overhead, not data, dominated a naive layout):

    - ``#keys``, ``#sha``, ``#moments``, ``#moments-end``: every entry's key and fingerprint;
    - ``#outputs`` ("<key>::<output>" per output, entry by entry, in recorded order) and
      ``#arrays`` (each output's array number);
    - ``0``, ``1``, ...: the distinct arrays. Identical outputs (a parameter that no forward
      changes, the state after every eval-mode step) are stored once.
    """

    def __init__(self, mode: str, directory: Path = DATA_DIR):
        assert mode in ("live", "record", "replay")
        self.mode, self.directory = mode, directory
        self._entries: dict[str, dict[str, _Entry]] = {}  # module -> key -> entry
        self._npz: dict[str, np.lib.npyio.NpzFile] = {}
        self._recorded: set[tuple[str, str]] = set()
        self.stale: list[str] = []  # live mode: recordings that no longer fit, for the fixture

    def path(self, module: str) -> Path:
        return self.directory / f"torch_{module}.npz"

    def _load(self, module: str) -> dict[str, _Entry]:
        if module not in self._entries:
            entries: dict[str, _Entry] = {}
            if self.path(module).exists():
                npz = self._npz[module] = np.load(self.path(module), allow_pickle=False)
                moments = np.split(npz["#moments"], npz["#moments-end"][:-1])
                for key, sha, mom in zip(npz["#keys"].tolist(), npz["#sha"].tolist(), moments):
                    entries[key] = _Entry(sha, mom, {})
                for output, number in zip(npz["#outputs"].tolist(), npz["#arrays"].tolist()):
                    key, name = output.rsplit(SEP, 1)
                    entries[key].outputs[name] = str(number)
            self._entries[module] = entries
        return self._entries[module]

    def _array(self, module: str, value) -> np.ndarray:
        return self._npz[module][value] if isinstance(value, str) else value

    def _problem(self, module: str, key: str, fp: tuple[str, np.ndarray]) -> str | None:
        """Why the recording cannot serve as torch's output for these inputs (None: it can)."""
        entry = self._load(module).get(key)
        where = f"tests/data/{self.path(module).name} [{key}]"
        if entry is None:
            return f"no recorded PyTorch reference for {where}: {REGENERATE}"
        if entry.sha != fp[0] or not _moments_match(fp[1], entry.moments):
            return (f"the PyTorch reference {where} was recorded for different inputs "
                    f"(the test or its seeded inputs changed): {REGENERATE}")
        return None

    def get(self, module: str, key: str, inputs, compute: Callable[[], dict]) -> dict[str, np.ndarray]:
        fp = fingerprint(inputs)
        if self.mode == "replay":
            problem = self._problem(module, key, fp)
            if problem:  # a failure, never a skip: the parity check would silently vanish
                pytest.fail(problem)
            return {name: self._array(module, v) for name, v in self._entries[module][key].outputs.items()}
        outputs = {name: _to_numpy(v) for name, v in compute().items()}
        assert all(SEP not in n and not n.startswith("#") for n in outputs), f"bad output names {list(outputs)}"
        if self.mode == "live":
            # reported after the test (conftest), so that its own comparison is seen first
            problem = self._problem(module, key, fp)
            if problem:
                self.stale.append(problem)
        else:
            self._load(module)[key] = _Entry(fp[0], fp[1], {n: np.array(v, order="C") for n, v in outputs.items()})
            self._recorded.add((module, key))
        return outputs

    def save(self) -> list[Path]:
        """Write the files with recorded entries (entries of tests that did not run are kept)."""
        written = []
        for module in sorted({m for m, _ in self._recorded}):
            entries = dict(sorted(self._load(module).items()))
            outputs, numbers, arrays, seen = [], [], {}, {}
            for key, entry in entries.items():
                for name, value in entry.outputs.items():
                    a = self._array(module, value)
                    digest = (a.dtype.str, a.shape, hashlib.sha256(a.tobytes()).hexdigest())
                    if digest not in seen:
                        seen[digest] = str(len(seen))
                        arrays[seen[digest]] = a
                    outputs.append(f"{key}{SEP}{name}")
                    numbers.append(int(seen[digest]))
            members = {
                "#keys": np.array(list(entries)), "#sha": np.array([e.sha for e in entries.values()]),
                "#moments": np.concatenate([e.moments for e in entries.values()]),
                "#moments-end": np.cumsum([e.moments.size for e in entries.values()], dtype=np.int64),
                "#outputs": np.array(outputs), "#arrays": np.array(numbers, np.int64), **arrays,
            }
            if module in self._npz:
                self._npz.pop(module).close()
            self.directory.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(self.path(module), **members)
            del self._entries[module]
            written.append(self.path(module))
        return written


def torch_steps(optimizer, loss_of, batches):
    """PyTorch's eager training loop, the reference for graphc's compiled steps: for each numpy
    ``(x, y)`` batch, zero_grad, ``loss_of(x, y)`` on torch tensors, backward, step; yields
    ``(index, loss)`` after each step for the caller to record what it compares."""
    import torch

    for index, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = loss_of(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        optimizer.step()
        yield index, loss
