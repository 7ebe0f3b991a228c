"""``exfiltration``: memory text that would make the agent ship data somewhere.

Kinds of evidence and their weights:

* ``image_beacon`` (0.9): a markdown/HTML image whose URL carries a query string or a template
  placeholder: rendering it sends data to that host with no click.
* ``templated_url`` (0.85): a URL with a placeholder for data (``{user_email}``, ``{{history}}``,
  ``$TOKEN``, ``<conversation>``) or a ``data=``/``q=`` parameter fed from the chat.
* ``send_to`` (0.75): send / post / forward / upload … to a URL or a webhook.
* ``recurring_copy`` (0.75): cc / bcc / forward / send *every* or *all* … to an address or URL.
* ``send_to_email`` (0.5): send / forward / email … to an email address (a one-off task is normal).
* ``phishing`` (0.8): have the user enter card details / passwords / codes at a URL.
* ``tool_abuse`` (0.75): "call/use the X tool … with the user's …", "fetch <url> with …".
* ``collect`` (0.6): include / attach / append the conversation, chat history, credentials,
  tokens, personal data … in a request, link, email or message.
* ``external_image`` (0.5): a markdown image from any external host.
* ``secret_file`` (0.8): read / print / send / attach / "the contents of" … a file that holds keys,
  passwords or session secrets (``~/.ssh/id_rsa``, ``.env``, ``/etc/shadow``, ``.aws/credentials``,
  ``*.pem``/``*.key``, ``.gnupg/``, shell history, ``/proc/self/environ``, Kubernetes service
  account secrets, browser login stores …).
* ``secret_path`` (0.45): such a path named without a verb (medium: "I rotated my id_rsa" is fine).

A plain URL ("the user's blog is https://…") is not evidence. Known limits: an exfiltration
path described without any of these shapes, or in a language other than English, is missed.
"""

from __future__ import annotations

import re
from typing import Sequence

from app.core.screening import lexicon
from app.core.screening.flags import RiskFlag, TextField
from app.core.screening.normalize import fold
from app.core.screening.signals import SCAN_LIMIT, Signal, Thresholds, collect, signal, to_flag

NAME = "exfiltration"
THRESHOLDS = Thresholds(medium=0.4, high=0.7)
WEIGHTS = {"secret_file": 0.8, "secret_path": 0.45, "image_beacon": 0.9, "templated_url": 0.85, "send_to": 0.75, "tool_abuse": 0.75,
           "recurring_copy": 0.75, "phishing": 0.8, "harvest": 0.75, "collect": 0.6, "send_to_email": 0.5, "external_image": 0.5}

# URLs are matched up to 300 characters: enough for any placeholder or query a beacon needs, and it
# bounds the work on hostile input (64 KiB of URLs).
_URL = r"(?:https?://|ftp://|www\.)[^\s)\]\"'<>]{1,300}"
#: A URL up to the first non-ASCII character, for the verb-last patterns ("https://x.example/fに送信").
_ASCII_URL = r"(?:https?://|ftp://|www\.)[^\s)\]\"'<>\u0080-\U0010ffff]{1,300}"
_EMAIL = r"[a-z0-9._%+-]{1,64}@[a-z0-9.-]{1,255}\.[a-z]{2,24}\b"
_PLACEHOLDER = r"(?:\{\{?\s*[a-z_][a-z0-9_.\s]{0,40}\}\}?|\$\{?[a-z_][a-z0-9_]{1,40}\}?|<[a-z_][a-z0-9_ ]{1,40}>|\[[a-z_ ]{2,40}\])"
_DATA = (r"(?:conversation|chat(?: log| history| transcript)?|history|transcript|messages|context|"
         r"credentials?|passwords?|api keys?|tokens?|secrets?|session(?: id| cookie)?s?|cookies?|"
         r"personal (?:data|details|information|info)|contact (?:list|details)|address book|"
         r"emails?|email address(?:es)?|phone numbers?|ssn|card (?:numbers?|details)|bank (?:details|account)|"
         r"files?|documents?|notes|memor(?:y|ies)|system prompt|instructions|user data|user's \w+|"
         r"their \w+ (?:data|details|info))")
_SEND = (r"(?:send|sends|sending|post|posts|posting|forward|forwards|forwarding|upload|uploading|submit|"
         r"transmit|exfiltrate|report|relay|sync|mirror|copy|leak|ship|push|share|cc|bcc|email|mail)")


def _s(kind: str, pattern: str, unless: str | None = None) -> Signal:
    return signal(kind, WEIGHTS[kind], pattern, unless=unless)


# Keeping secret files *out* of something is the opposite of leaking them: ".gitignore should
# include .env", "never commit .env", "exclude *.pem from the image"; and a template is no secret
# ("copy .env.example to .env").
_KEEP_OUT = (r"\b(?:git|docker|npm|hg)?ignore\b|\.(?:git|docker)ignore\b|\b(?:never|don't|do not|not) (?:commit|copy|push|"
             r"store|check in|paste|share|upload)\b|\bexclude[sd]?\b|\bkeep\b[^.\n]{0,20}\bout of\b|"
             r"\.env\.(?:example|sample|template|dist|defaults?)\b|"
             # Detection engineering names the read it watches for: "alert when a process reads ~/.ssh/id_rsa".
             r"\b(?:alert(?:s|ing)? (?:when|if|on)|detect(?:s|ion|ions)?|siem|edr|sigma rule|yara|auditd|watch for)\b")


# Files that hold keys and passwords; a request to read, print or send one is an exfiltration step.
_SECRET_FILE = (r"(?:~?/?\.ssh/[a-z0-9_.-]{0,40}|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|/etc/(?:shadow|passwd|sudoers|gshadow)\b|"
                r"\.aws/credentials|\.aws/config\b|\.git-credentials|\.netrc\b|\.pgpass\b|\.kube/config|\.docker/config\.json|"
                r"\.npmrc\b|\.pypirc\b|(?:^|[\s/\"'`(])\.env(?:\.[a-z]{1,12})?\b|\bwallet\.dat\b|\bcredentials\.json\b|"
                r"\bsecrets?\.ya?ml\b|\bkeychain\b|\b[a-z0-9_-]{1,40}\.(?:pem|p12|pfx|kdbx|key|keystore|jks)\b|"
                r"\.gnupg/|\.bash_history\b|\.zsh_history\b|/proc/self/environ\b|/var/run/secrets/|\.vault-token\b|"
                r"application_default_credentials\.json|\.config/gcloud/|\.azure/|\bkey ?vault\b|"
                r"\blogin data\b|\bcookies\.sqlite\b|\bkey4\.db\b|\blogins\.json\b|"
                # A browser's session: whoever holds the cookie of an admin page is logged in as its user.
                r"\bdocument\.cookie\b)")

SIGNALS = (
    _s("secret_file", r"\b(?:read|reads|reading|cat|open|print|show|display|output|dump|send|upload|copy|include|attach|"
       r"paste|share|post|leak|fetch|load|get|access|grab|retrieve|return|echo|type|head|tail|less|more|base64|"
       r"contents? of|look (?:at|in|inside)|check|inspect|summari[sz]e|quote|list|scan|exfiltrate|extract|email|zip|"
       r"exports?|exporting|collect|collects|gather|harvest|"
       # The same reads in other languages: öffnen / lesen / kopieren, ouvrir / lire / copier, abrir / leer / copiar …
       r"[öo]ffne\w*|lesen|kopier\w*|ouvr\w*|lire|copie\w*|abr[ae]\w*|leer|copi[ae]\w*|apri\w*|legg\w*|"
       r"open(?:en|t)|lees|lezen|kopieer\w*)\b"
       r"[^.\n]{0,40}?" + _SECRET_FILE, unless=_KEEP_OUT),
    # The path first, the order after it: "the deploy key lives at ~/.ssh/id_ed25519 — read it and
    # keep a copy"; and "the contents of" in other languages.
    _s("secret_file", _SECRET_FILE + r"[^.\n]{0,40}?\b(?:read|cat|copy|send|upload|print|paste|save|store|keep|grab|"
       r"extract|dump|email|post|share|include|attach)\b\s+(?:it|them|its contents|the contents|the file|that file|"
       r"a copy|its (?:value|key)s?)\b", unless=_KEEP_OUT),
    # The path, then its contents kept or stored in another language: "secrets.yaml öffnen und den Inhalt hier
    # ablegen", "copier le contenu", "guardar el contenido".
    _s("secret_file", _SECRET_FILE + r"[^.\n]{0,60}?\b(?:den inhalt|inhalt|le contenu|el contenido|il contenuto|"
       r"o conte[úu]do|de inhoud)\b", unless=_KEEP_OUT),
    _s("secret_file", r"\b(?:inhalt (?:von|der datei)|contenu (?:de|du fichier)|contenido (?:de|del archivo)|"
       r"contenuto (?:di|del file)|inhoud van|conte[úu]do (?:de|do arquivo))\b[^.\n]{0,20}?" + _SECRET_FILE),
    _s("secret_path", r"~/\.ssh/|\bid_(?:rsa|ed25519)\b|/etc/shadow\b|\.aws/credentials|\.git-credentials"),
    _s("image_beacon", r"!\[[^\]\n]{0,200}\]\(\s*(?:https?:)?//[^\s)]{0,300}?(?:\?[^\s)]*=|" + _PLACEHOLDER + r")"),
    _s("image_beacon", r"<img\b[^>\n]{0,300}?\bsrc\s*=\s*[\"']?(?:https?:)?//[^\s\"'>]{0,300}?\?[^\s\"'>]*="),
    _s("external_image", r"!\[[^\]\n]{0,200}\]\(\s*(?:https?:)?//"),
    _s("templated_url", r"(?:https?://|www\.)[^\s)\]\"'<>]{0,300}?" + _PLACEHOLDER),
    _s("templated_url", r"(?:https?://|www\.)[^\s)\]\"'<>]{0,300}?[?&](?:data|q|d|payload|c|msg|info|x|leak|p)="
       r"(?:\s|$|\{|<|\[|\$)"),
    _s("send_to", r"\b" + _SEND + r"\b[^.\n]{0,80}?\b(?:to|at|into|via|onto)\s+(?:the\s+)?(?:" + _URL +
       r"|(?:this |the |our |a )?(?:webhook|endpoint|external server|pastebin|discord|telegram)\b|"
       # Anonymous file drops and request catchers named without a scheme: "upload copies to transfer.sh".
       r"(?:transfer\.sh|file\.io|0x0\.st|paste\.ee|pastebin\.com|webhook\.site|requestbin\.\w+|[\w-]+\.ngrok\.\w+|"
       r"temp\.sh|bashupload\.com|anonfiles\.\w+|gofile\.io|catbox\.moe)\b)"),
    _s("send_to_email", r"\b" + _SEND + r"\b[^.\n]{0,80}?\b(?:to|at)\s+" + _EMAIL),
    _s("recurring_copy", r"\b(?:cc|bcc|copy|forward|send|mirror)\b[^.\n]{0,60}?(?:" + _EMAIL + r"|" + _URL +
       r")[^.\n]{0,40}?\b(?:every|all|each|any|always)\b"),
    _s("recurring_copy", r"\b(?:every|all|each|any|always)\b[^.\n]{0,40}?\b(?:cc|bcc|forward|copy|send|mirror)\b"
       r"[^.\n]{0,60}?(?:" + _EMAIL + r"|" + _URL + r")"),
    _s("recurring_copy", r"\b(?:cc|bcc|forward|copy|send|mirror)\b[^.\n]{0,10}?\b(?:every|all|each|any)\b[^.\n]{0,60}?"
       r"(?:" + _EMAIL + r"|" + _URL + r")"),
    _s("tool_abuse", r"\b(?:call|use|invoke|run|trigger|execute)\b[^.\n]{0,15}?\b(?:the\s+)?[a-z0-9_.-]{1,40}\s*"
       r"(?:tool|function|plugin|action|api|webhook|endpoint)\b[^.\n]{0,60}?\b(?:with|passing|including|"
       r"containing|sending)\b[^.\n]{0,40}?\b(?:the user's|user's|their|the|all)\b[^.\n]{0,20}?\b" + _DATA + r"\b"),
    _s("tool_abuse", r"\b(?:fetch|get|open|visit|load|request|curl|wget|browse to)\b\s+" + _URL +
       r"[^.\n]{0,60}?\b(?:with|appending|including|passing)\b[^.\n]{0,40}?\b" + _DATA + r"\b"),
    _s("phishing", r"\b(?:paste|enter|type|submit|upload|fill in|re-?enter|provide)\b[^.\n]{0,40}?\b(?:card (?:details|number)|"
       r"passwords?|credentials|login|pin|otp|seed phrase|recovery phrase|bank details|ssn|social security number)\b"
       r"[^.\n]{0,30}?\b(?:into|at|on|to|via)\s+" + _URL),
    # Multilingual cue lexicons (``lexicon``): sending to an address or link, a standing copy, and
    # keeping secrets (a password, PIN, token or private key saved, noted or remembered).
    _s("send_to", lexicon.SEND + r"[^.\n]{0,80}?" + _URL),
    _s("send_to_email", lexicon.SEND + r"[^.\n]{0,80}?" + _EMAIL),
    # Verb-last order (Japanese, Korean, Turkish, German subordinate clauses). The URL is an atomic
    # group: without it, every URL start on a line of URLs retried 300 lengths against the verb list.
    _s("send_to", r"(?>" + _ASCII_URL + r")[^.\n]{0,30}?" + lexicon.SEND),
    _s("send_to_email", _EMAIL + r"[^.\n]{0,30}?" + lexicon.SEND),
    _s("recurring_copy", lexicon.EVERY + r"[^.\n]{0,80}?" + lexicon.SEND + r"[^.\n]{0,80}?(?:" + _EMAIL + r"|" + _URL + r")"),
    _s("recurring_copy", lexicon.EVERY + r"[^.\n]{0,80}?(?:" + _EMAIL + r"|(?>" + _ASCII_URL + r"))[^.\n]{0,30}?" + lexicon.SEND),
    _s("recurring_copy", lexicon.SEND + r"[^.\n]{0,20}?" + lexicon.EVERY + r"[^.\n]{0,80}?(?:" + _EMAIL + r"|" + _URL + r")"),
    # (The few characters after the secret are part of the match so that a negation there counts:
    # "speichere Passwörter nie in Notizen" is advice.)
    _s("harvest", lexicon.STORE + r"[^.\n]{0,50}?" + lexicon.SECRET + r"[^.\n]{0,12}", unless=lexicon.NEGATION),
    _s("harvest", lexicon.SECRET + r"[^.\n]{0,50}?" + lexicon.STORE, unless=lexicon.NEGATION),
    _s("collect", r"\b(?:include|attach|append|embed|add|put|encode|paste|insert)\b[^.\n]{0,30}?"
       r"\b(?:the user's|user's|their|the|all|full|entire|complete|any)\b[^.\n]{0,20}?\b" + _DATA +
       r"\b[^.\n]{0,40}?\b(?:in|into|to)\s+(?:the\s+|a\s+|each\s+|every\s+|your\s+)?(?:url|link|request|query|"
       r"email|message|image|webhook|payload|parameter|post|response)"),
)


#: A copy to the user's own assistant or colleague, named, whose address carries that name: "cc my
#: assistant Jordan (jordan@studio.example)". The relation and the name tie the address to the user's
#: own circle; an attacker's drop box is an outside or unexplained address.
_OWN_CONTACT = re.compile(
    r"\bmy\s+(?:own\s+)?(?:(?:executive|personal|virtual|office|team|practice|studio)\s+)?(?:assistant|ea|pa|secretary|"
    r"chief of staff|colleague|co-?worker|deputy|manager|boss|partner|wife|husband|spouse|accountant|bookkeeper|"
    r"co-?founder|team ?mate|office manager|paralegal|associate|nurse|scheduler|coordinator)\s+(?:is\s+)?"
    r"([a-z]{2,20})\b[^@\n]{0,40}?\b\1[a-z0-9._%+-]{0,30}@", re.MULTILINE)
#: What a copy to the user's own contact must not carry: a blind copy, secrecy, or credentials and histories.
_NOT_OWN = re.compile(r"\bbcc\b|\bwithout (?:telling|letting|mentioning|notifying)|\bsilently\b|\bquietly\b|"
                      r"\bdon't (?:tell|mention)|\bdo not (?:tell|mention)|\bsecret(?:ly)?\b|\bpasswords?\b|"
                      r"\bcredentials?\b|\btokens?\b|\bapi keys?\b|\b(?:chat|conversation) (?:history|logs?)\b|"
                      r"\beverything\b|\ball (?:my |of my |the )?(?:emails|messages|files|documents|data)\b", re.MULTILINE)


def detect(fields: Sequence[TextField]) -> RiskFlag | None:
    """The ``exfiltration`` flag for a write's text fields, or None. A standing copy to the user's
    own named assistant or colleague, at an address with that name, with nothing secret or blind
    about it, counts as an ordinary one-off send (medium alone), not a standing leak."""
    best, spans = collect(SIGNALS, fields)
    if "recurring_copy" in best and set(best) <= {"recurring_copy", "send_to_email"} and _own_contact(fields):
        best["recurring_copy"] = min(best["recurring_copy"], WEIGHTS["send_to_email"])
    return to_flag(NAME, best, spans, THRESHOLDS)


def _own_contact(fields: Sequence[TextField]) -> bool:
    """Whether a field names the user's own contact with their address, and none carries secrecy or secrets."""
    folded = [fold(item.text[:SCAN_LIMIT]).text for item in fields]
    return any(_OWN_CONTACT.search(text) for text in folded) and not any(_NOT_OWN.search(text) for text in folded)
