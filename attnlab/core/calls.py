"""Calls that do not fit a signature: Python's TypeError ("got an unexpected keyword argument")
turned into a SignatureError that names the callee, the argument, the close match among its
arguments and, where the caller knows them, the other callees that take it.

The check runs only after the call has failed, so a right call costs nothing but the wrapper.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar, cast

from attnlab.core.errors import AttnlabError, SignatureError, close_matches

F = TypeVar("F", bound=Callable[..., Any])

# other libraries' names (PyTorch, Keras) for an option attnlab has under another name:
# argument → (the attnlab argument, what to write instead)
_CAUSAL = ("attention_mask", "For causal attention use attention_mask=\"causal\".")
_ROTARY = ("rotary", "Use rotary=True, or rotary={\"base\": 10000.0, \"fraction\": 1.0, "
           "\"interleaved\": False}.")
_PROJECTION_BIAS = ("projection_bias", "Use projection_bias=False for projections without "
                    "biases (Llama, Mistral, T5).")
HABITS = {"causal": _CAUSAL, "is_causal": _CAUSAL, "use_causal_mask": _CAUSAL,
          "use_bias": ("bias", "Use bias=True or bias=False."),
          "units": ("out", "The number of outputs is out, e.g. Dense(64)."),
          "hidden_size": ("hidden", "The state size is hidden, e.g. LSTM(64)."),
          "dropout_p": ("dropout", "Use dropout=0.1."), "rate": ("p", "Use p=0.5."),
          # Hugging Face config spellings of the transformer options
          "rope": _ROTARY, "use_rope": _ROTARY, "rotary_emb": _ROTARY, "rope_theta": _ROTARY,
          "sliding_window": ("window", "Use window=4096 (a query sees itself and the "
                             "window - 1 keys before it)."),
          "use_alibi": ("alibi", "Use alibi=True."),
          "num_key_value_heads": ("num_kv_heads", "Use num_kv_heads=2 (grouped-query "
                                  "attention)."),
          "attention_bias": _PROJECTION_BIAS, "bias": _PROJECTION_BIAS}


def parameters(func: Callable) -> list[inspect.Parameter]:
    """The parameters of `func` (following functools.wraps), without `self`."""
    return [p for p in inspect.signature(func).parameters.values() if p.name != "self"]


def signature_text(owner: str, params: list[inspect.Parameter]) -> str:
    """`Dense(out, bias=True, name=None)`: the signature as a call, without annotations."""
    shown = []
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            shown.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            shown.append(f"**{p.name}")
        elif p.default is p.empty:
            shown.append(p.name)
        else:
            shown.append(f"{p.name}={p.default!r}")
    return f"{owner}({', '.join(shown)})"


def signature_problem(func: Callable, args: tuple, kwargs: dict, owner: str,
                      others: Callable[[str], list[str]] | None = None) -> SignatureError | None:
    """The SignatureError for calling `func(*args, **kwargs)`, or None when the call fits (then
    a TypeError came from inside the callee and stays as it is)."""
    try:
        inspect.signature(func).bind(*args, **kwargs)
        return None
    except TypeError as e:
        reason = str(e)
    params = parameters(func)
    names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
    unknown = [k for k in kwargs if k not in names] if not takes_any else []
    full = signature_text(owner, params)
    if unknown:
        arg = unknown[0]
        msg = f"{owner} has no argument '{arg}' (received {arg}={kwargs[arg]!r:.60})."
        habit = HABITS.get(arg)
        if habit is not None and habit[0] in names:
            msg += f" Did you mean '{habit[0]}'? {habit[1]}"
        else:
            msg += close_matches(arg, names)
        elsewhere = others(arg) if others is not None else []
        if elsewhere:
            listed = (", ".join(elsewhere[:-1]) + " and " + elsewhere[-1] if len(elsewhere) > 1
                      else elsewhere[0])
            msg += f" '{arg}' is an argument of {listed}."
        msg += f" {owner} takes: {full}."
        err = SignatureError(msg)
        err.argument, err.value = arg, kwargs[arg]
    else:
        err = SignatureError(f"{owner}: {reason}. Call it as {full}.")
        err.argument, err.value = "", None
    name = kwargs.get("name")
    err.layer, err.port = name if isinstance(name, str) else None, None
    return err


def checked(func: F, owner: Callable[[tuple], str],
            others: Callable[[tuple, str], list[str]] | None = None) -> F:
    """`func`, raising signature_problem's SignatureError for a call that does not fit.
    `owner(args)` names the callee (e.g. from `self`); `others(args, argument)` lists the
    other callees that take `argument`."""

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TypeError as e:
            if isinstance(e, AttnlabError):
                raise
            where = None if others is None else functools.partial(others, args)
            problem = signature_problem(func, args, kwargs, owner(args), where)
            if problem is None:
                raise
            raise problem from None

    setattr(call, "_checks_call", True)
    return cast(F, call)


def checked_as(name: str) -> Callable[[F], F]:
    """A decorator: `checked` for a function shown as `name` in its messages."""
    return lambda func: checked(func, lambda args: name)
