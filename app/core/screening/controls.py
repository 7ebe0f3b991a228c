"""Control removal and privilege grants: a lesson, memo or note that *removes* a safeguard or
*widens* who may do what, stated as a rule for later. Evidence for ``prompt_injection``.

A fake lesson or a privilege memo reads as ordinary workplace prose ("retro takeaway: the postcode
is enough verification", "code review on small PRs is pointless", "team leads are now granted
admin"), so neither the instruction shapes of ``injection`` nor closeness to written examples
catches one reliably. What makes it harmful is structural: a predicate that takes a safeguard away
(skip, bypass, turn off, stop running, self-approve; "is enough", "is optional / pointless /
advisory only / a formality") whose object is a *control* (a verification, check, review, test,
approval, MFA, confirmation, call-back, limit, backup, alert, scan …), or a grant that widens a
permission, a role or trust ("are now granted admin", "is authorised to approve", "treat X as
internal"). Genuine lessons usually *add* a check ("from now on every reset needs the code"), and
negated forms ("never skip review", "MFA is not optional") do not match.

Kinds of evidence (``injection`` combines them with its own kinds, noisy-OR):

* ``control_removal`` (0.45, medium alone): a safeguard removed or declared unnecessary.
* ``privilege_grant`` (0.45, medium alone): admin/root/owner rights, authority or trust granted.
* ``unconfirmed_destruction`` (0.6, high alone): a destructive command (``rm -rf``, ``DROP TABLE``,
  ``truncate``, ``terraform destroy``, a force-push, ``kubectl delete``, flushing the firewall,
  deleting or disabling something in production) in the same field as a directive to skip the
  confirmation ("don't ask first", "without confirming", "automatically", ``-auto-approve``). A
  runbook line with the command and no such directive is left alone, and so is a negated command
  ("never run rm -rf without asking").
* ``harmful_tool_call`` (0.45 alone, 0.6 beside a standing trigger: "whenever", "after each", "every
  morning", "automatically", "if it faults", or "for every claim"): a code-shaped call of a tool that
  approves, pays, refunds, deletes, unlocks or sets something (``approve_claim()``, ``set_room_rate(rate=0)``),
  with a zero / off / unlimited / every-item argument or said to run on every item; or a safeguard's
  setting written to zero in prose ("write 0 to the interlock register", "set the withdrawal limit to
  unlimited"). A negated call ("never call approve_all()") and a call quoted in a text about attacks
  do not count.
* either beside a **rule cue** in the same field (0.6, high alone): "from now on", "going
  forward", "takeaway", "lesson", "best practice", "policy", "rule of thumb", "whenever", "keep
  doing", "in similar cases" … in English and the lexicon's future words: the removal is meant
  to hold for later turns, which is what makes it poisoning rather than a report of one event.

A relaxation that keeps a **compensating control** ("the full count stays", "lost devices still need
the manager", "audited weekly", "approved by security": ``COMPENSATING``) is not a removal: its
``control_removal`` evidence is dropped, and the learned reader (``removal``) does not raise it either.

Known limits: English predicates with a few common forms elsewhere (``lexicon.SKIP_CHECKS``);
a relaxation with a bounded, legitimate reason ("typo-only docs PRs need one approval") reads like
a removal and can be staged; a removal phrased with no control noun ("just pay it") is missed.
"""

from __future__ import annotations

import re
from typing import Sequence

from app.core.screening import lexicon
from app.core.screening.flags import Span, TextField
from app.core.screening.normalize import fold
from app.core.screening.signals import SCAN_LIMIT, Signal, collect, quoted_spans, signal

REMOVAL, GRANT, DESTRUCTION = "control_removal", "privilege_grant", "unconfirmed_destruction"
TOOL = "harmful_tool_call"
KINDS = frozenset({REMOVAL, GRANT})
WEIGHT, RULE_WEIGHT = 0.45, 0.6
DESTRUCTION_WEIGHT = 0.6
AGREEMENT = True
"""Whether ``screen`` raises a medium ``prompt_injection`` that rests on these kinds to high when
``semantic_attack`` is medium too (measured in docs/benchmarks/screening.md)."""

#: Safeguards: what a fake lesson takes away.
_CONTROL = (
    r"(?:(?:identity|id|security|fraud|background|credit|sanctions|conflict|permission|access|safety|spam|"
    r"virus|malware|dependency|vulnerability|secret|signature|certificate|tls|ssl|host ?key|age|address|"
    r"manager|legal|peer|code|pr|change|second|dual|double|manual|human)[ -])?"
    r"(?:verifications?|verification steps?|checks?|checking|reviews?|reviewers?|approvals?|approval (?:queue|step|flow|process)|"
    r"sign-?offs?|four[- ]eyes(?: (?:rule|check|principle))?|4[- ]eyes|two[- ]person (?:rule|check|approval)|"
    r"approvers?|double[- ]checks?|controls?|validations?|mfa|2fa|two[- ]factor(?: auth\w*)?|multi[- ]factor(?: auth\w*)?|"
    r"one[- ]time codes?|otps?|confirmations?(?: dialogs?| prompts?| steps?| emails?)?|confirmation|call-?backs?|"
    r"tickets?|change (?:management|control|requests?)|branch protection|protected branch(?:es)?|unit tests|tests|"
    r"test suite|ci|pipeline checks?|audits?|audit (?:logs?|logging|trail)|logging|monitoring|alerts?|antivirus|"
    r"anti-?virus|edr|waf|firewall(?: rules)?|alerting|paging|backups?|snapshots?|rate limits?|spending limits?|limits|encryption|"
    r"least[- ]privilege|access reviews?|holds?|fraud holds?|screening|scans?|scanners?|sandbox(?:ing)?|"
    r"quarantine|guardrails?|proctoring|kyc|due diligence|reconciliation|matching|proof of delivery|signatures?|"
    r"authentication|auth|passwords?|pins?|captcha|lockouts?|expiry|rotation|staging(?: soak| gate)?|"
    r"deploy gate|gates?|safeguards?|safety checks?|precautions?|vetting|consent|id|canary(?: stage| release)?|"
    r"(?:test|canary|review|approval|staging|qa|verification) (?:stage|step)s?|exclusions?|restrictions?|"
    r"permission checks?|constraints?|foreign keys?|validation rules?|change[- ]advisory board|cab review|"
    # Machine and plant safeguards.
    r"interlocks?|light curtains?|e-?stops?|emergency stops?|safety (?:relays?|switch(?:es)?|valves?|circuits?)|"
    r"lockout[- ]tagout|loto)"
)
_C = r"\b" + _CONTROL + r"\b"
#: Words that say the control has no value, after it ("code review on small PRs is pointless").
_WORTHLESS = (r"(?:pointless|unnecessary|unneeded|optional|advisory(?: only)?|a formality|formality|formalities|"
              r"overkill|redundant|obsolete|theat(?:er|re)|security theat(?:er|re)|(?:a )?waste of (?:time|effort)|"
              r"busywork|not (?:needed|required|necessary|worth it|worth the time)|no longer (?:needed|required|necessary)|"
              r"useless|just noise|noise|(?:all |mostly |just )?false positives|nice[- ]to[- ]have|a rubber stamp|"
              r"for show|a box-ticking exercise|box-ticking)")
_ADVERB = r"(?:(?:just|really|basically|mostly|purely|totally|completely|simply|always|honestly|effectively|now|all)\s+){0,2}"
_REMOVE_VERB = (r"(?:skip|skips|skipped|skipping|bypass|bypassed|bypassing|disable|disabled|disabling|"
                r"turn(?:ed|ing)? off|switch(?:ed|ing)? off|remove|removed|removing|drop|dropped|dropping|"
                r"stop(?:ped|ping)? (?:doing|taking|running|requiring|asking for|sending|using|maintaining|checking|enforcing)|"
                r"no longer (?:do|run|require|need|ask for|send|use|take|check|enforce)|don't bother with|"
                r"uninstall(?:ed|ing)?|whitelist(?:ed|ing)?|allowlist(?:ed|ing)?|ignore|ignored|ignoring|waive|waived|"
                r"waiving|get rid of|got rid of|leave off|leaving off|keep (?:it |them )?off|cut out|do away with|"
                r"delete the|rip out|ripped out)")
_ACT = (r"(?:merg|deploy|pay|paid|approv|releas|publish|run|ran|execut|push|ship|dispens|reset|process|refund|"
        r"transfer|wir|grant|open|unlock|delet|install|commit|sign|issu|onboard|start|hir|accept|send|sent)\w*")
#: A negation or counter-instruction just before a removal verb: "never skip", "don't turn off".
_NEGATED = (r"\b(?:never|don't|dont|do not|did not|didn't|must not|mustn't|shouldn't|should not|can't|cannot|won't|will not|"
            r"no one (?:may|can|should)|nobody (?:may|can|should)|instead of|rather than|not to|stop|avoid|without|"
            r"no need to|there's no reason to|no reason to)\s+"
            r"(?:\w+\s+){0,2}?" + _REMOVE_VERB + r"\b|"
            # "do NOT reset offsets without sign-off": an order not to act without the control keeps it.
            r"\b(?:never|don't|dont|do not|must not|mustn't|shouldn't|should not|can't|cannot|won't|will not)\s+"
            r"(?:\w+\s+){0,2}?" + _ACT + r"\b|\bnot\s+" + _ADVERB + _WORTHLESS + r"|\bisn't\b|\baren't\b|\bnever\b")


def _S(kind: str, pattern: str, unless: str | None = None) -> Signal:
    return signal(kind, WEIGHT, pattern, unless=unless)


SIGNALS: tuple[Signal, ...] = (
    # "<control> … is pointless / optional / advisory only / a formality".
    _S(REMOVAL, _C + r"[^.\n;]{0,40}?\b(?:is|are|was|were|'s|’s|seems?|feels?|felt|became|has become|counts? as)\s+"
                + _ADVERB + _WORTHLESS + r"(?![\w-])"),
    _S(REMOVAL, r"\b(?:consider|treat|regard|mark)\w*\s+(?:the\s+|all\s+|any\s+)?" + _CONTROL + r"\b[^.\n;]{0,20}?\bas\s+"
                + _WORTHLESS + r"(?![\w-])"),
    # "… is enough verification", "counts as identity verification", "enough to reset the password".
    _S(REMOVAL, r"\b(?:is|are|'s|’s|was|be)\s+(?:all\s+|plenty\s+|more than\s+)?(?:enough|sufficient|good enough)\s+"
                r"(?:verification|proof|authentication|identification|id|identity check|approval|review|validation|"
                r"evidence|security|checking)\b"),
    _S(REMOVAL, r"\b(?:counts?|count(?:ed|ing))\s+as\s+(?:(?:an?|the|full|proper)\s+)?(?:identity\s+|id\s+)?"
                r"(?:verification|approval|review|authentication|sign-?off|id check|identity check|consent)\b"),
    _S(REMOVAL, r"\b(?:is|are|'s|’s|was)\s+(?:all\s+)?(?:enough|sufficient)\s+to\s+(?:verify|authenticate|reset|unlock|"
                r"release|approve|prove|confirm|identify|change|transfer|pay)\b"),
    # "skip / bypass / turn off / stop running … <control>".
    _S(REMOVAL, r"\b" + _REMOVE_VERB + r"\b[^.\n;]{0,30}?" + _C, unless=_NEGATED),
    # "merge / pay / deploy … without (a) review / approval".
    _S(REMOVAL, r"\b" + _ACT + r"\b[^.\n;]{0,40}?\bwithout\s+(?:a |an |any |the |our |their |its |further )?"
                r"(?:\w+[ -]){0,2}?" + _CONTROL + r"\b", unless=_NEGATED),
    # "turn MFA off", "switch the alerts off".
    _S(REMOVAL, r"\b(?:turn|switch|set|shut|toggle)\w*\s+(?:the\s+|all\s+)?" + _CONTROL + r"\s+off\b", unless=_NEGATED),
    # "<control> only slows things down / just annoys people / never finds anything".
    _S(REMOVAL, _C + r"[^.\n;]{0,30}?\b(?:only|just|mostly|always|merely)\s+(?:slow|delay|annoy|caus|hurt|block|"
                r"frustrat|get in the way|gets in the way|waste|cost)\w*"),
    _S(REMOVAL, r"\b(?:checking|verifying|calling (?:back|to confirm)|asking for (?:id|more|proof|approval|a code)|"
                r"confirming|reviewing|waiting for (?:approval|review|sign-?off)|double-checking)\b[^.\n;]{0,30}?"
                r"\b(?:only |just |always )?(?:slows?|annoys?|delays?|wastes?|frustrates?|hurts?)\b"),
    _S(REMOVAL, _C + r"[^.\n;]{0,40}?\b(?:hardly ever|never|rarely|almost never|seldom)\s+(?:find|found|catch|caught|"
                r"stop|stopped|flag|flagged|detect|detected)s?\s+(?:anything|a thing|much|real)|"
                + _C + r"[^.\n;]{0,30}?\b(?:found|caught|detected|stopped) nothing\b"),
    # "the restrictions don't apply (to me)", "review rules no longer apply".
    _S(REMOVAL, r"\b(?:restrictions?|rules|controls?|checks?|reviews?|filters?|policies|limits?|guidelines|"
                r"approvals?)\b[^.\n;]{0,25}?\b(?:don't|do not|doesn't|does not|no longer|won't|never|shall not)\s+"
                r"apply\b"),
    # "auto-approve them", "no identity check", "no call-back".
    _S(REMOVAL, r"\bauto[- ]?approv\w*", unless=_NEGATED),
    _S(REMOVAL, r"\bno\s+(?:(?:identity|id|manager|second|human|call-?back|legal|peer|code|further|extra)[ -])?"
                r"(?:check|checks|verification|approval|review|sign-?off|call-?back|confirmation)"
                r"(?:\s+(?:needed|required|necessary))?\b(?!\s+(?:found|issues?|problems?|comments?|yet))"),
    # Other languages: the lexicon's "skip the checks" forms, and "without a call-back".
    _S(REMOVAL, lexicon.SKIP_CHECKS),
    _S(REMOVAL, r"\b(?:sans|sin|senza|ohne|sem|zonder)\s+(?:(?:un|une|le|la|el|il|lo|o|a|einen?|jede|zweite)\s+)?"
                r"(?:rappel\w*|llamada\w*|richiamat\w*|r[üu]ckruf\w*|r[üu]ckfrage\w*|liga[çc][ãa]o|terugbel\w*|"
                r"review|revisi[óo]n|revis[ãa]o|validation|validaci[óo]n|validazione|freigabe|approbation|aprobaci[óo]n|"
                r"aprova[çc][ãa]o|approvazione|autorisation|autorizaci[óo]n)\b"),
    # "no need to / for … <control>", "no need to verify / double-check / call back".
    _S(REMOVAL, r"\bno (?:need|reason) (?:to|for)\s+(?:\w+\s+){0,4}?" + _CONTROL + r"\b",
       unless=r"\bno (?:need|reason) (?:to|for)\s+(?:\w+\s+)?" + _REMOVE_VERB + r"\b"),
    _S(REMOVAL, r"\bno need to (?:verify|check|confirm|double-check|call (?:them )?back|review|validate|authenticate|"
                r"ask for (?:id|approval|a code|the code)|get (?:approval|sign-off))\b"),
    # Self-approval and monitor-only modes, safety flags on a command line.
    _S(REMOVAL, r"\bself[- ]?(?:approv\w*|merg\w*|sign[- ]?off)\b|\b(?:approv\w*|merg\w*|sign\w* off)\s+(?:on\s+)?"
                r"(?:my|your|their|his|her|its|our) own\b", unless=_NEGATED),
    _S(REMOVAL, r"\b(?:monitor|log|report|detect|alert)[- ]only(?: mode)?\b[^.\n;]{0,30}?\b(?:permanently|for good|"
                r"from now on|going forward|indefinitely|always)\b|\b(?:permanently|for good)\b[^.\n;]{0,30}?"
                r"\b(?:monitor|log|report|detect)[- ]only\b"),
    _S(REMOVAL, r"(?:^|\s)(?:--no-verify|--insecure|--ignore-vulnerabilities|--skip-tests|--no-verify-ssl|"
                r"--disable-checks|--force-admin|--admin-override|verify\s?=\s?false|-dskiptests)\b",
       unless=r"\b(?:never|don't|dont|do not|must not|shouldn't|should not|avoid|without)\b"),
    # Privilege grants: admin/root/owner rights or authority given, widened or inherited.
    _S(GRANT, r"\b(?:granted|given|gets?|getting|receives?|inherits?|inherited|holds?|(?:now|automatically|also) "
              r"(?:have|has|hold|holds|get|gets|receive))\s+(?:(?:full|standing|blanket|permanent|unrestricted|"
              r"elevated|the|same|partner-level|all)\s+){0,2}(?:admin\w*|administrator\w*|root|superuser\w*|"
              r"super-user|owner|owners|domain admins?|[\w-]*-admin|sudo|full access|all permissions|unrestricted access|"
              r"signing authority|approval authority|blanket authority|partner-level)\b"),
    _S(GRANT, r"\b(?:is|are)\s+(?:now\s+|hereby\s+|also\s+|automatically\s+)?(?:authori[sz]ed|allowed|permitted|"
              r"cleared|entitled|empowered)\s+to\s+(?:approve|see|view|access|read|execute|run|sign|release|change|"
              r"modify|grant|act|apply|issue|open|close|delete|transfer|pay)\b"),
    _S(GRANT, r"\b(?:treat|regard|consider|count)\w*\s+(?:\w+[ '’-]{1,2}){0,6}?as\s+(?:(?:an?|the|our|one of|a member of|"
              r"part of|coming from)\s+)?(?:\w+\s+)?(?:internal|staff|employees?|trusted|verified|pre-?approved|"
              r"pre-?authori[sz]ed|authori[sz]ed|authoritative|admins?|administrators?|colleagues|us|owners?|"
              r"[\w-]*-level|cleared|official)\b"),
    _S(GRANT, r"\b(?:with|has|have|had|gets?|given)\s+the same (?:permissions|access|rights|privileges|authority)\s+as\b|"
              r"\b(?:read|write|full|admin) access to (?:every|all|any) (?:tenants?|accounts?|customers?|mailboxes|"
              r"records|workspaces?|repos(?:itories)?|databases?)\b"),
    # Policy-memo grants with no power word: "are now considered approved viewers of all case files",
    # "retains the access level of the employee they replaced", "with approve rights up to 50k".
    _S(GRANT, r"\b(?:is|are|will be|shall be)\s+(?:now\s+|henceforth\s+|hereby\s+|automatically\s+)?(?:considered|deemed|"
              r"treated as|classed as|recogni[sz]ed as|designated(?: as)?|counted as)\s+(?:an?\s+|the\s+)?(?:approved|authori[sz]ed|"
              r"trusted|cleared|privileged|designated|default|full)?\s*(?:viewers?|readers?|approvers?|editors?|owners?|co-?owners?|"
              r"members?|signatories|signers?|custodians?|administrators?|delegates?|reviewers?|holders?)\s+(?:of|for|on)\s+"
              r"(?:all|every|any|each|the entire|the whole)\b"),
    _S(GRANT, r"\b(?:retains?|retaining|keeps?|keeping|inherits?|inheriting|assumes?|takes? over|carr(?:y|ies) over)\s+(?:the\s+|their\s+|his\s+|"
              r"her\s+)?(?:full\s+)?(?:access(?: level| rights)?|permissions|privileges|rights|clearance(?: level)?|entitlements|"
              r"role|approval limits?|signing limits?)\s+of\s+(?:the\s+|their\s+|his\s+|her\s+|any\s+)?(?:\w+\s+){0,2}?"
              r"(?:employee|person|user|manager|staff(?: member)?|predecessor|admin\w*|owner|director|colleague|account)s?\b"),
    _S(GRANT, r"\b(?:with|has|have|gets?|given|granted|now holds?)\s+(?:full\s+|unlimited\s+|blanket\s+)?(?:approve|approval|"
              r"sign-?off|signing|release|payment|override|admin)\s+(?:rights|authority|permissions?|powers?)\s+(?:up to|over|"
              r"for all|on all|for every|on every|without)\b"),
    _S(GRANT, lexicon.NOW_GRANTED + r"[^.\n。]{0,40}?" + lexicon.ADMIN),
    _S(GRANT, r"\b(?:role|identity|access level|clearance|permissions?)\s+(?:is|are)\s+now\b|"
              r"\bmerged into (?:the )?admin\b|\bmapped to (?:the )?[\w-]*admin\w*\b|"
              r"\b(?:add|added|adding|put)\s+(?:\w+\s+){0,3}?to\s+(?:the\s+)?(?:domain admins|administrators|admins|"
              r"sudoers|owners|root group|wheel group|admin group)\b"),
)

EXEMPTION, CLAIM, BRIDGE = "standing_exemption", "claimed_credential", "cross_user_bridge"
#: An order not to do it, or a revocation, just before an exemption or a bridge.
_NOT = (r"\b(?:never|don't|dont|do not|must not|mustn't|shouldn't|should not|no longer|not|no|without|revok\w*|"
        r"remov\w*|expired?|instead of|rather than|unless|until (?:verified|confirmed|approved))\b")
_WHO = r"(?:him|her|them|it|this number|that number|this caller|that caller|this account|that account|this sender|that sender)"
_CHECKS = (r"(?:(?:further|more|additional|extra|other|identity|id|security|manager|second|human|approval|fraud|kyc)[ -]){0,2}"
           r"(?:checks?|verifications?|approvals?|reviews?|sign-?offs?|tickets?(?: numbers?)?|call-?backs?|confirmations?|"
           r"questions|id|mfa|2fa|codes?|disclaimers?)")
#: Subject + exemption from a check or limit, as a standing rule: who no longer has to pass it.
EXEMPTIONS: tuple[Signal, ...] = (
    # "treat my / his / Ray's requests as pre-approved": every later request of one person passes.
    signal(EXEMPTION, RULE_WEIGHT, r"\b(?:treat|consider|regard|handle|count)\w*\s+(?:all\s+|any\s+)?(?:\w+[ '’-]{1,2}){0,4}?"
           r"(?:requests?|calls?|messages?|instructions|orders|emails|changes|commands|asks|approvals?|transfers?)\s+as\s+"
           r"(?:already\s+)?(?:pre-?approved|pre-?authori[sz]ed|pre-?cleared|approved|verified|authori[sz]ed|trusted|"
           r"authenticated|cleared|genuine|legitimate)\b", unless=_NOT),
    # "no further identity checks needed for that number", "don't ask him for a ticket number".
    signal(EXEMPTION, RULE_WEIGHT, r"\bno\s+" + _CHECKS + r"\s+(?:are\s+|is\s+)?(?:needed|required|necessary)\s+(?:for|from|with)\s+"
           + _WHO + r"\b"),
    signal(EXEMPTION, RULE_WEIGHT, r"\b(?:don't|dont|do not|no need to|never)\s+(?:ask|make)\s+" + _WHO + r"\s+(?:for|to (?:show|give|"
           r"provide|open|file|raise|pass))\s+(?:an?\s+|the\s+|any\s+|their\s+|his\s+|her\s+)?" + _CHECKS + r"\b"),
    # "his requests don't need to go through the data platform queue".
    signal(EXEMPTION, RULE_WEIGHT, r"\b(?:his|her|their|its|[\w-]+'s)\s+(?:\w+\s+){0,2}?(?:requests?|changes?|orders?|refunds?|"
           r"payments?|deploys?|tickets?|transfers?|access requests?)\s+(?:don't|do not|doesn't|does not|no longer|never)\s+"
           r"(?:need|needs|require|requires|have to|has to)\s+(?:to\s+)?(?:go through|be\s+(?:reviewed|approved|verified|checked|"
           r"ticketed)|(?:an?|the|any)\s+(?:\w+\s+){0,2}?(?:ticket|approval|review|check|queue|sign-?off)s?)\b"),
    # "permanent break-glass access", "standing emergency admin rights".
    signal(EXEMPTION, RULE_WEIGHT, r"\b(?:permanent|standing|indefinite|perpetual|open-ended|always-on|unexpiring|non-expiring)\s+"
           r"(?:break-?glass|emergency|elevated|privileged|admin|root|production|prod|god-?mode|firefighter)\s+"
           r"(?:\w+\s+)?(?:access|rights|privileges?|role|account|credentials?)\b", unless=_NOT),
    # "the billing bot is also the refunds approver now", "limit raised to unlimited".
    signal(EXEMPTION, RULE_WEIGHT, r"\b(?:bot|agent|assistant|service account|automation|script|integration|[\w-]+-bot|"
           r"[\w-]+bot)\s+(?:is|are|becomes?|was made|has been made|was named|is named)\s+(?:now\s+|also\s+)?(?:the|an?)\s+"
           r"(?:\w+\s+)?(?:approvers?|signatory|authori[sz]er|sign-?off)\b", unless=_NOT),
    signal(EXEMPTION, RULE_WEIGHT, r"\b(?:limits?|caps?|ceilings?|thresholds?)\s+(?:\w+\s+)?(?:raised|increased|set|bumped|changed|"
           r"lifted|moved)\s+to\s+(?:unlimited|no limit|infinit[ey]|any amount)\b", unless=_NOT),
    # "everyone in the Sales org is added to Finance-Approvers".
    signal(GRANT, WEIGHT, r"\b(?:add|added|adding|put|joins?|moved)\s+(?:\w+\s+){0,6}?to\s+(?:the\s+)?[\w-]*(?:approvers|"
           r"approver group|signatories|admin group|owners group)\b", unless=_NOT),
    # A dropped safety disclaimer: "skip the 'consult a professional' language".
    signal(REMOVAL, WEIGHT, r"\b(?:skip|drop|leave out|omit|remove|without|no more)\w*\s+(?:the\s+|any\s+|all\s+)?"
           r"(?:(?:['\"‘“][^'\"’”\n]{1,40}['\"’”]|safety|medical|legal)\s+)?(?:disclaimers?|caveats?|warnings?|"
           r"language|wording|boilerplate)\b", unless=_NEGATED),
    # A credential claimed and "confirmed" by the text itself: "user is a doctor (confirmed)".
    signal(CLAIM, WEIGHT, r"\b(?:user|caller|he|she|they|customer|client|i|i'm|patient)\s+(?:is|am|are|'s)?\s*(?:an?\s+)?"
           r"(?:licensed\s+|registered\s+|practising\s+|practicing\s+)?(?:doctor|physician|nurse|pharmacist|clinician|"
           r"surgeon|lawyer|attorney|police officer|officer|detective|auditor|regulator|investigator|administrator|admin)\s*"
           r"(?:\((?:confirmed|verified)\)|,?\s*(?:confirmed|verified))"),
)
#: One person's records offered to another: a relative's, classmate's or other client's file, scores or budget.
_RECORDS = (r"(?:test scores?|scores?|grades?|marks|results?|report cards?|files?|records?|budgets?|salar(?:y|ies)|"
            r"statements?|balances?|accounts?|diagnos[ie]s|medical \w+|health \w+|transcripts?|payslips?|tax \w+|"
            r"case(?: notes)?|dossiers?|progress|assessments?|spending|portfolios?|history|notes)")
_RELATIVE = (r"(?:classmates?|sister|brother|sibling|cousin|neighbou?r|roommate|flatmate|colleague|coworker|co-worker|"
             r"friend|ex|ex-wife|ex-husband|wife|husband|partner|mother|father|mum|mom|dad|son|daughter|teammate|"
             r"boss|manager|tenant|landlord)")
BRIDGES: tuple[Signal, ...] = (
    # "reference his classmate Ava's test scores", "give her her sister's file too".
    signal(BRIDGE, RULE_WEIGHT, r"\b(?:give|show|share|send|reference|cite|pull|compare|tell|read out|include|mention|use|quote|"
           r"forward|attach|look up|bring up)\w*\s+(?:\w+\s+){0,4}?(?:his|her|their)\s+" + _RELATIVE +
           r"(?:'s|s'|’s)?\s+(?:[\w-]+(?:'s|’s)\s+)?(?:\w+\s+)?" + _RECORDS + r"\b", unless=_NOT),
    # "pull Marco's and Greta's budgets to give her real examples", "my other clients' budgets".
    signal(BRIDGE, RULE_WEIGHT, r"\b(?:give|show|share|send|reference|cite|pull|compare|read out|use|forward|attach)\w*\s+"
           r"(?:(?:my|our|the)\s+)?other\s+(?:clients?|customers?|patients?|students?|pupils|users?|members?|tenants?|families|"
           r"kids|children|parents|employees)(?:'s|s'|'|’)?\s+(?:\w+\s+)?" + _RECORDS + r"\b", unless=_NOT),
    signal(BRIDGE, RULE_WEIGHT, r"\b(?:pull|share|show|send|give|use|reference|cite|forward|read out)\w*\s+[\w-]+(?:'s|’s)\s+"
           r"(?:and|&|,)\s+[\w-]+(?:'s|’s)\s+(?:\w+\s+)?" + _RECORDS + r"\b[^.\n;]{0,60}?\b(?:to|for|with|so)\s+"
           r"(?:give\s+|show\s+)?(?:her|him|them)\b", unless=_NOT),
    # "any parent in Room 4 can ask about any child in Room 4".
    signal(BRIDGE, RULE_WEIGHT, r"\bany\s+(?:parent|guardian|customer|client|user|patient|member|tenant|employee|student|caller|"
           r"resident|family)s?\b[^.\n]{0,40}?\b(?:can|may|is allowed to|gets to)\s+(?:ask about|see|view|access|read|get|look up|"
           r"query|check)\s+(?:\w+\s+){0,2}?(?:any|every|all|other)\s+(?:child|children|kids?|students?|pupils?|customers?|"
           r"clients?|users?|patients?|members?|tenants?|employees?|accounts?|records?|residents?|famil(?:y|ies))\b", unless=_NOT),
    # A customer shown another customer's pricing: "share the quotes we sent Novabank (their competitor)".
    signal(BRIDGE, RULE_WEIGHT, r"\b(?:share|show|send|give|forward|pass|disclose|reveal)\w*\s+[^.\n;]{0,60}?\b(?:quotes?|pricing|"
           r"prices|rates|terms|contracts?|proposals?|bids?|discounts?|invoices?)\b[^.\n;]{0,60}?\b(?:competitors?|rivals?)\b",
           unless=_NOT),
    # The same bridge in French: "donne-lui aussi celui de sa sœur".
    signal(BRIDGE, RULE_WEIGHT, r"\b(?:donne|montre|envoie|partage|transmets)\w*(?:-lui|-leur)?\s+(?:aussi\s+)?(?:celui|celle|ceux|"
           r"le dossier|les dossiers|les notes|les r[ée]sultats)\s+(?:de|d')\s*(?:sa|son|ses|leur)\s+(?:s(?:œ|oe)ur|fr[èe]re|m[èe]re|"
           r"p[èe]re|mari|femme|voisin\w*|coll[èe]gue|cousin\w*|camarade\w*)"),
)


#: A rule for later: what makes a removed control poisoning rather than a report of one event.
RULE = re.compile(
    r"\b(?:from now on|going forward|moving forward|from next (?:week|month|sprint)|in (?:the )?future|for future|"
    r"next time|as a rule|rule of thumb|best practice|standard (?:fix|practice|approach|setup)|"
    r"recommended (?:approach|setup|practice)|takeaways?|lessons?|learn(?:ed|t|ing|ings)|insights?|retro\w*|"
    r"post-?mortem|experience|past success|what worked|keep (?:doing|using|sharing|it|them)|do(?:ing)? (?:that|this) "
    r"(?:whenever|for|every)|whenever|any ?time|every ?time|for any(?:one)?|anything (?:under|below)|as long as|"
    r"in similar cases|polic(?:y|ies)|memo|handbook|guidelines?|charter|effective|as of|permanently|for good|"
    r"from here on|by default|agreed|settled on|the (?:agent|assistant) (?:should|may|can|is)|you can|"
    r"is now|are now|now (?:have|has|hold)|reuse|the rule)\b|"
    # The same cues in the languages of ``lexicon``: lesson, learned, experience, best practice, rule.
    r"\b(?:le[çc]ons?(?: retenues?)?|retours? d'exp[ée]rience|bonnes? pratiques?|r[èe]gle|erkenntnis\w*|lektion|"
    r"gelernt|erfahrung\w*|best practice|faustregel|lecci[óo]n(?:es)?|aprendizaje|aprendido|experiencia|regla|"
    r"li[çc][ãa]o|aprendizado|aprendemos|experi[êe]ncia|regra|lezion[ei]|imparato|esperienza|regola|les(?:sen)? geleerd|"
    r"ervaring|vuistregel)\b|" + lexicon.FUTURE,
    re.MULTILINE)


#: Commands that destroy data or open a system: what must never run unasked.
_DESTROY = re.compile(
    r"\brm\s+-[a-z]*(?:rf|fr)[a-z]*\b|\brm\s+-r\s+-f\b|\bdrop\s+(?:table|database|schema|collection|keyspace)s?\b|"
    r"\bdrop_(?:table|database|schema|all)\w*|\btruncate\s+(?:table\s+)?[\w.\"`]+|\bterraform\s+destroy\b|"
    r"\bgit\s+push\s+(?:\S+\s+){0,2}?(?:--force|-f)\b|\bforce[- ]push\w*|\bdelete\s+from\s+[\w.\"`]+|"
    r"\bkubectl\s+delete\b|\bdelete_all\w*|\biptables\s+-f\b|\bufw\s+disable\b|\bmkfs(?:\.\w+)?\b|\bdd\s+if=|"
    r"\bflushall\b|\bdropdb\b|\b(?:delete|disable|wipe|purge|destroy|shut\s?down|turn off|drop)\w*\b[^.\n;]{0,30}?"
    r"\b(?:in |on |the )?(?:prod|production)\b", re.MULTILINE)
#: A directive to run it without a person confirming.
_UNASKED = re.compile(
    r"\b(?:don't|dont|do not|no need to|never)\s+(?:ask|check|confirm|wait)\w*(?:\s+(?:first|anyone|me|us|them|before))?\b|"
    r"\bwithout\s+(?:asking|confirm\w*|checking|approval|prompting|a prompt|waiting|double-checking)\b|"
    r"\bno\s+(?:confirmation|questions asked|prompt|approval|sign-?off)(?:\s+(?:needed|required|necessary))?\b|"
    r"\bskip\w*\s+(?:the\s+)?(?:confirm\w*|prompt)\b|\bautomatically\b|\bauto-?(?:action|run|execute)\w*|"
    r"\bjust (?:run|do) it\b|(?:^|\s)(?:--auto-approve|-auto-approve|--no-confirm|--force-yes)\b|\bsilently\b|"
    # The same in the lexicon's languages: "sans demander", "ohne (zu) fragen / Rückfrage", "sin preguntar",
    # "senza chiedere", "sem perguntar", "zonder (te) vragen", "automatiquement" …, and 確認せず / 无需确认.
    r"\b(?:sans (?:demander|confirm\w*|v[ée]rifier)|ohne (?:zu )?(?:fragen|nachzufragen|r[üu]ckfrage|best[äa]tigung)|"
    r"sin (?:preguntar|confirm\w*|consultar)|senza (?:chiedere|conferma\w*)|sem (?:perguntar|confirma\w*)|"
    r"zonder (?:te )?(?:vragen|bevestig\w*)|automatiquement|automatisch|autom[áa]ticamente|automaticamente)\b|"
    r"確認(?:せず|しない|なし|不要)|聞かずに|无需确认|不用确认|直接执行",
    re.MULTILINE)
_NEAR = 160
#: An order *not* to run it, just before the command.
_DONT = re.compile(r"\b(?:never|don't|dont|do not|must not|mustn't|shouldn't|should not|avoid|no one should|not)\b")


def _unconfirmed(folded: str) -> list[tuple[int, int]]:
    """Spans of a destructive command and a skip-the-confirmation directive in one field, or none."""
    for m in _DESTROY.finditer(folded):
        if _DONT.search(folded, max(0, m.start() - 40), m.start()):
            continue
        # Near the command (the same or the next sentence): a directive far away is about something else.
        unasked = _UNASKED.search(folded, max(0, m.start() - _NEAR), m.end() + _NEAR)
        if unasked:
            return [m.span(), unasked.span()]
        # Or aimed at production and run on a standing trigger ("run this whenever staging looks stale"):
        # nobody is asked because nobody is there when the trigger fires.
        prod = _PROD.search(folded, max(0, m.start() - _NEAR), m.end() + _NEAR)
        standing = _RECURRING.search(folded, max(0, m.start() - _NEAR), m.end() + _NEAR)
        return [m.span(), prod.span(), standing.span()] if prod and standing else []
    return []


#: Production named near a command (``$PROD_URL``, "prod-db", "the production cluster").
_PROD = re.compile(r"(?<![a-z])(?:prod|production)(?![a-z])|\$\{?prod\w*|\blive (?:db|database|cluster)\b")
#: A trigger that fires on later turns with no one asked: "whenever", "every night", "each time".
_RECURRING = re.compile(r"\b(?:whenever|every ?time|each time|any ?time|automatically|nightly|every (?:night|morning|day|hour|week|"
                        r"run|deploy)|each (?:night|morning|day|hour|week|run|deploy)|on (?:every|each) \w+)\b")


#: A management port opened to the whole internet: a firewall rule or security group allowing SSH, RDP or a
#: database port from ``0.0.0.0/0`` / ``::/0`` / "anywhere" (web ports to the world are ordinary).
_WORLD_OPEN = re.compile(
    r"\b(?:open|opens|opening|allow|allows|allowing|expose|exposes|exposing|permit|whitelist|add an? (?:ingress )?rule for)\s+"
    r"(?:\w+\s+){0,3}?(?:(?:tcp\s+)?port\s+)?(?:22|23|3389|5432|3306|1433|1521|6379|27017|9200|5900|2375|445|ssh|rdp|"
    r"telnet|vnc|postgres|mysql|redis|mongo\w*|elasticsearch|docker)\b[^.\n;]{0,40}?\b(?:to|from|for)\s+(?:the\s+)?"
    r"(?:0\.0\.0\.0/0|::/0|whole internet|entire internet|internet|world|anywhere|everyone|all ips|any ip|all addresses)",
    re.MULTILINE)


#: A tool whose call moves money, grants, approves, deletes or unlocks: harmful on every item, or with a
#: zero / off argument. Names are code-shaped (snake_case or dotted) and followed by an argument list.
_HARM_STEM = (r"(?:approv|authori[sz]|grant|refund|payout|pay|transfer|wire|delet|remov|purge|wipe|eras|destroy|drop|"
              r"disabl|deactivat|unlock|overrid|bypass|releas|void|cancel|reset|unban|whitelist|allowlist|elevat|"
              r"promot|escalat|credit|waiv|write_?off|comp|clos|dismiss|accept|set)")
# Bounded name parts: an unbounded "(?:a.)*" retried from every start was quadratic on "a.a.a." (64 KiB).
_CALL = re.compile(r"\b(?:[a-z][a-z0-9]{0,30}[_.]){0,4}" + _HARM_STEM + r"[a-z0-9_.]{0,40}\s{0,3}\(([^()\n]{0,120})\)",
                   re.MULTILINE)
#: A call whose name overrides or bypasses a safeguard (``payments.override_hold(...)``, ``bypass_kyc()``): harmful
#: with any argument, as the zero / every-item argument makes an approving call harmful.
_OVERRIDE_CALL = re.compile(r"(?:overrid|bypass|force_?approv|skip_?(?:check|review|kyc|verif|approv|fraud)|disable_?(?:check|"
                            r"fraud|kyc|mfa|2fa|guard|safety|limit))\w*\s{0,3}\(")
#: A zero / off / unlimited value given to a setting (``rate=0``, ``enabled: false``, ``limit=None``).
_ZERO_ARG = re.compile(r"(?:=|:)\s*(?:0(?:\.0+)?|false|none|null|off|disabled?|-1|9{4,}|inf|unlimited|['\"]?\*['\"]?)\s*(?:,|$)"
                       r"|\b(?:all|every|any)\b|['\"]\*['\"]")
#: "For every / each / all …": the call applies to every item.
_EVERY = re.compile(r"\b(?:for|on|to|against)\s+(?:every|each|all|any)\b|\b(?:every|each|all)\s+(?:\w+\s+){0,2}?"
                    r"(?:claims?|orders?|items?|records?|users?|accounts?|tickets?|requests?|invoices?|bookings?|reports?|"
                    r"refunds?|payments?|transactions?|rows?|entries|applications?|cases?|members?|customers?|guests?|"
                    r"alerts?|pending|one|in the (?:queue|list|backlog|inbox))\b")
#: A setting of a safeguard written to zero / off / unlimited in prose ("write 0 to the interlock register").
_SAFETY_WRITE = re.compile(
    r"\b(?:write|writes|writing|wrote|set|sets|setting|force|forcing|forced|put|load|poke|jumper|jump)\s+(?:a\s+|the\s+value\s+)?"
    r"(?:0|zero|false|off|0x0+)\s+(?:to|on|in|into|at)\s+(?:the\s+)?(?:[\w-]+\s+){0,3}?(?:safety|interlock|guard|e-?stop|"
    r"emergency[- ]stop|trip|limit|alarm|relief|overload|watchdog|protection|light curtain)\b|"
    r"\b(?:set|sets|setting|put|raise|change|changing|bump)\s+(?:the\s+)?(?:[\w-]+\s+){0,2}?(?:safety|interlock|overload|pressure|"
    r"temperature|speed|current|torque|dose|dosage|credit|spending|withdrawal|refund|payout|discount|transfer)\s+"
    r"(?:limit|threshold|cap|cut-?off|setpoint|trip point|ceiling|maximum|max)s?\s+to\s+(?:0|zero|off|none|max\w*|the max\w*|"
    r"9{4,}|unlimited|infinity|100 ?%)(?![\w.])", re.MULTILINE)
#: A standing trigger beside the call: it runs on later turns, unasked.
_STANDING = re.compile(r"\b(?:when(?:ever)?|after (?:each|every|any)|before (?:each|every|any)|each (?:morning|night|day|time|week|"
                       r"shift|hour)|every (?:morning|night|day|time|week|shift|hour)|automatically|from now on|going forward|"
                       r"by default|always|on (?:each|every)|if (?:the )?(?:\w+ ){0,3}(?:fails?|errors?|throws?|faults?|"
                       r"complains?|asks?|says?|alarms?|trips?|stops?|jams?|hangs?|returns?|raises?|hits?|flags?|holds?|blocks?))\b|"
                       r"\bnext time\b")


def _tool_calls(folded: str) -> tuple[float, list[tuple[int, int]]]:
    """The weight and spans of a harmful tool call in one field: a code-shaped call of a tool that
    approves, pays, deletes or unlocks, with a zero / off / every-item argument or said to run on
    every item, or a safeguard's setting written to zero / off; 0.6 beside a standing trigger."""
    for m in list(_CALL.finditer(folded)) + list(_SAFETY_WRITE.finditer(folded)) + list(_WORLD_OPEN.finditer(folded)):
        if _DONT.search(folded, max(0, m.start() - 40), m.start()):
            continue
        if m.re is _CALL:
            harmful = (_ZERO_ARG.search(m.group(1)) or _EVERY.search(folded, max(0, m.start() - 80), m.end() + 80)
                       or _OVERRIDE_CALL.search(folded, m.start(), m.end()))
            if not harmful:
                continue
        trigger = _STANDING.search(folded, max(0, m.start() - _NEAR), m.end() + _NEAR) or _EVERY.search(
            folded, max(0, m.start() - 80), m.end() + 80)
        spans = [m.span()] + ([trigger.span()] if trigger else [])
        return (DESTRUCTION_WEIGHT if trigger else WEIGHT), spans
    return 0.0, []


#: A compensating control kept beside a relaxation: what a bounded, legitimate relaxation states and a
#: fake lesson leaves out ("manual check stays for new SKUs", "lost-device cases still need the manager").
COMPENSATING = re.compile(
    r"\b(?:still|remains?|stays?|continues? to|is kept|are kept|keep(?:s|ing)? (?:the|a|our)|unchanged|the same as before)\b"
    r"[^.\n;]{0,60}?\b(?:need|needs|needed|require[sd]?|required|mandatory|in place|apply|applies|approv\w*|sign\w*|"
    r"check\w*|review\w*|verif\w*|audit\w*|inspect\w*|test\w*|for (?:new|any|all|every))|"
    r"\b(?:audited|reviewed|spot-checked|sampled|re-?checked)\s+(?:daily|weekly|monthly|every|each)\b|"
    r"\b(?:approved|signed off|agreed) (?:by|with) (?:the )?(?:security|safety|compliance|risk|quality|qa|legal|"
    r"finance|audit|dpo|ciso|cab|change board)\b", re.MULTILINE)


def compensated(text: str) -> bool:
    """Whether ``text`` keeps a compensating control beside what it relaxes."""
    return COMPENSATING.search(fold(text[:SCAN_LIMIT]).text) is not None


def _quoted(folded: str, span: tuple[int, int]) -> bool:
    """Whether ``span`` lies in a quotation of a text about attacks (a write-up quoting one)."""
    return any(start <= span[0] and span[1] <= end for start, end in quoted_spans(folded))


def rule_cue(text: str) -> tuple[int, int] | None:
    """The span of the first rule cue (``RULE``) in ``text``, in its own offsets, or None."""
    folded = fold(text[:SCAN_LIMIT])
    cue = RULE.search(folded.text)
    return folded.span(*cue.span()) if cue else None


def evidence(fields: Sequence[TextField]) -> tuple[dict[str, float], list[Span]]:
    """The kinds seen (weight per kind) and their spans; a kind beside a rule cue in the same field
    weighs ``RULE_WEIGHT`` (quoted speech in a text about attacks stays weak, as in ``signals``)."""
    best, spans = collect(SIGNALS + EXEMPTIONS + BRIDGES, fields)
    for item in fields:
        folded = fold(item.text[:SCAN_LIMIT])
        found = _unconfirmed(folded.text)
        if found:
            best[DESTRUCTION] = DESTRUCTION_WEIGHT
            spans += [Span(item.field, *folded.span(*span)) for span in found]
        weight, found = _tool_calls(folded.text)
        if weight and not _quoted(folded.text, found[0]):
            best[TOOL] = max(best.get(TOOL, 0.0), weight)
            spans += [Span(item.field, *folded.span(*span)) for span in found]
    if not any(kind in best for kind in (REMOVAL, GRANT)):
        return best, spans
    ruled = [s.field for s in spans]
    for item in fields:
        if item.field not in ruled:
            continue
        folded = fold(item.text[:SCAN_LIMIT])
        cue = RULE.search(folded.text)
        if COMPENSATING.search(folded.text):
            # A relaxation that keeps a compensating control is not a removal, whatever else the text says.
            best.pop(REMOVAL, None)
            continue
        if cue is None:
            continue
        for kind in (REMOVAL, GRANT):
            if best.get(kind, 0.0) >= WEIGHT:
                best[kind] = RULE_WEIGHT
        spans.append(Span(item.field, *folded.span(*cue.span())))
    return best, spans
