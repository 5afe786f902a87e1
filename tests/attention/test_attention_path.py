"""The path from an attention layer to the math: the argument rules checked once, where a
layer is made or `al.attention` is called, the options handed on as one object, and a layer
kind that changes only its module class."""
from attnlab import attention_rules as rules
from attnlab import rotary


def test_rotary_defaults_have_one_home():
    assert rules.ROTARY_DEFAULTS is rotary.DEFAULTS
    assert rules.rotary("SelfAttention", True) == rotary.DEFAULTS
