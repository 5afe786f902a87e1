"""The former name of `attnlab.torch_compile` (`compile=True`: torch.compile with an eager
fallback), kept while code still imports it from here; import `attnlab.torch_compile`."""
from __future__ import annotations

from .torch_compile import CompileWarning, Compiled, compile_options, maybe_compile

__all__ = ["CompileWarning", "Compiled", "compile_options", "maybe_compile"]
