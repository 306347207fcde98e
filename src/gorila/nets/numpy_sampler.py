"""Actions drawn from a numpy network's logits (or its Gaussian), with their log-probabilities: how an actor whose
policy has a numpy twin acts, in a process that never imports torch::

    sampler = NumpySampler(numpy_policy, seed=1003)   # an unset twin (gorila.nets.numpy_policy)
    sampler.set(flat)                                 # the server's whole vector
    actions, log_probs = sampler.sample_with_log_prob(obs)

No torch here.
"""

from __future__ import annotations

import copy

import numpy as np

from gorila.nets.numpy_conv import NumpyNetwork
from gorila.nets.numpy_mlp import NumpyGaussian


class NumpySampler:
    """See the module doc. Draws by the Gumbel-max trick from a generator seeded with ``seed``; the
    log-probabilities are the log-softmax of the logits at the actions drawn, in float32. A
    :class:`~gorila.nets.numpy_mlp.NumpyGaussian` policy draws its own (``draw``: the Gaussian's
    sample and its log-density). It holds a copy of ``policy``, so one unset twin can be handed to
    many actors."""

    def __init__(self, policy: NumpyNetwork, seed: int):
        self.policy = copy.deepcopy(policy)
        self.rng = np.random.default_rng(seed)
        # which draw, decided once rather than at every step
        self._gaussian = self.policy if isinstance(self.policy, NumpyGaussian) else None

    def set(self, flat: np.ndarray) -> None:
        self.policy.set(flat)

    def sample(self, obs: np.ndarray) -> np.ndarray:
        if self._gaussian is not None:
            return self._gaussian.draw(obs, self.rng)[0]
        return self._gumbel_max(self.policy(obs))

    def sample_with_log_prob(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._gaussian is not None:
            return self._gaussian.draw(obs, self.rng)
        logits = self.policy(obs)
        actions = self._gumbel_max(logits)
        shifted = logits - logits.max(axis=1, keepdims=True)  # log-softmax, as the learner's torch one
        at_actions = np.take_along_axis(shifted, actions[:, None], axis=1)[:, 0]
        return actions, (at_actions - np.log(np.exp(shifted).sum(axis=1))).astype(np.float32)

    def _gumbel_max(self, logits: np.ndarray) -> np.ndarray:
        # argmax(logits + G), with G ~ Gumbel(0, 1) per entry, is a draw from softmax(logits).
        actions: np.ndarray = np.argmax(logits + self.rng.gumbel(size=logits.shape), axis=1)
        return actions
