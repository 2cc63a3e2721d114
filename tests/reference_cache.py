"""Computes a Python reference once per CTest run: the @CORE twins of a
reference test (tests/CMakeLists.txt) run the same C code again with OpenBLAS
forced onto another kernel family, but what the NumPy reference computes from
the same inputs does not depend on that family beyond float64 rounding, far
below every tolerance it is held to. So a twin reads the result its test
(which runs first, CTest DEPENDS) wrote under OBC_REF_CACHE, when the key is
the same: the reference code (tests/reference_model.py and the test script),
the content of every input file and every input value. Any difference in an
input (another token from the C code under a twin's kernels, a regenerated
fixture) gives another key, and the reference is computed again.

Without OBC_REF_CACHE (a test run by hand) every call computes.
scratch_begin empties the folder at the start of each run, so every run
computes each reference once (tests/CMakeLists.txt)."""
import hashlib
import os
import pickle
import sys

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))


def _update_with_file(h, path):
    with open(path, "rb") as fp:
        for chunk in iter(lambda: fp.read(1 << 20), b""):
            h.update(chunk)


_contents = {}


def content(path):
    """A key part for a file or a folder (every file under it, names and bytes):
    its content, not its name or time (a file unchanged since is hashed once
    per process)."""
    stat = os.stat(path)
    seen = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    if seen in _contents:
        return _contents[seen]
    h = hashlib.sha256()
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                h.update(os.path.relpath(full, path).encode() + b"\0")
                _update_with_file(h, full)
    else:
        _update_with_file(h, path)
        _contents[seen] = ("content", h.hexdigest())
    return ("content", h.hexdigest())


def _update(h, part):
    if isinstance(part, np.ndarray):
        h.update(f"ndarray {part.dtype.str} {part.shape}".encode())
        h.update(np.ascontiguousarray(part).tobytes())
    elif isinstance(part, bytes):
        h.update(b"bytes %d " % len(part) + part)
    elif isinstance(part, (list, tuple)):
        h.update(f"{type(part).__name__} {len(part)}".encode())
        for item in part:
            _update(h, item)
    elif part is None or isinstance(part, (bool, int, float, str)):
        h.update(f"{type(part).__name__} {part!r}".encode())
    else:
        raise TypeError(f"reference_cache: no key for a {type(part).__name__}")
    h.update(b"\0")


def cached(name, key, compute):
    """compute(), or the value an earlier test of this run computed with the
    same name and key (a list of numbers, strings, bytes, NumPy arrays and
    content(path) parts)."""
    folder = os.environ.get("OBC_REF_CACHE")
    if not folder:
        return compute()
    h = hashlib.sha256()
    for source in (os.path.join(_HERE, "reference_model.py"), os.path.abspath(sys.argv[0])):
        _update_with_file(h, source)
    _update(h, [name, key])
    path = os.path.join(folder, f"{name}-{h.hexdigest()}.pickle")
    try:
        with open(path, "rb") as fp:
            return pickle.load(fp)
    except FileNotFoundError:
        pass
    value = compute()
    os.makedirs(folder, exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "wb") as fp:
        pickle.dump(value, fp, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(partial, path)
    return value
