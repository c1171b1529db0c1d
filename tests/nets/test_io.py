"""nets.io: atomic writes and JSON conversion of run records."""

import json
import math
import os

import numpy as np
import pytest

from nets.io import JSON_INF, atomic_write_bytes, jsonable, read_json, write_json


def test_jsonable_converts_arrays_scalars_and_non_finite_floats(tmp_path):
    obj = {
        1: np.float32(0.5),
        "a": np.arange(3),
        "nan": math.nan,
        "inf": [math.inf, -math.inf],
        "p": tmp_path,
        "s": np.array(2.0),
    }
    out = jsonable(obj)
    assert out == {
        "1": 0.5,
        "a": [0, 1, 2],
        "nan": None,
        "inf": [JSON_INF, -JSON_INF],
        "p": str(tmp_path),
        "s": 2.0,
    }
    json.dumps(out, allow_nan=False)  # strict JSON


def test_write_json_round_trips_and_leaves_no_temp_file(tmp_path):
    path = write_json(tmp_path / "sub" / "r.json", {"x": np.ones(2)})
    assert read_json(path) == {"x": [1.0, 1.0]}
    assert os.listdir(tmp_path / "sub") == ["r.json"]


def test_failed_write_keeps_the_old_file(tmp_path):
    path = atomic_write_bytes(tmp_path / "f.txt", b"old")

    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.txt"]
