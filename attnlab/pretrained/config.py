"""`config.json` of a Hugging Face model folder, as transformers 4.x and 5.x write it.

`Config` reads the file and answers the few questions a family builder asks (`cfg.int("n_embd")`,
`cfg.choice("activation_function", {...})`), each value checked where it is read. The two
layouts differ in a few keys, which `Config` reads either way: the dtype (`torch_dtype` in 4.x,
`dtype` in 5.x) and rotary positions (`rope_theta` and `rope_scaling` at the top level in 4.x,
one `rope_parameters` object in 5.x; `cfg.rope()` gives the 5.x form).

Every key of a config is one of: read by the family (a size, an epsilon, an activation), fixed
(a key that changes the model, supported at one value only: any other value is refused, naming
the key and what is supported), or known to leave the model unchanged (bookkeeping, generation
defaults, dropout of heads the family does not build). A key in none of these, from a newer
transformers, is reported in a warning, never silently taken to mean nothing.
"""
from __future__ import annotations

import builtins
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch

from attnlab.core.errors import NetworkError

CONFIG_FILE = "config.json"
MAX_CONFIG_BYTES = 16 * 2**20
LIMITS = {
    # a config is a few levels deep (task_specific_params → a task → its options); deeper is
    # a damaged or hostile file, refused before anything walks it recursively
    "json_depth": 32,
    # tensors in one safetensors file: a large model's shard holds a few thousand
    "tensors": 300_000,
}
"""What `from_pretrained` reads beyond the files' own limits (safetensors' 100 MB header); a
folder beyond these is refused before anything is built for it. Raise one (e.g.
``attnlab.pretrained.config.LIMITS["tensors"] = 2_000_000``) to load a folder you trust."""
# The largest integer read from a JSON file (int64, as torch's sizes): a longer number is
# refused by name before anything computes with it.
MAX_JSON_INT = 2**63 - 1

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}

# Keys of every transformers config (PretrainedConfig, 4.x and 5.x) that leave the weights'
# meaning unchanged: bookkeeping, output flags, tokenizer ids and generation defaults.
COMMON = frozenset("""
    _name_or_path _commit_hash _attn_implementation _attn_implementation_autoset
    attn_implementation architectures auto_map model_type transformers_version dtype torch_dtype
    return_dict output_hidden_states output_attentions torchscript use_bfloat16 tf_legacy_loss
    use_cache id2label label2id num_labels problem_type finetuning_task tokenizer_class prefix
    task_specific_params bos_token_id eos_token_id pad_token_id sep_token_id
    decoder_start_token_id initializer_range initializer_factor chunk_size_feed_forward
    gradient_checkpointing max_length min_length do_sample early_stopping num_beams
    num_beam_groups diversity_penalty temperature top_k top_p typical_p repetition_penalty
    length_penalty no_repeat_ngram_size encoder_no_repeat_ngram_size bad_words_ids
    num_return_sequences output_scores return_dict_in_generate forced_bos_token_id
    forced_eos_token_id remove_invalid_values exponential_decay_length_penalty suppress_tokens
    begin_suppress_tokens cross_attention_hidden_size
""".split())

# Keys every config has that change the model; the families here build one value of each.
COMMON_FIXED: dict[str, tuple[Any, ...]] = {
    "is_encoder_decoder": (False,), "add_cross_attention": (False,), "is_decoder": (False,),
    "pruned_heads": ({},), "tie_encoder_decoder": (False,),
}


class CheckpointError(NetworkError):
    """A model folder attnlab cannot read as the model it describes: a missing or damaged file,
    a model type or option not supported, a missing or mismatched weight."""


@dataclass(frozen=True)
class Keys:
    """What a family does with the keys of its config.

    `read`: the keys its builder reads (with `Config.int`, `.float`, …); `fixed`: keys that
    change the model, with the values the family builds (the first is the default when the
    key is absent); `ignored`: keys of its config class that leave the model unchanged."""

    read: frozenset[str]
    fixed: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    ignored: frozenset[str] = frozenset()


def keys(read: str, fixed: Mapping[str, tuple[Any, ...]] | None = None, ignored: str = "") -> Keys:
    """`Keys` from space-separated names: ``keys("n_embd n_head", {"add_cross_attention": (False,)})``."""
    return Keys(frozenset(read.split()), dict(fixed or {}), frozenset(ignored.split()))


_MISSING = object()


class Config:
    """A model's `config.json`, read and checked one key at a time.

    Parameters
    ----------
    data : dict
        The parsed JSON object.
    where : str
        Where it came from (named in errors), e.g. the file's path.
    """

    def __init__(self, data: dict, where: str = CONFIG_FILE):
        if not isinstance(data, dict):
            raise CheckpointError(f"'{where}': expected a JSON object, found {type(data).__name__}.")
        self.data = data
        self.where = where
        self.read: set[str] = set()

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> Config:
        """The config of a model folder (its `config.json`)."""
        path = Path(folder) / CONFIG_FILE
        problem = file_problem(path)
        if problem == "missing":
            raise CheckpointError(f"'{folder}' has no {CONFIG_FILE}: a Hugging Face model folder "
                                  f"holds {CONFIG_FILE} and model.safetensors (what "
                                  "model.save_pretrained(folder) writes).")
        if problem is not None:
            raise CheckpointError(f"'{path}' is {problem}, not a regular file: nothing was read "
                                  f"from it. A model folder holds {CONFIG_FILE} as a file.")
        return cls(read_json(path), str(path))

    # -- the keys every family reads --------------------------------------------------------
    @property
    def model_type(self) -> str | None:
        value = self.data.get("model_type")
        return value if isinstance(value, str) else None

    @property
    def architecture(self) -> str | None:
        """The model class the checkpoint was saved from (`architectures[0]`), or None."""
        archs = self.data.get("architectures")
        if archs is None:
            return None
        if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
            raise self.bad("architectures", archs, "a list of model class names, e.g. "
                           "[\"GPT2LMHeadModel\"]")
        if len(archs) > 1:
            raise self.bad("architectures", archs, "one model class (attnlab builds one model "
                           "from a folder)")
        return archs[0]

    @property
    def dtype(self) -> torch.dtype | None:
        """The weights' dtype the config names (`dtype` in 5.x, `torch_dtype` in 4.x), or None."""
        for key in ("dtype", "torch_dtype"):
            value = self.data.get(key)
            if value is None or value == "auto":
                continue
            if isinstance(value, str) and value.removeprefix("torch.") in DTYPES:
                return DTYPES[value.removeprefix("torch.")]
            raise self.bad(key, value, " or ".join(f'"{d}"' for d in DTYPES))
        return None

    def num_labels(self) -> int:
        """The classes of a classification head: `id2label`'s size, else `num_labels`, else 2
        (transformers' default)."""
        labels = self.data.get("id2label")
        if isinstance(labels, dict) and labels:
            return len(labels)
        if self.data.get("num_labels") is not None:
            return self.int("num_labels")
        return 2

    def rope(self) -> dict:
        """Rotary positions in the 5.x form, from either layout: ``{"rope_type": "default",
        "rope_theta": 10000.0, ...}`` (the scaling's own keys, e.g. "factor", beside them)."""
        params = self.data.get("rope_parameters")
        if params is not None:
            if not isinstance(params, dict):
                raise self.bad("rope_parameters", params, "an object such as "
                               "{\"rope_type\": \"default\", \"rope_theta\": 10000.0}")
            self.read.add("rope_parameters")
            out = dict(params)
        else:
            out = {}
            scaling = self.data.get("rope_scaling")
            if scaling is not None:
                if not isinstance(scaling, dict):
                    raise self.bad("rope_scaling", scaling, "an object or null")
                out.update(scaling)
            self.read.update(("rope_scaling", "rope_theta"))
            out["rope_theta"] = self.data.get("rope_theta", 10000.0)
        if "type" in out and "rope_type" not in out:            # early 4.x spelling
            out["rope_type"] = out.pop("type")
        out.setdefault("rope_type", "default")
        theta = out["rope_theta"]
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
            raise self.bad("rope_theta", theta, "a positive number")
        return out

    # -- values, checked where they are read ------------------------------------------------
    def get(self, key: str, default: Any = _MISSING) -> Any:
        self.read.add(key)
        if key in self.data and self.data[key] is not None:
            return self.data[key]
        if default is _MISSING:
            raise CheckpointError(f"'{self.where}' has no \"{key}\": the {self.model_type} "
                                  "family needs it to build the model.")
        return default

    def int(self, key: str, default: Any = _MISSING, least: builtins.int = 1) -> builtins.int:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise self.bad(key, value, f"an integer ≥ {least}")
        return value

    def float(self, key: str, default: Any = _MISSING, least: builtins.float = 0.0) -> builtins.float:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < least:
            raise self.bad(key, value, f"a number ≥ {least:g}")
        return float(value)

    def probability(self, key: str, default: builtins.float = 0.0) -> builtins.float:
        p = self.float(key, default)
        if p >= 1:
            raise self.bad(key, p, "a dropout probability in [0, 1)")
        return p

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.bad(key, value, "true or false")
        return value

    def choice(self, key: str, allowed: Mapping[Any, Any], default: Any = _MISSING) -> Any:
        """`allowed[value]` for the config's value of `key`; any other value is refused,
        naming the key and what is supported."""
        value = self.get(key, default)
        try:
            return allowed[value]
        except (KeyError, TypeError):
            shown = ", ".join(json.dumps(v) for v in allowed)
            raise self.unsupported(key, value, f"attnlab builds {shown}") from None

    def pair(self, key: str, default: Any = _MISSING) -> tuple[builtins.int, builtins.int]:
        """An int or a pair of ints (an image or patch size) as (height, width)."""
        value = self.get(key, default)
        pair = value if isinstance(value, (list, tuple)) else [value, value]
        if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                 for v in pair):
            raise self.bad(key, value, "a positive integer or a pair of them")
        return int(pair[0]), int(pair[1])

    # -- errors -----------------------------------------------------------------------------
    def bad(self, key: str, value: Any, expected: str) -> CheckpointError:
        return CheckpointError(f"'{self.where}' key \"{key}\": expected {expected}, found "
                               f"{_shown(value)}.")

    def unsupported(self, key: str, value: Any, supported: str) -> CheckpointError:
        return CheckpointError(f"'{self.where}' key \"{key}\" is {_shown(value)}: attnlab does "
                               f"not build that {self.model_type} model yet ({supported}). "
                               "Nothing was loaded: a different model is never built in its place.")

    # -- every key accounted for -------------------------------------------------------------
    def check_keys(self, family: Keys) -> None:
        """Refuses fixed keys at a value the family does not build; warns of unknown keys."""
        fixed = {**COMMON_FIXED, **family.fixed}
        for key, allowed in fixed.items():
            value = self.data.get(key, allowed[0])
            if value is None and None not in allowed:
                value = allowed[0]
            if value not in allowed:
                shown = " or ".join(json.dumps(v) for v in allowed)
                raise self.unsupported(key, value, f"supported: {shown}")
        known = COMMON | family.read | family.ignored | set(fixed) | {"rope_parameters"}
        unknown = sorted(k for k in self.data if k not in known)
        if unknown:
            warnings.warn(f"'{self.where}': key(s) {', '.join(map(repr, unknown))} are not ones "
                          f"attnlab knows for {self.model_type}; they were not read. If they change "
                          "the model, the loaded network differs from it.", stacklevel=3)


class CappedConfig(Config):
    """A config whose integers read with `int` are capped at `cap` (`caps`: a key's own cap),
    `capped` recording each key capped and its value. A family's table built from it is the
    table of a small model of the same kind (its integers are counts of layers): it costs the
    same however many layers the file's config claims, so the counts can be checked against
    the weights before the real table is built."""

    def __init__(self, cfg: Config, cap: builtins.int = 1,
                 caps: Mapping[str, builtins.int] | None = None):
        super().__init__(cfg.data, cfg.where)
        self.cap = cap
        self.caps = dict(caps or {})
        self.capped: dict[str, builtins.int] = {}

    def int(self, key: str, default: Any = _MISSING, least: builtins.int = 1) -> builtins.int:
        value = super().int(key, default, least)
        cap = max(self.caps.get(key, self.cap), least)
        if value > cap:
            self.capped[key] = value
            return cap
        return value


# -- files a folder holds, and their JSON ----------------------------------------------------

def file_problem(path: Path) -> str | None:
    """None when `path` is a regular file (or a symbolic link to one); else what it is, in
    words: "missing", "a folder", "a FIFO (named pipe)", "a character device", "a broken
    symbolic link (to '…')", … Only stat'ed: nothing is opened (opening a FIFO blocks)."""
    import stat
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a broken symbolic link (to '{os.readlink(path)}')"
        return "missing"
    except OSError as e:                       # a loop of links, a name too long, no permission
        return f"unreadable ({e.strerror or e})"
    if stat.S_ISREG(st.st_mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(st.st_mode)), "not a regular file")


def read_json(path: Path, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """The JSON document of the regular file `path` (a config, a shards index), at most
    `max_bytes` long, nested at most LIMITS["json_depth"] levels, its integers at most
    MAX_JSON_INT: anything else is a CheckpointError naming the file (and the key)."""
    from attnlab.core.reading import read_regular
    raw = read_regular(path, "from_pretrained(path)", max_bytes, error=CheckpointError)
    return parse_json(raw, f"'{path}'")


class _Huge:
    """An integer too long to read, kept as its text until its key is known (then refused)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _int(text: str) -> builtins.int | _Huge:
    digits = len(text) - text.startswith("-")
    if digits > len(str(MAX_JSON_INT)):
        return _Huge(text)
    value = builtins.int(text)
    return value if abs(value) <= MAX_JSON_INT else _Huge(text)


def parse_json(raw: bytes, where: str) -> Any:
    """`raw` (UTF-8 JSON) parsed, its depth and integers bounded (see `read_json`); `where`
    names the file in errors ("'…/config.json'")."""
    try:
        doc = json.loads(raw.decode("utf-8"), parse_int=_int)
    except RecursionError:              # the C parser recurses once per level: refused as deep
        raise CheckpointError(f"{where} is nested deeper than {LIMITS['json_depth']} levels, far "
                              "deeper than any model file: it is damaged or not what its name "
                              "says. Nothing was loaded.") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not valid JSON ({e}).") from None
    _check_tree(doc, where)
    return doc


def _check_tree(doc: Any, where: str) -> None:
    """Walks `doc` without recursion: refuses nesting deeper than LIMITS["json_depth"] and the
    integers `_int` kept as text, naming where they are."""
    # each value with its depth and where it is: (the parent's place, its key), a chain
    # spelled out only for an error (never a string per value: keys may be long)
    stack: list[tuple[Any, builtins.int, Any]] = [(doc, 0, None)]
    most = LIMITS["json_depth"]
    while stack:
        value, depth, at = stack.pop()
        if isinstance(value, _Huge):
            digits = len(value.text) - value.text.startswith("-")
            raise CheckpointError(f"{where} key \"{_key_path(at)}\" is a {digits}-digit integer "
                                  f"({value.text[:12]}…), larger than any size a model has "
                                  f"(attnlab reads integers up to {MAX_JSON_INT:,}). Nothing was "
                                  "loaded.")
        if isinstance(value, (dict, list)):
            if depth >= most:
                raise CheckpointError(f"{where} is nested deeper than {most} levels "
                                      f"(at \"{_key_path(at)}\"), far deeper than any model file: "
                                      "it is damaged or not what its name says. Nothing was "
                                      "loaded.")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, depth + 1, (at, k)) for k, v in items)


def _key_path(at: Any) -> str:
    """"a.b[2].c" from the chain (((None, "a"), "b"), 2), "c")."""
    parts = []
    while at is not None:
        at, key = at
        parts.append(f".{key[:40]}" if isinstance(key, str) else f"[{key}]")
    text = "".join(reversed(parts)).removeprefix(".") or "(the top level)"
    return text if len(text) <= 80 else text[:77] + "..."


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."
