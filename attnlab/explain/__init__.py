"""Looking inside a network, by the methods that explain it: integrated gradients, attention
rollout and attention × gradient relevance, the logit lens and activation patching. Each
returns its data first, with `.plot()`."""
from attnlab.explain.flow import relevance, rollout
from attnlab.explain.gradients import integrated_gradients
from attnlab.explain.lens import logit_lens
from attnlab.explain.patching import patching
from attnlab.explain.results import Attribution, LogitLens, Mixing, Patching

__all__ = ["integrated_gradients", "rollout", "relevance", "logit_lens", "patching",
           "Attribution", "Mixing", "LogitLens", "Patching"]
