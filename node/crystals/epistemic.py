"""What kind of knowing a crystal is (its epistemic layer) and where the node got it.

Seed 000: ``epistemicLayer`` is ``"experience" | "directive" | "world_fact" |
"mental_model"``; "Directives (explicit user preferences) take priority over
inferred knowledge." The seed fills the layer from a dream-time extraction
pipeline we do not have, so here it is a pure function of the crystal's type,
and a directive is what the user stated as one (``--type directive``):

* ``directive`` — a ``directive`` crystal: an instruction or preference the user
  stated ("the user never wants semicolons");
* ``experience`` — an ``episode``: one thing that happened;
* ``mental_model`` — an ``insight``: the node's own synthesis;
* ``world_fact`` — every other type (facts, including those folded from
  episodes, preferences, goals, skills, warnings, general notes).

When two memories conflict, the higher layer wins (:data:`PRECEDENCE`):
directive > world fact > mental model > experience. The seed ranks the first
three only (issue 28); a mental model, inferred by the node, sits below what it
was told and above a single experience it generalises.

Acquisition is the other axis: ``own`` (made on this node), ``inherited`` (a
testament of the same owner, seed 003) or ``bought`` (delivered by a seller on
the market). It is read from the crystal alone: a bought or inherited crystal
has origin ``peer`` and its provenance chain opens with the seller's
``peer:<key>`` or the signer's ``testament:<peer id>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum


class EpistemicLayer(StrEnum):
    DIRECTIVE = "directive"
    WORLD_FACT = "world_fact"
    MENTAL_MODEL = "mental_model"
    EXPERIENCE = "experience"


PRECEDENCE = {
    EpistemicLayer.DIRECTIVE: 3,
    EpistemicLayer.WORLD_FACT: 2,
    EpistemicLayer.MENTAL_MODEL: 1,
    EpistemicLayer.EXPERIENCE: 0,
}
"""Higher wins a conflict."""

# Plain values (``SemanticType`` values), so that the model can import this module.
_LAYER_OF_TYPE = {
    "directive": EpistemicLayer.DIRECTIVE,
    "episode": EpistemicLayer.EXPERIENCE,
    "insight": EpistemicLayer.MENTAL_MODEL,
}


def epistemic_layer(semantic_type: str) -> EpistemicLayer:
    """The layer of a crystal of ``semantic_type`` (see the module docstring)."""
    return _LAYER_OF_TYPE.get(str(semantic_type), EpistemicLayer.WORLD_FACT)


def precedence(semantic_type: str) -> int:
    """:data:`PRECEDENCE` of the layer of ``semantic_type``."""
    return PRECEDENCE[epistemic_layer(semantic_type)]


class Acquisition(StrEnum):
    OWN = "own"
    INHERITED = "inherited"
    BOUGHT = "bought"


SELLER_ACTOR = "peer:"
TESTAMENT_ACTOR = "testament:"


def acquisition(origin: str, provenance_chain: Sequence[str]) -> Acquisition:
    """How the node came to hold a crystal of ``origin`` (an ``Origin`` value) and governance
    ``provenance_chain``: its own, inherited (testament) or bought (``Crystal.acquisition``)."""
    if str(origin) != "peer":
        return Acquisition.OWN
    first = provenance_chain[0] if provenance_chain else ""
    if first.startswith(SELLER_ACTOR):
        return Acquisition.BOUGHT
    if first.startswith(TESTAMENT_ACTOR):
        return Acquisition.INHERITED
    return Acquisition.OWN


def seller_of(origin: str, provenance_chain: Sequence[str], peer_origin: str | None) -> str | None:
    """The seller's public key (hex) of a bought crystal; None for any other (``Crystal.seller``)."""
    if acquisition(origin, provenance_chain) is not Acquisition.BOUGHT:
        return None
    return peer_origin or provenance_chain[0][len(SELLER_ACTOR):]
