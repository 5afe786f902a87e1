"""The typed public API: py.typed ships, mypy passes at the configured strictness (pyproject.toml,
[tool.mypy]), and public functions and methods do not lose annotations.

`make test` runs mypy itself before the suite; the test here runs it again (warm cache: about a
second) so that a plain `pytest` also catches a type error.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import attnlab
import attnlab.layers
import attnlab.matlab

ROOT = Path(__file__).resolve().parents[2]

# Public parameters and returns still without an annotation, per namespace, when this was
# written. The count may only go down: annotate, then lower the number.
UNANNOTATED_AT_MOST = {"attnlab": 0, "attnlab.layers": 0, "attnlab.matlab": 0}


def unannotated(module) -> list[str]:
    """`name(param)` / `name -> ?` for each public function or method lacking an annotation."""
    found = []

    def check(fn, qual):
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return
        for p in sig.parameters.values():
            if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty:
                found.append(f"{qual}({p.name})")
        if sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__":
            found.append(f"{qual} -> ?")

    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for key, value in vars(obj).items():
                if key.startswith("_") and key != "__init__":
                    continue
                fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                if inspect.isfunction(fn):
                    check(fn, f"{module.__name__}.{name}.{key}")
        elif inspect.isfunction(obj):
            check(obj, f"{module.__name__}.{name}")
    return found


def test_py_typed_ships():
    assert (ROOT / "attnlab" / "py.typed").is_file()
    assert '"attnlab" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("module", [attnlab, attnlab.layers, attnlab.matlab], ids=lambda m: m.__name__)
def test_public_annotations_do_not_regress(module):
    missing = unannotated(module)
    limit = UNANNOTATED_AT_MOST[module.__name__]
    assert len(missing) <= limit, (f"{len(missing) - limit} more public parameters/returns without "
                                   f"annotations than before: " + ", ".join(missing))


def test_unannotated_finds_a_missing_annotation():
    import types
    m = types.ModuleType("m")
    exec("def f(a, b: int) -> int: ...\ndef g(x: int): ...\n__all__ = ['f', 'g']", m.__dict__)
    assert unannotated(m) == ["m.f(a)", "m.g -> ?"]


def test_mypy_passes():
    api = pytest.importorskip("mypy.api")
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                "--cache-dir", str(ROOT / ".mypy_cache"), str(ROOT / "attnlab")])
    assert status == 0, out + err


def test_long_bytes_input_is_a_data_error():
    # found by mypy (str + bytes in the message helper): a long bytes value raised TypeError
    from attnlab import layers as L
    net = attnlab.Network([L.FeatureInput(3, name="x"), L.Dense(2, name="fc")])
    with pytest.raises(attnlab.DataError, match=r"input 'x'.*received a string b'x+\.\.\.'"):
        net.predict(b"x" * 30)
