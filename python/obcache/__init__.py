"""Read obcache traces and write scores that obcache referees.

A trace (obcache capture, HDF5) holds, per layer, the prompt's keys K and
values V (kv_heads, positions, head_dim), the captured query rows Q and
outputs O (heads, rows, head_dim), and the model's shape, the prompt's spans
and a content hash as attributes. A score file holds one float64 dataset a
score, (layers, kv_heads, positions), and the trace's content hash, so that
obcache refuses it for another trace; `obcache evict --score
NAME=file:PATH[:DATASET]` (also replay and analyze) keeps by it like a
built-in score. docs/PYTHON.md has worked examples.

Pure Python on NumPy and h5py; `read_table` returns a pandas DataFrame
when pandas is installed."""
import csv
import os
import tempfile

import h5py
import numpy as np

__all__ = ["Trace", "write_scores", "read_table", "SCORES_SCHEMA"]

SCORES_SCHEMA = "obcache-scores/1"
_ARRAYS = ("K", "V", "Q", "O")


def _text(value):
    """An HDF5 string attribute as str (fixed-length ones are NUL-padded)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        value = value.item()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
    return str(value).rstrip("\0")


def _value(value):
    """An HDF5 attribute as a Python value: str, int, float or an array."""
    if isinstance(value, (bytes, str)):
        return _text(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "SUO":
        return _text(value)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value


class Trace:
    """An obcache trace, read lazily with h5py.

    Attributes: path, n_layers, n_heads, n_kv_heads, head_dim, n_prompt,
    content_hash, config (every root attribute, strings decoded), spans
    ({name: (begin, end)}, end exclusive), row_positions (the prompt
    position of each captured row of Q and O); tokens and candidates are
    read when asked."""

    def __init__(self, path):
        self.path = path
        self._file = h5py.File(path, "r")
        attrs = self._file.attrs
        self.config = {k: _value(v) for k, v in attrs.items()}
        for name in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "n_prompt"):
            if name not in attrs:
                raise ValueError(f"{path}: not an obcache trace (no {name} attribute)")
            setattr(self, name, int(attrs[name]))
        self.content_hash = _text(attrs["content_hash"]) if "content_hash" in attrs else ""
        spans = self._file.get("spans")
        self.spans = {name: tuple(int(x) for x in spans[name][()])
                      for name in (spans.keys() if spans is not None else [])}
        self.row_positions = self._file["row_positions"][()]

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def candidates(self):
        """Positions [0, candidates) compete under the query-agnostic
        protocol (obcache's default): those before the question span."""
        return self.spans["question"][0] if "question" in self.spans else self.n_prompt

    @property
    def tokens(self):
        """The token ids (int64): the prompt's n_prompt, then the decoded
        ones; empty when the trace has none."""
        tokens = self._file.get("tokens")
        return tokens[()].astype(np.int64) if tokens is not None else np.zeros(0, np.int64)

    def layer(self, layer, names=_ARRAYS):
        """{name: float64 array} of one layer: K and V (kv_heads, positions,
        head_dim), Q and O (heads, rows, head_dim)."""
        group = self._file[f"layers/{layer:03d}"]
        return {name: group[name][()].astype(np.float64) for name in names}


def write_scores(path, trace, scores, window=0):
    """Writes scores {name: array (n_layers, n_kv_heads, positions)} as a
    score file for trace: float64 datasets named as given, the trace's
    path and content hash, under a temporary name renamed into place, so
    that a failed write leaves no file. positions must cover the
    candidates the score is applied to."""
    if not scores:
        raise ValueError("write_scores: no scores")
    shape = (trace.n_layers, trace.n_kv_heads)
    for name, values in scores.items():
        values = np.asarray(values)
        if values.ndim != 3 or values.shape[:2] != shape:
            raise ValueError(f"{name}: shape {values.shape}, expected {shape} + (positions,)")
        if not np.isfinite(values).all():
            raise ValueError(f"{name}: NaN or infinite values")
        if "/" in name or not name:
            raise ValueError(f"{name!r}: not a dataset name")
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".scores.", suffix=".h5", dir=folder)
    os.close(fd)
    try:
        with h5py.File(temp, "w") as f:
            for name, values in scores.items():
                f.create_dataset(name, data=np.asarray(values, dtype=np.float64))
            f.attrs["schema"] = SCORES_SCHEMA
            f.attrs["trace"] = trace.path
            f.attrs["trace_hash"] = trace.content_hash
            f.attrs["window"] = np.int64(window)
            f.attrs["precision"] = "double"
            f.attrs["producer"] = "obcache python module"
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def read_table(path):
    """One of obcache's CSV tables (recall.csv, accuracy.csv, ...): a pandas
    DataFrame when pandas is installed, else a list of dicts with numbers
    converted where every value of a column is one."""
    try:
        import pandas
    except ImportError:
        pandas = None
    if pandas is not None:
        return pandas.read_csv(path)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))

    def number(text):
        try:
            return int(text)
        except ValueError:
            return float(text)

    for column in (rows[0].keys() if rows else []):
        try:
            converted = [number(r[column]) for r in rows]
        except (TypeError, ValueError):
            continue
        for r, value in zip(rows, converted):
            r[column] = value
    return rows
