"""Whether a short memory text reports a change of state, and whom it is about (pure).

Two texts about the same subject and attribute are a replacement only when the newer one says the
old state ended or a new one began. That is read from a small closed grammar, not from the
attribute's words:

* ``change``: a word that ends a state or starts another ("now", "no longer", "from now on",
  "instead", "new", "anymore"; verbs of moving, switching, replacing, ending, raising, postponing,
  selling, leaving, promoting, marrying, turning an age, in their inflections), in English and in
  German, French, Spanish, Portuguese, Italian, Dutch, Polish, Russian, Turkish, Arabic, Hindi,
  Chinese and Japanese;
* ``held``: a word that says the old state still holds or the new one is beside it, passing or
  past ("also", "another", "on the side", "still", "used to", "grew up", "former", "for the
  summer", "on holiday", "next week", "plans to"), in the same languages.

``subjects`` is whom a text is about: the user (in any of those languages), family members by
role ("mom" is the user's mother), and names standing first in a clause or as a possessor
("Olivia's", "the Hendersons sold"); names a value takes ("VS Code", "Tesla") are not subjects.
Two full names with one first name ("Sarah Chen", "Sarah Miller") are two people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that end one state or begin another. Latin-script entries match whole words (stems may end
# in \w*); entries for scripts without spaces match anywhere.
_CHANGE_LATIN = (
    # English: adverbs and the new-value adjective
    r"now|nowadays|no longer|anymore|any more|from now on|instead|new|newly|as of|these days|"
    r"replacing|in place of|after all|"
    # English: verbs of change of state
    r"moved|moves|relocated|switched|switches|changed|changes|replaced|swapped|transferred|migrated|"
    r"upgraded|downgraded|rescheduled|postponed|pushed back|moved up|brought forward|raised|increased|"
    r"decreased|lowered|reduced|went up|went down|rose|dropped|sold|gave|rehomed|handed over|took over|"
    r"left|quit|resigned|retired|stopped|gave up|canceled|cancelled|closed|ended|broke up|divorced|"
    r"separated|married|became|turned|promoted|demoted|appointed|elected|renamed|rebranded|converted|"
    r"went|is back|diagnosed|took|made|"
    # German
    r"jetzt|nun|mittlerweile|inzwischen|nicht mehr|kein\w* mehr|stattdessen|neue\w*|umgezogen|zog|"
    r"gewechselt|wechselte|geändert|änderte|gekündigt|kündigte|verkauft|verkaufte|verlassen|verließ|"
    r"geheiratet|heiratete|befördert|"
    # French
    r"maintenant|désormais|dorénavant|ne \w+ plus|plus jamais|nouveau|nouvelle|nouvel|déménagé|"
    r"changé|quitté|vendu|marié\w*|promu\w*|remplacé\w*|passé\w* à|"
    # Spanish
    r"ahora|ya no|en cambio|nuev[oa]|se mudó|mudado|cambió|cambiado|dejó|vendió|vendido|se casó|"
    r"ascendid[oa]|renunció|"
    # Portuguese
    r"agora|já não|não \w+ mais|nov[oa]|mudou|mudou-se|se mudou|trocou|deixou|vendeu|casou|casou-se|"
    r"promovid[oa]|"
    # Italian
    r"ora|adesso|non \w+ più|nuov[oa]|trasferit[oa]|cambiato|spostato|lasciato|venduto|sposat[oa]|"
    r"promoss[oa]|"
    # Dutch
    r"nu|niet meer|geen \w+ meer|nieuwe?|verhuisd|verhuisde|veranderd|gestopt|verkocht|getrouwd|"
    # Polish
    r"teraz|już nie|now\w+|przeprowadził\w*|zmienił\w*|sprzedał\w*|kupił\w*|rzucił\w*|awansował\w*|"
    # Russian
    r"теперь|сейчас|больше не|уже не|нов\w+|переехал\w*|сменил\w*|поменял\w*|продал\w*|ушл\w*|ушёл|"
    r"уволил\w*|повысили|повышен\w*|женил\w*|вышла замуж|"
    # Turkish
    r"artık|şimdi|yeni|taşındı|değiştirdi|değişti|sattı|ayrıldı|evlendi|terfi"
)
_CHANGE_WIDE = (
    # Arabic
    "الآن|لم يعد|لم تعد|جديد|انتقل|انتقلت|غيّر|غير|غيرت|باع|ترك|تزوج|"
    # Hindi
    "अब|नया|नई|बदल|छोड़|बेच|शुरू कर दिया|"
    # Chinese
    "现在|不再|已经离开|离开|搬到|搬去|换了|改成|改为|卖给|卖了|辞职|结婚|升职|"
    # Japanese
    "今は|もう|引っ越|変更|変わ|辞め|売っ|売却|結婚|昇進|新しい"
)
# Words saying the old state still holds beside the new one, or that the new one passes or is past.
_HELD_LATIN = (
    # English: beside
    r"also|too|as well|another|a second|second|additional|extra|on the side|part-time|side|besides|"
    r"in addition|added|"
    # English: still, past, passing, planned
    r"still|used to|grew up|former|formerly|ex-\w+|previously|before|was briefly|back in|years ago|old|"
    r"visiting|staying|spending|on holiday|on vacation|on a trip|trip|for the summer|for the weekend|"
    r"for a (?:week|month|year|semester)|for (?:\w+) (?:days|weeks|months)|this week|this weekend|"
    r"next week|next month|next year|tomorrow|temporarily|for now|conference|"
    r"plans? to|planning to|might|could|considering|thinking about|hopes?|hoping|trying to|wants to|"
    r"will|going to|if|"
    # English: a recurring schedule ("closed on Sundays") is a standing pattern, not a change of state
    r"on (?:mon|tues|wednes|thurs|fri|satur|sun)days|on weekends|at weekends|every (?:day|week|month|year)|"
    # German
    r"auch|noch|früher|ehemalig\w*|vorher|zusätzlich|urlaub|nächste\w* woche|"
    # French
    r"aussi|également|encore|autrefois|ancien\w*|vacances|semaine prochaine|"
    # Spanish
    r"también|todavía|aún|antes|antigu[oa]|vacaciones|pasará|la próxima semana|"
    # Portuguese
    r"também|ainda|antigamente|férias|"
    # Italian
    r"anche|ancora|prima|vacanza|"
    # Dutch
    r"ook|nog|vroeger|vakantie|"
    # Polish
    r"też|także|również|wciąż|nadal|kiedyś|w ten weekend|wakacje|opiekuje|"
    # Russian
    r"тоже|также|ещё|все ещё|раньше|бывш\w+|в отпуске|"
    # Turkish
    r"hâlâ|eskiden|yazlık|tatil"
)
_HELD_WIDE = (
    "أيضا|أيضًا|ما زال|سابقا|"
    "भी|पहले|"
    "也|还|以前|前男友|前女友|兼职|下周|出差|"
    "も|まだ|以前|来週|出張|元"
)


def _wordlist(latin: str, wide: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])(?:" + latin + r")(?![\w-])|" + wide)


_CHANGE = _wordlist(_CHANGE_LATIN, _CHANGE_WIDE)
_HELD = _wordlist(_HELD_LATIN, _HELD_WIDE)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|“[^”]*”")


@dataclass(frozen=True)
class Cues:
    change: tuple[str, ...]
    held: tuple[str, ...]


def cues(text: str) -> Cues:
    """The change and held words of ``text`` (quoted values are not read)."""
    low = _QUOTED.sub(" ", text.replace("\u2019", "'")).casefold()
    return Cues(tuple(m.group() for m in _CHANGE.finditer(low)), tuple(m.group() for m in _HELD.finditer(low)))


_USER = re.compile(
    r"(?<![\w-])(?:the user|user|users|i|me|my|mine|the utente|l'utente|utente|l'utilisateur|utilisateur|"
    r"el usuario|usuario|o usuário|usuário|der benutzer|benutzer|der nutzer|nutzer|de gebruiker|gebruiker|"
    r"użytkownik\w*|пользовател\w+|kullanıcı\w*)(?![\w-])|ل?ل?مستخدم|उपयोगकर्ता|用户|ユーザー")
_KIN = {
    "mother": "mother mom mum mama mommy mommy's mom's mother's mutter mère madre mãe мама мать anne माँ 妈妈 母".split(),
    "father": "father dad papa daddy dad's father's vater père padre pai папа отец baba पिता 爸爸 父".split(),
    "sister": "sister schwester sœur hermana irmã sorella zus siostra сестра".split(),
    "brother": "brother bruder frère hermano irmão fratello broer brat брат".split(),
    "wife": "wife frau femme esposa moglie vrouw żona жена".split(),
    "husband": "husband mann mari esposo marido marito man mąż муж".split(),
    "son": "son sohn fils hijo filho figlio zoon syn сын".split(),
    "daughter": "daughter tochter fille hija filha figlia dochter córka дочь".split(),
    "partner": "partner boyfriend girlfriend fiancé fiancée".split(),
    "grandmother": "grandmother grandma granny oma".split(),
    "grandfather": "grandfather grandpa opa".split(),
}
_KIN_WORD = {w.removesuffix("'s"): role for role, words in _KIN.items() for w in words}
_NAME = re.compile(r"(?:[A-ZÀ-ÝĀ-ŽА-ЯЁİ][\w'’-]*|[\u0900-\u097F]+)(?:\s+[A-ZÀ-ÝĀ-ŽА-ЯЁİ][\w'’-]*)*")
_CLAUSE = re.compile(r"[.!?;:。；]\s*|,\s+(?:and|so|but|while|who|which)\s+|\s+(?:and|but|so)\s+(?=[A-Z])")
_LEAD = re.compile(r"^(?:[A-Za-zÀ-ÿ' -]{0,40},\s+)")
_NOT_NAMES = frozenset(
    "the a an this that these those my his her their our its it she he they we you i after before since "
    "when on in at as of for from to by last this next most some all every dr mr mrs ms prof".split())
_WIDE_SUBJECT = re.compile(r"^([\u4e00-\u9fff\u3040-\u30ff]{2,4}?)(?:さん)?(?:は|が|の|在|已|的|现在|ने|का|की)")


def _kin(word: str) -> str | None:
    return _KIN_WORD.get(word.casefold().removesuffix("'s").removesuffix("’s"))


_PRONOUN = re.compile(r"^(?:she|he|they|sie|er|elle|il|ella|él|ele|ela|lei|lui|zij|hij|ona|on|она|он)\b", re.I)


@dataclass(frozen=True)
class About:
    """Whom a text is about: ``heads`` stand first in a clause or own something (the user, family
    roles, names), ``mentions`` are every name in it, ``pronoun`` says a clause starts with one."""

    heads: frozenset[str]
    mentions: frozenset[str]
    pronoun: bool


def about(text: str) -> About:
    """Whom ``text`` is about (names case-folded)."""
    found: set[str] = set()
    pronoun = False
    text = text.replace("\u2019", "'")
    for clause in _CLAUSE.split(text):
        clause = clause.strip()
        if not clause:
            continue
        clause = _LEAD.sub("", clause) if not clause[:1].isupper() or "," in clause[:40] else clause
        pronoun = pronoun or bool(_PRONOUN.match(clause))
        head = _head(clause)
        if head:
            found.add(head)
        for owner in re.finditer(r"([\w-]+(?:\s[A-Z][\w-]+)?)'s?\s+([\w-]+)", clause):
            who, what = owner.group(1), owner.group(2)
            role = _kin(what)
            if role:
                found.add(role)
            elif _USER.fullmatch(who.casefold()):
                found.add("user")
            elif who[:1].isupper() and who.casefold() not in _NOT_NAMES:
                found.add(who.casefold())
    low = text.casefold()
    wide = _WIDE_SUBJECT.match(text.strip())
    if wide:
        found.add("user" if _USER.match(wide.group(1)) else wide.group(1))
    if _USER.search(low) and not found:
        found.add("user")
    mentions = {re.sub(r"'s?$", "", m.group().strip()).casefold() for m in _NAME.finditer(text)}
    mentions = {m for m in mentions if m.split()[0] not in _NOT_NAMES} | {m.split(" ", 1)[1] for m in mentions
                                                                       if m.split()[0] in _NOT_NAMES and " " in m}
    return About(frozenset(found), frozenset(mentions), pronoun)


def subjects(text: str) -> frozenset[str]:
    """The heads of ``text`` (see ``About``)."""
    return about(text).heads


def _head(clause: str) -> str | None:
    """The subject standing first in a clause: the user, a family role, or a name."""
    words = clause.split()
    while words and words[0].casefold() in ("the", "a", "an", "die", "der", "das", "le", "la", "el", "o", "il"):
        words = words[1:]
    if not words:
        return None
    first = words[0].strip(",.")
    lowered = first.casefold()
    if _USER.fullmatch(lowered.removesuffix("'s")):
        nxt = _kin(words[1]) if len(words) > 1 else None
        return nxt or "user"
    role = _kin(lowered)
    if role:
        return role
    if lowered.endswith("'s") and len(words) > 1 and _kin(words[1]):
        return _kin(words[1])  # "Ana's sister" is the sister, not Ana
    match = _NAME.match(" ".join(words))
    if match and re.sub(r"'s?$", "", lowered) not in _NOT_NAMES:
        name = re.sub(r"'s?$", "", match.group().strip()).casefold()
        return name.split(" ")[0] if name.endswith(" the") else name
    return None


def _person(a: str, b: str) -> bool | None:
    """True when two subjects are one person, False when they are two with one first name, None
    when unrelated."""
    if a == b:
        return True
    x, y = a.split(), b.split()
    if _one_name(x[0], y[0]):
        return min(len(x), len(y)) == 1 or x[-1] == y[-1]
    shared = set(x) & set(y) - {"the"}
    return True if shared else None


def _one_name(a: str, b: str) -> bool:
    """One name, maybe inflected: "Mehmet" and "Mehmet'in", "Ольга" and "Ольгу" (five letters or
    more, all but the last alike), not "Anna" and "Anne"."""
    a, b = a.split("'")[0], b.split("'")[0]
    if a == b:
        return True
    short = min(len(a), len(b))
    return short >= 5 and a[:short - 1] == b[:short - 1]


def _names(heads: frozenset[str]) -> set[str]:
    return set(heads) - {"user"} - set(_KIN)


def same_subject(new: str, old: str) -> bool:
    """Whether the two texts are about one subject (and not two people sharing a first name): a
    head in common; or the new text's named head is a name the old one mentions ("The Hendersons
    sold ..." after "... is owned by the Hendersons"); or the new text starts with a pronoun, names
    no one, and the old one names one person."""
    a, b = about(new), about(old)
    names_a, names_b = _names(a.heads), _names(b.heads)
    verdicts = [_person(x, y) for x in names_a for y in names_b]
    if False in verdicts and True not in verdicts:
        return False
    if True in verdicts or a.heads & b.heads:
        return True
    if any(_person(x, y) for x in names_a for y in b.mentions):
        return True
    return a.pronoun and not names_a and "user" not in a.heads and len(names_b) == 1


_VALUE_NAME = re.compile(r"(?<![\w'])(?:[A-ZÀ-Ý][\w'-]*|\w*\d\w*|[a-z]+[A-Z]\w*)(?:\s+(?:[A-ZÀ-Ý][\w'-]*|\d\w*))*")


def restates(new: str, old: str) -> bool:
    """Whether the names and numbers ``new`` gives as its value are all in ``old`` already: "now
    gets internet from Sonic" after "home internet is from Sonic" changes nothing. The value is what
    follows the first change word (the whole text when nothing follows it), without the subjects
    and without a value it moves away from ("from LastPass"). False when it names nothing."""
    text = new.replace("\u2019", "'")
    first = _CHANGE.search(text.casefold())
    tail = text[first.end():] if first and text[first.end():].strip(" .!") else text
    heads = about(new).heads
    values = [m.group() for m in _VALUE_NAME.finditer(tail)
              if not (re.search(r"\bfrom\s+(?:the\s+|an?\s+)?$", tail[:m.start()]) and " to " in tail[m.end():])]
    values = [v for v in values if v.casefold() not in heads and v.split()[0].casefold() not in _NOT_NAMES | heads
              and not _USER.fullmatch(v.casefold())]
    if not values:
        return False
    low = old.casefold()
    return all(all(re.sub(r"'s?$", "", w.casefold()) in low for w in v.split()) for v in values)
