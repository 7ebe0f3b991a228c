"""``unlike_agent``: a write far from everything its agent holds live, read beside the categories.

A support bot that suddenly records a rule to forward invoices is unusual whatever its words. The
caller (``app.services.memory.screening``) looks up, on the embedding ``remember`` already computed, how
many live memories the agent holds (what it wrote and what reviewers approved for it) and the
cosine similarity of the write to the nearest of them: a ``Familiarity``. From that:

* with fewer than ``MIN_HISTORY`` live memories nothing is unusual (cold start: a new agent's
  every write is new, and must not all be staged);
* a write whose nearest live memory is below ``UNLIKE`` is *unusual*. Alone that means nothing
  (a new hobby, a new project): no flag is raised;
* every category of effect an unusual write raises is joined by ``unlike_agent`` (``low``): the
  reviewer reads that this agent has never held anything like it. The category, by its
  provenance, is what stages the write; this flag stages nothing by itself.

It does not lower any category's cut. Measured on the spent stranger sets with a matched
agent's history (``dev/screening/unlike_agent_probe.py``), an attack and its benign look-alike are
about equally far from that history (median nearest similarity 0.30 against 0.30), so letting an
unusual write raise a category on half a head's cut raised it for look-alikes as often as for
attacks, and staged one more write of the 1,000-write stream. Known limits: nothing is unusual for
an agent with little history, and an attack worded like the agent's ordinary notes is familiar.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.screening.flags import RiskFlag, Span

NAME = "unlike_agent"
MIN_HISTORY = 20
"""Live memories an agent needs before a write can be unlike them."""
UNLIKE = 0.30
"""Nearest-live cosine similarity below which a write is unusual (all-MiniLM-L6-v2; the benign
stream's ordinary writes have a median of 0.40 and a 25th percentile of 0.33 against their
agent's earlier writes)."""
SCORE = 0.3


@dataclass(frozen=True)
class Familiarity:
    """How a write relates to its agent's live memories (same tenant, same agent, any user)."""

    history: int
    """Live non-procedural memories of the agent (a lower bound in very large scopes)."""
    nearest: float | None
    """Cosine similarity to the nearest of them, None when there is none."""

    @property
    def unusual(self) -> bool:
        return self.history >= MIN_HISTORY and self.nearest is not None and self.nearest < UNLIKE


def flag(familiarity: Familiarity | None, content: str, categories: list[RiskFlag]) -> RiskFlag | None:
    """``unlike_agent`` when the write is unusual and raised a category, else None."""
    if familiarity is None or not familiarity.unusual or not categories:
        return None
    return RiskFlag(NAME, "low", SCORE, (Span("content", 0, len(content)),))
