"""What a reviewer reads about a risk flag: one short sentence per flag beside its badge, and, once
per page in a collapsed section, the screening's full description (`app.core.screening.EXPLANATIONS`).

The full descriptions are written for people tuning screening: several run to a paragraph that lists
every pattern a detector knows. Repeated beside every flag on every change, they buried the one
sentence a reviewer needs to decide, so the change page leads with these and keeps the long ones a
click away."""

from __future__ import annotations

from app.core.screening import EXPLANATIONS

SUMMARIES = {
    "prompt_injection": "It gives the agent instructions for later turns instead of recording a fact.",
    "exfiltration": "It would make the agent send data somewhere: a link, an address or a file drop.",
    "hidden_characters": "It contains characters a reviewer cannot see but a model reads.",
    "secret_leftover": "A password, token or other credential is still in the text.",
    "pii": "It holds personal identifiers such as contact details or ID numbers.",
    "fsm_widening": "The procedure edit lets the agent do more than the live procedure allows.",
    "contradiction": "It contradicts a live memory about the same person or thing.",
    "provenance_laundering": "It claims a more trusted origin than the key that sent it may assert.",
    "protected_memory": "It claims or changes who the agent is or what it may do.",
    "semantic_attack": "Its meaning is close to known memory-poisoning attempts; read it as a whole.",
    "unlike_agent": "It is unlike everything this agent holds, and it would change what the agent does.",
    "directive": "It tells the agent what to do in later turns: a standing rule, a default or a trigger.",
    "authority": "It grants or claims a role, trust, access or approval, or exempts someone from a check.",
    "destination": "It names a place the agent should send data or money to.",
    "high_impact_fact": "It records payment details, a contact channel, a credential or a safety value.",
    "trusted_source": "It says which sources the agent should trust, prefer or distrust.",
    "command": "It asks the agent to run a command, an SQL statement or a tool call.",
}
"""One sentence per flag name, shown beside the flag's badge (each flag in `EXPLANATIONS` has one)."""


def summary(name: object) -> str:
    """The one-sentence reason a flag named `name` makes a change risky ("" for an unknown name)."""
    key = str(name)
    if key in SUMMARIES:
        return SUMMARIES[key]
    full = EXPLANATIONS.get(key, "")
    return full.split(". ")[0].rstrip(".") + "." if full else ""


def explanation(name: object) -> str:
    """Screening's full description of a flag ("" for an unknown name)."""
    return EXPLANATIONS.get(str(name), "")
