"""``prompt_injection``: text shaped as instructions to the agent for later turns.

A memory is read back into a model's context, so text that *instructs* (rather than records) is
how memory poisoning works (MINJA, AgentPoison, MemoryGraft): "ignore previous instructions",
"from now on always …", "whenever the user asks about X, say Y", fake system messages, and
instructions to hide something from the user. Kinds of evidence and their weights:

* ``override`` (0.9): ignore / disregard / forget previous instructions, "your new instructions".
* ``impersonation`` (0.85): chat-template tokens, ``system:`` lines that give orders,
  "message from the administrator", "I am your developer".
* ``concealment`` (0.8): "do not tell the user", "keep this secret from the user".
* ``credential_request`` (0.75): ask the user for a password, OTP, card number, seed phrase.
* ``weakening`` (0.6): skip verification / approve every request / without confirmation.
* ``trigger`` (0.55): "when(ever) the user asks … respond/recommend/say …".
* ``directive`` (0.5): sentence-initial "Always/Never <agent verb>", "you must", "the assistant should";
  also (0.45) "from now on", "in all future conversations", "in every response".
* ``promotion`` (0.4): "only/exclusively recommend", "recommend X instead".
* ``hidden_markup`` (0.8): instructions hidden where a reviewer's rendered view does not show them
  but a model reads them: an HTML comment addressed to the assistant, tool or system
  (``<!-- assistant: … -->``), a markdown link title that gives orders (``[x](url "ignore …")``), a
  code comment addressed to the AI (``# note to the assistant: …``); and any order to the agent
  (``_HIDDEN_ORDER``: an address to it, override words, standing or covert orders) inside a
  container the rendered page hides: HTML or markdown comments (``[//]: # (…)``), link
  definitions and footnotes, elements styled invisible or white, ``<details>``, alt text, link
  titles, code comments, fences labelled ``note``/``system``/``instructions``.
* ``tool_directive`` (0.75): orders about the agent's tool calls ("the next tool call must be …",
  "call delete_all_memories", a destructive ``delete_all_*`` / ``drop_*`` tool named).
* ``control_removal`` / ``privilege_grant`` (0.45, or 0.6 beside a rule cue such as "going forward",
  "takeaway", "policy"): a safeguard removed or declared unnecessary, or rights or trust granted,
  found by ``controls`` (a lesson or memo in ordinary prose that takes a check away).

A command to run (``curl … | sh``) and a link the agent is told to send people to are no longer
kinds here: they are the ``command`` and ``destination`` categories (``effects``), read from the
command's and the link's structure and staged by the write's provenance.

Preferences are instructions too ("From now on, always answer in French"), so a standing
directive alone stays medium and the default policy lets it through; a trigger, two kinds, or one
strong kind reach high.
Known limits: English only; a paraphrase with none of these shapes ("the correct refund
address is …") is not an injection to this detector (contradiction and exfiltration may catch
it); no semantic understanding.
"""

from __future__ import annotations

from typing import Sequence

from app.core.screening import controls, lexicon
from app.core.screening.flags import RiskFlag, TextField
from app.core.screening.signals import Signal, Thresholds, collect, signal, to_flag

NAME = "prompt_injection"
# Calibrated on the dev split of the screening corpus (see docs/benchmarks/): 0.55 is the lowest
# high threshold that keeps one weak cue (a standing directive, 0.5) medium, which ordinary
# preferences ("always answer in French") need; it stages a lone trigger ("whenever the user asks
# …, say …", 0.55). The dev split alone would allow 0.45 (it holds no benign standing directive).
THRESHOLDS = Thresholds(medium=0.4, high=0.55)

_AGENT = r"(?:you|the assistant|assistant|the agent|the ai|the model|the bot|the chatbot|claude|chatgpt|gpt)"
_AGENT_VERBS = (
    r"(?:respond|reply|answer|recommend|suggest|include|add|append|prepend|use|send|forward|cc|bcc|call|run|"
    r"execute|tell|say|mention|refer|redirect|link|direct|point|output|print|write|insert|claim|state|"
    r"describe|treat|trust|approve|grant|transfer|pay|route|share|email|post|upload|ask|request|promote|"
    r"advertise|report|sign|end|start|begin|reveal|disclose|ignore|obey|follow|comply|prioriti[sz]e|"
    r"assume|consider|classify|mark|label|refuse|deny|accept|allow|quote|cite|provide|give|offer|push)"
)
#: An address to the agent in many languages (the word, an optional role word or particle, then a
#: colon or dash): what turns a hidden note into a message for the model, whatever its language.
_ADDRESS = (r"(?<![\w])(?:assistant[ea]?|asistente|assistent(?:e|in)?|asystent(?:ka)?|asystencie|assistente|ki|ia|ai|"
            r"llm|agent[ea]?|agente|bot|chatbot|model(?:o|e)?|модель|ии|ассистент|агент|бот|yapay zek[aâ]|"
            r"アシスタント|エージェント|ボット|助手|智能体|어시스턴트|에이전트|المساعد|الذكاء الاصطناعي|"
            r"sistema|système|systeem|sistem|система|システム|系统|시스템)"
            r"(?:[ \t-]{0,2}(?:reviewer|agent|assistant|assistent|reader|model|bot|system|tool|crawler|summari[sz]er|"
            r"prüfer|relecteur|revisor|lettore))?(?:へ|に|宛て?|에게|께|,)?[ \t]{0,3}[:：>\u2014]")
#: Standing and covert orders in other languages ("from now on", "always", "do not tell"), and an
#: English imperative opening a clause ("When summarizing, say …"): inside a hidden container these
#: are orders; an ordinary hidden note ("TODO: update the screenshot") has none of them.
_ORDER_CUES = (r"\b(?:ab sofort|von nun an|k[üu]nftig|dor[ée]navant|d[ée]sormais|[àa] partir de maintenant|"
               r"a partir de ahora|de ahora en adelante|d'ora in (?:poi|avanti)|vanaf nu|voortaan|a partir de agora|"
               r"de agora em diante|od teraz|od dzi[śs]|отныне|впредь|bundan sonra|bundan b[öo]yle)\b|"
               r"今後|これから|以后|从现在起|앞으로|من الآن|"
               r"(?:^|[,:;.!?]\s{0,4})(?:please\s+)?(?:say|tell|answer|reply|respond|claim|state|describe|rate|score|"
               r"approve|recommend|append|mention|treat|forward|summari[sz]e|grant)\s+(?:that|the|this|it|"
               r"them|every|all|any|a|an|only|always|never|to|[\"'])")
#: What makes hidden text an order to the agent: an address to it ("assistant:", "AI reading
#: this"), or an instruction shape (override words, standing or covert orders, an agent verb after
#: always/never). Ordinary hidden notes ("TODO: update the screenshot") have neither.
_HIDDEN_ORDER = (r"\b(?:assistant|agent|ai|llm|model|bot|chatbot|system|claude|gpt)[ \t]{0,3}(?:[:>\u2014]|-[ \t]|,[ \t]|"
                 r"reading\b|instructions?\b)|"
                 # The address in other languages and scripts, and "AI reviewer:" / "KI-Assistent:" (a role
                 # word after the address); "AIへ：" ("to the AI") folds to "aiへ:".
                 + _ADDRESS + r"|" + _ORDER_CUES + r"|\b(?:note|instructions?|message|reminder) (?:to|for) (?:the )?"
                 r"(?:assistant|agent|ai|llm|model|bot)\b|"
                 r"\byou (?:must|should|shall|are now|will now|need to|have to)\b|"
                 # "ignore the soft-deleted rows" in a SQL comment is about data; an order ignores instructions.
                 r"(?<![\w-])(?:ignore|disregard|override)\s+(?:(?:all|any|the|your|my|its|these|those)\s+)?"
                 r"(?:previous|prior|above|earlier|preceding|original|system|safety|user'?s?|instructions?|rules|"
                 r"guidelines|polic(?:y|ies)|restrictions|prompts?|guardrails|filters?|content polic)|"
                 r"\bfrom now on\b|\b(?:for|in) (?:all )?(?:future|later|next) (?:turns?|sessions?|chats?|replies|answers)\b|"
                 r"\bnext time\b|\bwhenever\b|\b(?:do not|don't|never) (?:mention|tell|reveal|ask|inform|show)\b|"
                 r"\bwithout (?:asking|confirmation|confirming|checking|approval)\b|"
                 r"\b(?:always|never|only|must)\s+" + _AGENT_VERBS + r"\b|"
                 r"\b(?:recommend|forward|cc|bcc|email|send|share|reveal|approve|trust|book|blame|deny|tell|grant|"
                 r"transfer|pay)\s+(?:the|a|an|all|every|any|only|them|their|users?'?s?)\b")
_USER = r"(?:the user|the users|users|the customer|customers|the human|the caller|the client|them|the requester)"

WEIGHTS = {"override": 0.9, "impersonation": 0.85, "concealment": 0.8, "credential_request": 0.75,
           "weakening": 0.6, "trigger": 0.55, "directive": 0.5, "promotion": 0.4,
           "hidden_markup": 0.8, "tool_directive": 0.75}


def _s(kind: str, pattern: str, weight: float | None = None, unless: str | None = None) -> Signal:
    return signal(kind, WEIGHTS[kind] if weight is None else weight, pattern, unless=unless)


def _hidden(container: str) -> Signal:
    return signal("hidden_markup", WEIGHTS["hidden_markup"], container, _HIDDEN_ORDER)


SIGNALS = (
    _s("override",
           r"\b(?:ignore|disregard|forget|overrides?|overriding|bypass|discard|drop|abandon|supersedes?|replaces?)\b[^.\n]{0,40}?"
           r"\b(?:previous|prior|earlier|above|preceding|all|any|your|system|original|existing|other|safety|"
           r"old|initial)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|guidelines|directives|guardrails|"
           r"polic(?:y|ies)|constraints|programming|system messages?|restrictions)\b"),
    _s("override", r"\b(?:new|updated|revised|real|true|actual) (?:system )?(?:instructions|directives|orders)\s*[:\-]"),
    _s("override", r"\byour (?:new|real|true|actual|updated) (?:instructions|purpose|goal|task|role|directive|objective)\b"),
    # "jailbreak" alone is a topic (talks and papers name it); a mode being switched on is the attack.
    _s("override", r"\b(?:jailbr(?:oken|eak(?:ed)?) mode|dan mode|developer mode (?:enabled|on|activated|unlocked)|"
                   r"god mode|(?:enable|activate|unlock|enter)\w{0,3} (?:developer|jailbreak|dan|god) mode)\b"),
    _s("impersonation",
           r"<\|?(?:im_start|im_end|system|endoftext|eot_id|start_header_id)\|?>|\[/?inst\]|<</?sys>>|"
           r"</?(?:system|instructions?|memory|context|admin)>"),
    _s("impersonation",
           r"^[ \t]{0,64}[\[\(#*]{0,4}[ \t]{0,4}(?:system|developer|admin|administrator|root|assistant)[ \t]{0,4}"
           r"(?:prompt|message|note|notice|override|instructions?|update)?[ \t]{0,4}[\]\)*]{0,4}[ \t]{0,4}[:>\-]\s{0,8}"
           r"(?:you\b|ignore|always|never|from now|the assistant|do not|don't|new |important|all )"),
    _s("impersonation",
           r"\b(?:message|note|instructions?|notice|directive|order|memo|update)\s+from\s+(?:the\s+)?"
           r"(?:system|administrator|admin|developers?|openai|anthropic|security team|it department|"
           r"operator|platform|your creators?)\b"),
    _s("impersonation", r"\bsystem (?:override|instruction|notice|directive)s?\b"),
    # Naming "the system prompt" is a topic (developers and security reviews talk about it), not an
    # impersonation; claims to change or quote the agent's own prompt are ``protected_memory``'s.
    _s("impersonation", r"\bsystem prompts?\b", 0.45),
    _s("impersonation",
           r"\b(?:i am|i'm|this is) (?:your|the) (?:developer|administrator|admin|system|creator|operator|owner)\b"
           # "I'm the admin of our Slack workspace" is a fact about the user's job elsewhere.
           r"(?!\s+(?:of|for|on|at|in)\s+(?!(?:this|the|your) (?:system|assistant|agent|platform|bot|model)))"),
    _s("impersonation", r"\bend of (?:memory|context|user (?:input|data|message))\b"),
    _s("concealment",
           r"\b(?:do not|don't|dont|never|without)\s+(?:ever\s+)?(?:tell|telling|inform|informing|mention|"
           r"mentioning|reveal|revealing|disclose|disclosing|notify|notifying|alert|alerting|warn|warning|"
           r"let)\b[^.\n]{0,20}?" + _USER + r"\b"),
    _s("concealment",
           r"\b(?:keep|hide)\b[^.\n]{0,25}?\b(?:secret|hidden|confidential|private)?\s*from\s+" + _USER + r"\b"),
    _s("concealment",
           r"\b(?:this|these) (?:instructions?|rules?|notes?|memor(?:y|ies))\b[^.\n]{0,30}?"
           r"\b(?:secret|hidden|confidential|must not be (?:shown|revealed|mentioned))\b"),
    _s("credential_request",
           r"\b(?:ask|request|prompt|collect|get|obtain|require|have|make|tell)\b[^.\n]{0,20}?"
           r"\b(?:the user|users|the customer|customers|them|him|her)\b[^.\n]{0,40}?"
           r"\b(?:password|passcode|pin|otp|one[- ]time (?:code|password)|2fa code|mfa code|verification code|"
           r"security code|cvv|cvc|seed phrase|recovery phrase|private key|ssn|social security number|"
           r"card number|card details|bank details|login details|credentials|bank login)\b"),
    _s("weakening",
           r"\b(?:skip|bypass|disable|turn off|switch off|omit|suppress|ignore)\b[^.\n]{0,30}?"
           r"\b(?:verification|authentication|2fa|mfa|confirmation|safety checks?|security checks?|"
           r"approvals?|review|warnings?|validation|identity checks?|fraud checks?|content filters?)\b",
           # "there's no need to turn off certificate verification" argues for the check.
           unless=r"\b(?:no need to|don't|do not|never|not|shouldn't|should not|stop|instead of)\s+(?:ever\s+)?"
                  r"(?:skip|bypass|disable|turn off|switch off|omit|suppress|ignore)\b"),
    _s("weakening",
           r"\b(?:approve|accept|authori[sz]e|grant|execute|run|process|honou?r)\b[^.\n]{0,20}?"
           r"\b(?:all|any|every)\b[^.\n]{0,25}?\b(?:requests?|transfers?|payments?|commands?|refunds?|"
           r"invoices?|access requests?|withdrawals?|scripts?)\b"),
    _s("weakening", r"\bgrant\b[^.\n]{0,30}?\b(?:admin|root|full|elevated|superuser) (?:access|rights|privileges|permissions)\b"),
    _s("weakening",
           r"\b(?:without|no need for|no need to)\s+(?:asking|asking for|any|further)?\s*(?:confirmation|confirming|"
           r"verification|verifying|approval|checking|review|double-checking)\b"),
    _s("trigger",
           r"\b(?:when(?:ever)?|any ?time|every ?time|each time)\b[^.\n]{0,60}?\b(?:user|users|customer|customers|"
           r"someone|anyone|they|he|she|"
           r"people|asked)\b[^.\n]{0,30}?\b(?:asks?|asked|mentions?|requests?|says?|types?|quer(?:y|ies)|"
           r"searches|inquires?|talks?|brings? up|wants?)\b[^.\n]{0,80}?\b" + _AGENT_VERBS + r"\b"),
    _s("trigger", r"\bif (?:the )?(?:user|customer|anyone|someone) (?:ever )?(?:asks?|mentions?|says?)\b[^.\n]{0,80}?\b" + _AGENT_VERBS + r"\b"),
    _s("directive", r"(?:^|[.!?:;,]\s{1,8}|\n)[ \t]{0,8}(?:[-*\d.)]{1,6}[ \t]{0,8}){0,2}(?:always|never|only|must)\s{1,8}" + _AGENT_VERBS + r"\b"),
    _s("directive", r"\b" + _AGENT + r"\s+(?:must|shall|is required to|are required to|is instructed to|"
           r"are instructed to|has to|have to|needs? to|will always|should always|should never|must never)\b"),
    _s("directive", r"\b(?:important|attention|note to (?:the )?(?:assistant|agent|ai|model))\s*[:!]\s*"
           r"(?:you|always|never|do not|don't|the assistant)\b"),
    # "From now on" and "always respond" are one cue (a standing instruction), not two: a future-
    # time phrase counts as a weaker directive, so the pair does not add up like independent evidence.
    _s("directive",
           r"\bfrom (?:now|this point|here|today) on(?:wards?)?\b|\bgoing forward\b|\bhenceforth\b|"
           r"\bin (?:all |every |any )?(?:future|subsequent|later|upcoming|next) (?:conversations?|sessions?|chats?|"
           r"turns?|responses?|replies|answers|interactions|messages)\b|"
           r"\bfor (?:all|every|any) (?:future |subsequent )?(?:responses?|replies|answers|conversations?|sessions?|"
           r"requests?|queries|turns?|interactions)\b|"
           r"\bin (?:every|each|all) (?:response|reply|answer|message|conversation|session|output)s?\b", 0.45),
    # The same cues in German, French, Spanish, Italian, Dutch and Portuguese (memories arrive in
    # many languages; these are the commonest forms of each cue, not a translation of every rule).
    _s("override",
           r"\b(?:ignorier(?:e|en)?|vergiss|ignore[sz]?|oublie[sz]?|ignora(?:d)?|olvida|dimentica|negeer|vergeet)\b[^.\n]{0,30}?"
           r"\b(?:anweisungen|vorgaben|regeln|instructions|consignes|r[eè]gles|instrucciones|reglas|istruzioni|regole|"
           r"instructies|regels|instru[çc][õo]es)\b"),
    _s("impersonation",
           r"^[ \t]{0,16}[\[(*#]{0,3}[ \t]{0,3}(?:nota del sistema|mensaje del sistema|aviso del sistema|systemhinweis|systemnachricht|"
           r"systemmeldung|note (?:du )?syst[eè]me|message (?:du )?syst[eè]me|avis (?:du )?syst[eè]me|messaggio di sistema|"
           r"nota di sistema|systeembericht|systeemmelding|nota do sistema|mensagem do sistema)[ \t]{0,3}[\])*]{0,3}[ \t]{0,3}[:\-]"),
    _s("concealment",
           r"\b(?:sag(?:e)?|erz[äa]hl(?:e)?) (?:dem|der|den) (?:nutzer(?:in)?|benutzer(?:in)?|kunden?) (?:nichts|nicht)\b|"
           r"\bne (?:le |lui |rien )?(?:dis|dites|mentionne[sz]?) (?:rien |pas |jamais )?(?:[àa] l'utilisateur|au client)\b|"
           r"\bno (?:se lo |le )?(?:digas|menciones|cuentes) (?:nada )?al (?:usuario|cliente)\b|"
           r"\bnon (?:dirlo|dire|menzionar(?:e|lo)) (?:niente |nulla )?all'utente\b|\bvertel (?:het )?niet aan de gebruiker\b"),
    _s("weakening",
           r"\b(?:sin (?:pedir |solicitar )?(?:confirmaci[óo]n|verificaci[óo]n)|ohne (?:r[üu]ckfrage|best[äa]tigung|nachfrage|pr[üu]fung)|"
           r"sans (?:demander (?:de |la )?)?(?:confirmation|v[ée]rification)|senza (?:chiedere )?(?:conferma|verifica)|"
           r"zonder (?:om )?(?:bevestiging|controle)|sem (?:pedir )?(?:confirma[çc][ãa]o|verifica[çc][ãa]o))\b"),
    _s("directive",
           r"\b(?:ab sofort|ab jetzt|von nun an|k[üu]nftig|in zukunft|dor[ée]navant|d[ée]sormais|[àa] partir de maintenant|"
           r"[àa] l'avenir|a partir de ahora|de ahora en adelante|desde ahora|en adelante|d'ora in (?:poi|avanti)|"
           r"da ora in (?:poi|avanti)|vanaf nu|voortaan|van nu af aan|a partir de agora|de agora em diante|daqui em diante)\b"
           r"|\b(?:bei jeder|[àa] chaque|en cada|cada vez que|ad ogni|ogni volta che|bij elke|elke keer als|sempre que)\b", 0.45),
    # Multilingual cue lexicons (``lexicon``): the same kinds and weights as the English cues above.
    _s("directive", lexicon.FUTURE, 0.45),
    _s("trigger", lexicon.TRIGGER),
    _s("promotion", lexicon.PROMOTION),
    _s("concealment", lexicon.CONCEALMENT),
    _s("credential_request",
           r"(?:\b(?:frag\w*|fordere?|demande[rz]?|pide|p[íi]dele|solicita\w*|chiedi\w*|vraag|pe[çc]a|pergunte|popro[śs]|"
           r"попроси|запроси|sor)\b|聞いて|尋ねて|물어|요청)[^.\n]{0,40}?" + lexicon.SECRET),
    _s("hidden_markup",
           r"<!--\s{0,8}(?:\[?[a-z_ -]{0,20}\]?\s{0,4}:\s{0,4})?(?:assistant|ai|agent|llm|model|system|tool|bot|note to|"
           r"instructions?|ignore|always|never|you must|you should|the next|important|override|todo for (?:the )?ai)\b"),
    _s("hidden_markup",
           r"\]\([^\s)]{1,300}\s{1,4}[\"'][^\"'\n]{0,60}?\b(?:ignore|assistant|always|never|must|instructions?|system|"
           r"send|call|forward|include|append|tell|reveal|you are)\b"),
    _s("hidden_markup",
           r"(?:^|\s)(?:#|//|--|/\*|;)[ \t]{0,4}(?:note|instructions?|message|todo)?[ \t]{0,4}(?:to|for)?[ \t]{0,4}"
           r"(?:the )?(?:assistant|ai|agent|llm|model|copilot|chatbot)[ \t]{0,4}[:,-]"),
    # Containers a reviewer's rendered view does not show (or shows as a tooltip or footnote),
    # holding an order to the agent (``_HIDDEN_ORDER``, searched only inside each container):
    # HTML comments, markdown comments and link definitions (``[//]: # (…)``, ``[x]: <> "…"``,
    # ``[1]: url "title"``, footnotes), elements styled invisible, image alt text, link titles and
    # code fences labelled as notes rather than a language.
    _hidden(r"<!--[^<>]{0,400}"),
    _hidden(r"^[ \t]{0,8}\[[^\]\n]{0,40}\]:[^\n]{0,400}"),
    _hidden(r"<[a-z]{1,10}\b[^<>\n]{0,200}?(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d])|"
            r"colou?r\s*[:=]\s*[\"']?(?:#fff(?:fff)?\b|white\b)|\shidden\b|(?:fill-)?opacity\s*[:=]\s*[\"']?0(?![.\d])|font-size\s*=\s*[\"']?0(?![.\d])|fill\s*=\s*[\"']?(?:#fff(?:fff)?\b|white\b|none\b)|(?:width|height)\s*[:=]\s*[\"']?0(?:px)?[\"';\s]|aria-hidden\s*=\s*[\"']?true)[^<>\n]{0,100}>[^<]{0,400}"),
    _hidden(r"<details\b[^<>]{0,100}>[^\n]{0,400}"),
    _hidden(r"\balt\s*=\s*[\"'][^\"'<>\n]{0,300}"),
    _hidden(r"!\[[^\]\n]{0,300}\]\("),
    _hidden(r"\]\([^\s)]{1,300}\s{1,4}[\"'][^\"'\n]{0,200}"),
    _hidden(r"^[ \t]{0,8}(?:```|~~~)[ \t]{0,4}(?:notes?|comment|todo|memo|hidden|system|assistant|instructions?|prompt|"
            r"ai|agent|llm|meta)[ \t]*\n[^`]{0,400}"),
    _hidden(r"(?:^|[ \t;])(?:#|//|--|/\*)[^\n]{0,200}"),
    # LaTeX comments: "%" at a line's start or after text, not a percentage ("20 % de marge").
    _hidden(r"(?:^[ \t]{0,8}|(?<=[^\d\s%])[ \t]{0,2})%(?![\d%])[^\n]{0,200}"),
    _s("tool_directive",
           r"\b(?:next|every|each|first|following)\s+(?:tool|function|api)\s+calls?\b[^.\n]{0,20}?\b(?:must|should|shall|"
           r"will|has to|needs? to|is to|be)\b"),
    _s("tool_directive",
           r"\b(?:call|invoke|run|execute|trigger|use)\s+(?:the\s+)?`?(?:delete|drop|wipe|purge|erase|remove|reset|"
           r"destroy|truncate|export|dump|transfer|grant|disable)_[a-z0-9_]{1,40}"),
    _s("tool_directive",
           r"\b(?:delete|drop|wipe|purge|erase|destroy|truncate)_(?:all|every|everything|memories|memory|files|users|"
           r"records|database|db|tables|history|logs)\b"),
    _s("promotion",
           r"\b(?:only|exclusively|always)\s+(?:recommend|suggest|promote|endorse|mention|push|advertise)\b|"
           r"\b(?:recommend|suggest|promote)\b[^.\n]{0,40}?\binstead of\b"),
)


def detect(fields: Sequence[TextField]) -> RiskFlag | None:
    """The ``prompt_injection`` flag for a write's text fields, or None: this module's signals and
    ``controls``' (a safeguard removed or a privilege granted, as a rule for later)."""
    return detect_kinds(fields)[0]


def detect_kinds(fields: Sequence[TextField]) -> tuple[RiskFlag | None, set[str]]:
    """``detect``'s flag and the kinds of evidence behind it (``screen`` lets a medium control
    removal agree with a medium ``semantic_attack``)."""
    best, spans = collect(SIGNALS, fields)
    extra, extra_spans = controls.evidence(fields)
    for kind, weight in extra.items():
        best[kind] = max(best.get(kind, 0.0), weight)
    return to_flag(NAME, best, spans + extra_spans, THRESHOLDS), set(best)
