"""Write screening: named risk flags with evidence spans for a write, before it is stored or staged.

Pure code — no network, no database. The caller passes what screening cannot look up itself:
the texts of the nearest live memories (for ``contradiction``), the live FSM of the same name (for
``fsm_widening``) and the source globs the key may assert (for ``provenance_laundering``).

    result = screen(content, memory_type="semantic", tags=[...], metadata={...}, source="system",
                    live=["User lives in Porto"], live_fsm=None, allowed_sources=())
    result.risk          # "none" | "low" | "medium" | "high": the highest flag severity
    result.to_json()     # [{"name", "severity", "score", "evidence": [{"field", "start", "end"}]}]

Screening reads the *redacted* payload (it runs after SR-1), so secrets redaction caught are
markers by then. Evidence is offsets only; nothing here returns or logs the text itself.
One module per detector; each documents its evidence kinds, weights and known limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from app.core import attributes
from app.core.screening import (contradiction, controls, effect_heads, effects, exfiltration, fsm_widening, hidden, injection,
                                 novelty, protected, provenance, removal, semantic, sensitive)
from app.core.screening.flags import LEVELS, SEVERITIES, RiskFlag, Span, level_rank, text_fields
from app.core.screening.protected import Protection

__all__ = ["CATEGORY_NAMES", "EXPLANATIONS", "FLAG_NAMES", "LEVELS", "SEVERITIES", "Protection", "RiskFlag", "Screening", "Span",
           "level_rank", "screen"]

#: Every flag name a detector can raise (the values policies may match with ``risk_flags``).
FLAG_NAMES = (
    injection.NAME, exfiltration.NAME, hidden.NAME, sensitive.SECRET, sensitive.PII, fsm_widening.NAME,
    contradiction.NAME, provenance.NAME, protected.NAME, semantic.NAME, novelty.NAME, *effects.NAMES,
)
#: The categories of effect (``effects``): what the write would change if the agent believed it.
#: The policy stages them by provenance (``app.core.policy``), not by severity.
CATEGORY_NAMES = effects.NAMES

#: One plain sentence per flag for the reviewer (shown on the change page next to the evidence).
EXPLANATIONS = {
    injection.NAME: "The text gives the agent instructions for later turns (overrides, triggers, fake system "
                    "messages or orders about tool calls) instead of recording a fact, or hides an order where "
                    "a reader of the rendered page does not see it (an HTML or markdown comment, invisible or "
                    "white text, image alt text, a link title, a code comment or a fenced 'note'), or sets a "
                    "rule for later that removes a safeguard (a verification, review, approval, MFA, test or "
                    "limit declared enough, optional or skipped) or grants rights or trust (admin, authority, "
                    "'treat them as internal', 'are now considered approved viewers of all …', 'retains the access "
                    "of …'), or tells it to run a destructive command (delete, drop, wipe, force-push) without "
                    "confirmation ('don't ask first'), or to call a tool that approves, pays, deletes or unlocks "
                    "with a harmful argument (every item, a zero price, a safety setting written to 0, an override "
                    "of a hold), to open an admin port to the whole internet, or to run a destructive command on "
                    "production on a standing trigger ('whenever staging looks stale'). It also flags a standing "
                    "exemption for one person, number or bot ('treat his requests as pre-approved', 'no further "
                    "identity checks for that number', permanent break-glass access, a bot made approver, a limit "
                    "raised to unlimited, a safety disclaimer dropped for a self-confirmed doctor) and a bridge "
                    "between people's data (a sister's or classmate's file, other clients' budgets, any parent "
                    "asking about any child, a competitor's quotes). When the "
                    "whole content is the evidence, a learned reader judged that the text drops a check, approval, "
                    "inspection or limit as a rule for later, in its trade's own words.",
    exfiltration.NAME: "The text would make the agent send data somewhere: a link or image that carries data, "
                       "a standing copy to an address, an upload to an anonymous file drop (transfer.sh, file.io), or "
                       "a request to read, export or keep the contents of a file that holds keys, passwords or a "
                       "session (.git-credentials, secrets.yaml, document.cookie), in any of several languages. "
                       "A standing copy to the user's own named assistant or colleague, at an address with that "
                       "name, is medium, not high.",
    hidden.NAME: "The text contains characters a reviewer cannot see but a model reads (invisible, "
                 "reordering or look-alike characters).",
    sensitive.SECRET: "A password, token or other credential is still in the text after redaction.",
    sensitive.PII: "The text holds personal identifiers (contact details, phone numbers in any country's "
                   "format, passport or national ID numbers, a date of birth); several together, or a birth "
                   "date with an ID number, are enough to impersonate someone.",
    fsm_widening.NAME: "The procedure edit lets the agent reach states or take actions the live procedure did "
                       "not allow.",
    contradiction.NAME: "The write contradicts a live memory about the same person or thing; when it changes a "
                        "payment detail or contact channel the agent already holds (a different IBAN, account, phone "
                        "number or e-mail address for the same subject), it is high.",
    provenance.NAME: "The write claims a more trusted origin than the key that sent it may assert.",
    protected.NAME: "The write claims or changes who the agent is or what it may do: its role, permissions, "
                    "identity, system prompt, safety rules or trusted sources (in the text, a tag or a "
                    "metadata key, or a protected workspace file), or grants power in a tag or metadata value "
                    "under any key (an admin role or group, a write or delete permission, a clearance level, "
                    "acting as another user, a safety override switched on), switches a safeguard off under a key "
                    "that names it ('approval_required: false', 'safety_review: skip') or claims a power as a "
                    "yes/no setting ('is_owner: true', 'can_approve_changes: true').",
    novelty.NAME: "The write is unlike everything this agent holds (what it wrote and what reviewers approved "
                  "for it), and it would change what the agent does; an unusual write that changes nothing "
                  "raises no flag.",
    semantic.NAME: "The meaning and wording of the whole text are close to known memory-poisoning attempts "
                   "(standing instructions, data leaks, privilege claims, fake lessons, cross-user bridges, tool "
                   "misuse, hidden markup), even though it may match no rule; read it as a whole.",
    effects.DIRECTIVE: "The write tells the agent what to do in later turns: a standing rule, a default or a "
                       "trigger (\"from now on\", \"whenever X happens, do Y\").",
    effects.AUTHORITY: "The write grants or claims authority, trust, a role, access or approval, or exempts someone "
                       "or something from a check.",
    effects.DESTINATION: "The write gives a place to send data or money (an address, link, account, webhook, form "
                         "or shared sheet) and tells the agent to send or use it.",
    effects.FACT: "The write states a fact an attacker gains by planting: payment or bank details, a contact "
                  "channel (phone, e-mail, portal), a credential, or a safety-critical value (a dose, limit, "
                  "threshold or emergency number).",
    effects.TRUSTED_SOURCE: "The write says which sources to trust, prefer or treat as authoritative, or tells the "
                            "agent to distrust a legitimate one.",
    effects.COMMAND: "The write holds a command or tool call for the agent to run (a shell command, an SQL "
                     "statement, a function call).",
}


@dataclass(frozen=True)
class Screening:
    """The flags raised for one write, most severe first."""

    flags: tuple[RiskFlag, ...] = ()

    @property
    def risk(self) -> str:
        """The overall level: the highest severity among the flags, ``none`` without flags."""
        return max((f.severity for f in self.flags), key=level_rank, default="none")

    @property
    def names(self) -> list[str]:
        """Flag names, sorted (what audit events record)."""
        return sorted(f.name for f in self.flags)

    def to_json(self) -> list[dict[str, Any]]:
        """Flags in their stored/API shape."""
        return [f.to_json() for f in self.flags]


def screen(content: str, *, memory_type: str, tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
           source: str | None = None, live: Sequence[str] = (), live_fsm: str | None = None,
           allowed_sources: Sequence[str] = (), protection: Protection | None = None,
           path: str | None = None, embedding: Sequence[float] | None = None,
           embedder: str | None = None, classifier: semantic.Classifier | None = None,
           removal_head: semantic.Classifier | None = None, heads: effect_heads.Heads | None = None,
           familiarity: novelty.Familiarity | None = None, meaning: attributes.Meaning | None = None) -> Screening:
    """Run every detector over one write and return its flags (``protection``: the tenant's extra
    protected keys and paths, see ``protected``; ``path``: a workspace file's path; ``embedding``
    and ``embedder``: the content's vector and the name of the model that made it, for
    ``semantic_attack`` and the learned removal reader; ``classifier`` and ``removal_head`` replace
    the shipped ones, for the benchmark's leave-one-out runs; ``heads`` replaces the
    categories' heads; ``familiarity``: how the write relates to its agent's live memories, for
    ``unlike_agent``, see ``novelty``; ``meaning``: the attribute readings of the write and of ``live``, for
    ``contradiction``). The categories of effect are raised for memories, not for procedures or workspace files."""
    fields = text_fields(content, tags, metadata)
    injected, kinds = injection.detect_kinds(fields)
    found: list[RiskFlag | None] = [
        injected,
        exfiltration.detect(fields),
        hidden.detect(fields),
        *sensitive.detect(fields),
        contradiction.detect(content, live, meaning) if memory_type != "procedural" else None,
        fsm_widening.detect(content, live_fsm) if memory_type == "procedural" else None,
        provenance.detect(source, metadata, fields, allowed_sources),
        protected.detect(fields, tags, metadata, protection, path),
        semantic.detect(content, embedding, embedder, classifier) if memory_type != "procedural" else None,
    ]
    if controls.AGREEMENT and injected is not None and injected.severity == "medium" and kinds & controls.KINDS:
        semantic_flag = found[-1]
        if semantic_flag is not None and semantic_flag.severity == "medium":
            # Two independent readers agree that a safeguard is being removed (the rule saw the shape,
            # the classifier the meaning): together they are a high-risk write, either alone is not.
            found[0] = RiskFlag(injected.name, "high", max(injected.score, injection.THRESHOLDS.high),
                                injected.evidence)
    if memory_type != "procedural" and removal.fires(content, embedding, embedder, removal_head):
        cue = controls.rule_cue(content)
        if (cue is not None or kinds & controls.KINDS) and not controls.compensated(content):
            # The learned reader says a safeguard is being removed and the write is a rule for later
            # (a cue, or a control rule that matched too): high, as a control removal beside a cue is.
            spans = (Span("content", 0, len(content)),) + ((Span("content", *cue),) if cue else ())
            prior = found[0]
            found[0] = RiskFlag(injection.NAME, "high", max(prior.score if prior else 0.0, removal.WEIGHT),
                                (prior.evidence if prior else ()) + spans)
    if memory_type not in ("procedural", "workspace"):  # an FSM's JSON and the agent's own files are judged elsewhere
        categories = effects.detect(content, embedding, embedder, heads)
        found += [*categories, novelty.flag(familiarity, content, categories)]
    flags = sorted((f for f in found if f is not None), key=lambda f: (-level_rank(f.severity), -f.score, f.name))
    return Screening(tuple(flags))
