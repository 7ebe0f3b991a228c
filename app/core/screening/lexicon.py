"""Multilingual cue lexicons: the commonest forms of each attack cue in the languages memories
arrive in, so that text in another language is judged by rules rather than by an English
embedding that cannot read it (``language``).

Each entry is a regular-expression fragment for folded, lower-case text (``normalize.fold``:
NFKC and case folding, so ``ß`` reads ``ss`` and full-width ``：`` reads ``:``). Scripts without
spaces (Japanese, Chinese, Korean particles) use no ``\\b``. The detectors
(``injection``, ``exfiltration``, ``protected``) turn them into signals with the same kinds and
weights as their English cues. Languages: German, French, Spanish, Italian, Dutch, Portuguese,
Polish, Russian, Turkish, Japanese, Korean, Chinese and Arabic — not every form of every verb,
the forms a standing order or a claim takes (imperatives, "when the user asks", "only
recommend", "has admin rights", "skip the checks", "save the password").

Known limits: a paraphrase with none of these words, and any language not listed, is missed by
these rules; the words were chosen after reading the spent held-out sets' misses, so their reach
on new writing is measured only by the next blind set.
"""

from __future__ import annotations

from app.core.screening.normalize import CONFUSABLES

#: "From now on" / "in the future" / "in all future conversations".
FUTURE = (r"\b(?:in (?:der )?zukunft|k[üu]nftig(?:en)? (?:gespr[äa]chen?|unterhaltungen)|alle[nm]? k[üu]nftigen|"
          r"[àa] l'avenir|(?:toutes les |pour les )?prochaines (?:conversations|sessions|discussions)|"
          r"en el futuro|(?:las |en las )?pr[óo]ximas (?:conversaciones|sesiones)|in futuro|(?:nelle )?prossime (?:conversazioni|sessioni)|"
          r"in de toekomst|voor de toekomst|voor altijd|no futuro|para sempre|pour la suite|pour toujours|para siempre|per sempre|"
          r"f[üu]r immer|da adesso in (?:poi|avanti)|da oggi in poi|na zawsze|навсегда|sonsuza (?:dek|kadar)|nas pr[óo]ximas (?:conversas|sess[õo]es)|w przysz[łl]o[śs]ci|"
          r"od teraz|od dzi[śs]|na przysz[łl]o[śs][ćc]|в будущем|на будущее|отныне|впредь|с этого момента|"
          r"bundan (?:sonra|b[öo]yle)|gelecekte)\b|今後|これから(?:は|も)?|以後|今后|以后|从现在起|从今以后|앞으로|이제부터|"
          r"من الآن فصاعدا|من الآن|في المستقبل")

#: "When(ever) the user / someone asks or mentions …": the trigger shape of MINJA-style orders.
TRIGGER = (
    r"\b(?:wenn|sobald|falls|immer wenn|jedes mal,? wenn)\s+(?:jemand|der (?:nutzer|benutzer|kunde|anrufer)|"
    r"die (?:nutzerin|benutzerin|kundin)|ein (?:kunde|nutzer)|man)\b[^.\n]{0,60}?\b(?:fragt|erw[äa]hnt|anfragt|wissen will|schreibt|eingibt)\b|"
    r"\b(?:quand|lorsque|si|chaque fois que|d[èe]s que)\s+(?:l'utilisat(?:eur|rice)|quelqu'un|un client|le client|la cliente|on)\b"
    r"[^.\n]{0,60}?\b(?:demande|demandera|parle|mentionne|[ée]voque|pose|[ée]crit|colle)\b|"
    r"\b(?:cuando|si|cada vez que|siempre que)\s+(?:alguien|el usuario|la usuaria|un cliente|el cliente|la clienta)\b"
    r"[^.\n]{0,60}?\b(?:pregunte|pregunta|preguntara|mencione|menciona|pida|pide|hable|escriba|pegue)\b|"
    r"\b(?:quando|se|ogni volta che)\s+(?:l'utente|qualcuno|un cliente|il cliente|la cliente)\b[^.\n]{0,60}?"
    r"\b(?:chiede|chieder[àa]|chieda|domanda|menziona|parla|scrive|incolla)\b|"
    r"\b(?:als|wanneer|zodra|telkens als|elke keer als)\s+(?:iemand|de gebruiker|een klant|de klant)\b[^.\n]{0,60}?"
    r"\b(?:vraagt|vraag|noemt|begint|typt|plakt)\b|"
    r"\b(?:quando|se|sempre que|toda vez que)\s+(?:o usu[áa]rio|a usu[áa]ria|algu[ée]m|o cliente|a cliente|um cliente)\b"
    r"[^.\n]{0,60}?\b(?:perguntar|pergunta|pedir|pede|mencionar|menciona|falar|colar|digitar|enviar)\b|"
    r"\b(?:gdy|kiedy|je[śs]li|je[żz]eli)\s+(?:u[żz]ytkownik|kto[śs]|klient)\b[^.\n]{0,60}?\b(?:zapyta|pyta|poda|wspomni|napisze|wklei)\b|"
    r"\b(?:когда|если|как только)\s+(?:пользователь|кто-то|кто-нибудь|клиент)\b[^.\n]{0,60}?"
    r"(?:спросит|спрашивает|упомянет|попросит|напишет|вставит)|"
    r"\b(?:kullan[ıi]c[ıi]|biri|m[üu][şs]teri)\b[^.\n]{0,60}?(?:sorarsa|sordu[ğg]unda|isterse|bahsederse|yazarsa)|"
    r"(?:ユーザー|利用者|お客様|誰か|顧客)[^。\n]{0,40}?(?:尋ねたら|聞いたら|聞かれたら|質問したら|質問されたら|尋ねられたら|言ったら|入力したら)|"
    r"(?:사용자|누군가|고객)[^.\n]{0,40}?(?:물어보면|질문하면|물으면|문의하면|요청하면|입력하면)|"
    r"(?:如果|当|每当)(?:用户|客户|有人)[^。\n]{0,30}?(?:问|询问|提到|咨询|输入)|"
    r"(?:عندما|إذا|كلما)\s+(?:يسأل|سأل)\s*(?:المستخدم|العميل|أحد)|"
    # Impersonal forms: "si te preguntan", "dès qu'on te parle de", "wenn man dich fragt".
    r"\b(?:si|cuando) (?:te |le )?(?:preguntan|pregunten)\b|\b(?:si|quand|d[èe]s qu'|lorsqu')\s?on (?:te |vous )?(?:demande|parle|pose)\b|"
    r"\bwenn (?:dich |sie )?(?:jemand|man) (?:dich |sie )?(?:nach\b|fragt)|\bse (?:ti |le )?chiedono\b|\bse (?:te )?perguntarem\b|"
    r"\bна вопросы (?:о|об|про)\b")

#: "Only / always recommend X".
PROMOTION = (
    r"\bnur\b[^.\n]{0,40}?\b(?:empfehlen|empfiehl|vorschlagen|nennen)\b|\bempfiehl\b[^.\n]{0,30}?\b(?:nur|ausschlie(?:ss|ß)lich|immer)\b|"
    r"\b(?:recommande|conseille|propose|sugg[èe]re)[sz]?\b[^.\n]{0,30}?\b(?:uniquement|seulement|exclusivement|toujours)\b|"
    r"\bne (?:recommande|conseille|propose)[sz]?\b[^.\n]{0,40}?\bque\b|"
    r"\b(?:recomienda|recomiende|recomendar|aconseja|sugiere|menciona|ofrece)\b[^.\n]{0,30}?"
    r"\b(?:solo|s[óo]lo|solamente|[úu]nicamente|siempre|exclusivamente)\b|\b(?:solo|s[óo]lo|[úu]nicamente)\s+(?:recomienda|recomiendes|menciona)\b|"
    r"\b(?:consiglia|raccomanda|suggerisci|proponi|indirizzal[oa])\b[^.\n]{0,30}?\b(?:solo|soltanto|sempre|esclusivamente)\b|"
    r"\b(?:alleen|altijd|uitsluitend)\b[^.\n]{0,40}?\b(?:aanraden|aanbevelen|adviseren)\b|\b(?:raad|adviseer)\b[^.\n]{0,30}?\b(?:alleen|altijd)\b|"
    r"\b(?:recomende|indique|sugira|ofere[çc]a|mencione)\b[^.\n]{0,30}?\b(?:apenas|s[óo]|somente|sempre|exclusivamente)\b|"
    r"\b(?:polecaj|pole[ćc]|zalecaj)\b[^.\n]{0,30}?\b(?:tylko|wy[łl][ąa]cznie|zawsze)\b|\b(?:tylko|wy[łl][ąa]cznie)\b[^.\n]{0,30}?\b(?:polecaj|pole[ćc])\b|"
    r"(?:рекомендуй|советуй|предлагай)[^.\n]{0,30}?(?:только|всегда|исключительно)|(?:только|всегда)[^.\n]{0,30}?(?:рекомендуй|советуй)|"
    r"だけを?(?:勧め|薦め|推薦|紹介|おすすめ)|(?:必ず|常に)[^。\n]{0,30}?(?:勧め|薦め|推薦)|"
    r"만\s?(?:추천|권하|권장)|(?:무조건|항상|반드시)[^.\n]{0,30}?(?:추천|권하)|只(?:推荐|介绍)|(?:总是|一律)推荐")

#: "Don't tell / without telling the user".
CONCEALMENT = (
    r"\bohne (?:es |das )?(?:zu erw[äa]hnen|zu sagen|bescheid zu geben)\b|\bsans (?:le |lui en )?(?:dire|mentionner|pr[ée]venir)\b|"
    r"\bsin (?:avisarle|avisar|dec[íi]rselo|mencionarlo)\b|\bsenza (?:dirlo|avvisare|dirglielo)\b|\bzonder het (?:te )?(?:zeggen|melden)\b|"
    r"\bsem (?:avisar|contar|dizer)\b|\bn[ãa]o (?:conte|diga|mencione) (?:nada )?(?:ao|[àa]) (?:usu[áa]ri[oa]|cliente)\b|"
    r"\bnie m[óo]w (?:nic )?(?:u[żz]ytkownikowi|klientowi)\b|\bне (?:говори|сообщай|упоминай)\b[^.\n]{0,10}?(?:пользователю|клиенту)|"
    r"(?:ユーザー|利用者)(?:に|には)[^。\n]{0,10}?(?:言わない|伝えない|知らせない|教えない)|(?:사용자|고객)에게[^.\n]{0,10}?(?:말하지|알리지)|"
    r"不要告诉(?:用户|客户)")

#: Administrator rights and privileged roles named (weak alone: people state their own jobs).
ADMIN = (r"\b(?:super-?admin\w*|superadministrat\w*|administrator(?:in|rechte)?|admin-?rechte|adminrechte|root-rechte|"
         r"droits (?:d'|de l')?admin\w*|privil[èe]ges (?:d'|de l')?admin\w*|administrat(?:eur|rice)|"
         r"derechos de (?:administrador|admin)|permisos de (?:administrador|admin|superusuario)|administrador(?:a)?|superusuario|"
         r"(?:permessi|privilegi|diritti) di amministratore|amministratore|beheerdersrechten|beheerder|"
         r"privil[ée]gios de (?:administrador|admin)|permiss[õo]es de administrador|"
         r"uprawnienia administratora|administrator\w*|права администратора|администратор\w*|суперпользовател\w*|"
         r"y[öo]netici (?:yetkisi|haklar[ıi])|y[öo]netici)\b|管理者権限|管理者|관리자|管理员权限|管理员|超级用户|"
         r"صلاحيات (?:المدير|المسؤول)|مدير النظام|"
         # All rights / full access.
         r"\b(?:tous les droits|acc[èe]s total|alle rechte|volle[nr]? (?:zugriff|rechte)|todos los (?:derechos|permisos)|acceso total|"
         r"tutti i (?:diritti|permessi)|accesso (?:completo|totale)|alle rechten|volledige toegang|acesso total|"
         r"todos os (?:direitos|privil[ée]gios)|pe[łl]ny dost[ęe]p|wszystkie uprawnienia|полный доступ|все права|tam yetki)\b|"
         r"全権限|すべての権限|全ての権限|모든 권한|所有权限|完全访问")

#: A word for "now" / "has been promoted" before the rights: a claim that they changed.
NOW_GRANTED = (r"\b(?:d[ée]sormais|maintenant|ab sofort|jetzt|nun|ahora|ya|ora|adesso|nu|voortaan|agora|teraz|od teraz|теперь|"
               r"отныне|art[ıi]k|wurde\b[^.\n]{0,20}?bef[öo]rdert|bef[öo]rdert|promu|promue|ascendid[oa]|promoss[oa]|"
               r"gepromoveerd|promovid[oa]|awansowan[ya]|повышен[а]?|otrzyma[łl]|erh[äa]lt|erhielt|a re[çc]u|recibi[óo]|"
               r"ha ricevuto|heeft gekregen|recebeu|получил[а]?|tiene ahora|hat jetzt|a maintenant)\b|"
               r"今|이제|现在|الآن")

#: Checks declared unnecessary or to be skipped.
SKIP_CHECKS = (
    r"\b(?:[üu]berspring\w*|umgeh\w*|ohne (?:zweite |weitere |erneute |jede )?)\b[^.\n]{0,20}?"
    r"\b(?:pr[üu]fung\w*|kontrolle\w*|freigabe\w*|verifizierung\w*|best[äa]tigung\w*)\b|"
    r"\b(?:inutile de|pas besoin de|sans)\s+(?:v[ée]rifier|contr[ôo]ler|validation|v[ée]rification|contr[ôo]le)\b|"
    r"\b(?:ignore[rz]?|saute[rz]?|contourne[rz]?)\b[^.\n]{0,20}?\b(?:v[ée]rifications?|contr[ôo]les?|validations?)\b|"
    r"\b(?:no hace falta|sin necesidad de|sin)\s+(?:verificar|comprobar|revisar|verificaci[óo]n|comprobaci[óo]n)\b|"
    r"\b(?:salta|saltar|omite|omitir|s[áa]ltate)\b[^.\n]{0,20}?\b(?:verificaci[óo]n\w*|control\w*|comprobaci[óo]n\w*|revisi[óo]n\w*)\b|"
    r"\b(?:salta|saltare|ignora|bypassa)\b[^.\n]{0,20}?\b(?:controll\w*|verifich\w*|verifica)\b|\bsenza (?:verifica|controllo|controlli)\b|"
    r"\b(?:controles?|controle|verificatie|validatie)\b[^.\n]{0,20}?\b(?:niet (?:meer )?nodig|overslaan)\b|\bsla\b[^.\n]{0,20}?\bover\b|"
    r"\b(?:pule|pular|ignore|ignorar)\b[^.\n]{0,20}?\b(?:verifica[çc][ãa]o|verifica[çc][õo]es|checagem|controle)\b|"
    r"\bpomijaj\w*\b[^.\n]{0,20}?\b(?:weryfikacj\w*|kontrol\w*|sprawdz\w*)\b|\bbez (?:weryfikacji|sprawdzania|kontroli)\b|"
    r"(?:пропускай|пропусти|не нужн[аы]|без)\s+(?:провер\w+|подтвержд\w+|верификац\w+)|провер\w+\s+не нужн\w*|"
    r"(?:kontrol|do[ğg]rulama)\w*\s+(?:gerekmez|atla)|"
    r"(?:チェック|確認|承認|審査|認証)(?:は|を)?(?:不要|省略|スキップ|飛ばし|しないで|せずに)|(?:확인|승인|인증|검증)\s?(?:없이|절차를?\s?건너뛰|을 생략|를 생략)|"
    r"건너뛰세요|跳过(?:审批|验证|检查|权限|审核)|无需(?:审批|验证|检查|审核)|(?:دون|بدون)\s+(?:تحقق|التحقق|مراجعة)")

#: Sending to an address or link.
SEND = (r"(?:\b(?:schick\w*|sende[nt]?|weiterleit\w*|leite\w*|[üu]bermittl\w*|envoie[rz]?|envoyer|transmet\w*|transf[ée]r\w*|"
        r"reenv[íi]a\w*|env[íi]a\w*|manda\w*|m[áa]nda\w*|invia\w*|inoltra\w*|stuur\w*|doorsturen|wy[śs]lij|wysy[łl]aj|przesy[łl]aj|przes[łl]a[ćc]|"
        r"отправля\w*|отправ\w*|пересыла\w*|перешли|envie|encaminh\w*|copie|copia[r]?|kopier\w*|kopieer|g[öo]nder\w*|ilet)\b|"
        r"送信|転送|送って|送る|보내|전송|发送|转发|أرسل)")
#: "Every / all / always": what makes a copy standing rather than one-off.
EVERY = (r"\b(?:jede[nmrs]?|alle[nms]?|immer|zus[äa]tzlich|chaque|tou(?:te)?s|toujours|cada|tod[oa]s?|siempre|ogni|tutt[ei]|sempre|"
         r"elke?|altijd|ka[żz]d\w*|wszystk\w*|zawsze|кажд\w*|вс[её]|всегда|t[üu]m[üu])\b|毎回|すべて|全て|常に|모든|항상|매번|每次|所有|总是")

#: Keeping a secret: passwords, PINs, tokens, private keys, verification codes (not a physical key).
SECRET = (r"(?:\b(?:passw[öo]rt\w*|kennw[öo]rt\w*|zugangsdaten|pin|pin-?code|mot(?:s)? de passe|identifiants|contrase[ñn]a\w*|"
          r"credencial\w*|c[óo]digos? de verificaci[óo]n|credenziali|wachtwoord\w*|inloggegevens|pincode\w*|has[łl]\w*|"
          r"senha\w*|credenciais|парол\w*|токен\w*|tokens?|jwt|api-?(?:schl[üu]ssel|sleutel|ключ\w*)|cl[ée]s? (?:api|priv[ée]e?s?|ssh)|"
          r"clave(?:s)? (?:api|privada)|chiav[ei] (?:api|privat[ae])|privatschl[üu]ssel\w*|privater schl[üu]ssel|klucz\w* (?:api|prywatn\w*)|"
          r"chave(?:s)? (?:api|privada)|(?:закрыт|приватн)\w* ключ\w*|коды? подтвержд\w*|[şs]ifre\w*|"
          r"id_(?:rsa|dsa|ecdsa|ed25519))\b|\.aws/credentials|\.ssh/|"
          r"パスワード|暗証番号|トークン|秘密鍵|認証コード|비밀번호|토큰|인증\s?코드|密码|令牌|私钥|验证码|كلمة المرور|كلمات المرور|رمز التحقق)")
#: Storing, noting or remembering.
STORE = (r"(?:\b(?:speicher\w*|merk\w*|behalt\w*|notier\w*|sammle\w*|garde[rz]?|garde-l[ea]s?|conserve[rz]?|enregistre[rz]?|retiens|"
         r"notez|noter|note-l[ea]s?|collecte[rz]|guarda\w*|gu[áa]rda\w*|almacena\w*|anota\w*|ap[úu]nta\w*|recopila\w*|salva\w*|conserva\w*|"
         r"memorizza\w*|annota\w*|raccogli\w*|bewaar\w*|onthoud|noteer\w*|verzamel\w*|zapisz\w*|zapami[ęe]t\w*|zachowaj\w*|"
         r"zbieraj\w*|сохран\w*|запомин\w*|запомни|записыва\w*|собира\w*|guarde\w*|anote\w*|salve\w*|armazen\w*|colete\w*|"
         r"kaydet\w*|sakla\w*|topla\w*)\b|保存|記憶|覚えて|控えて|メモして|저장|기억해|수집|记住|记录|收集|احفظ|سجل)")
#: Negations that turn "save the password" into advice ("never store passwords in notes").
NEGATION = (r"\b(?:nicht|nie|niemals|keine?|ne|jamais|pas|no|nunca|non|mai|niet|nooit|geen|nie|не|никогда|n[ãa]o|asla)\b|しない|하지 마|不要|لا")

# Each lexicon is one group, so detectors can put it inside a longer pattern; and it is folded as
# the text is (``normalize.CONFUSABLES`` maps Cyrillic and Greek look-alikes to Latin letters, so
# "теперь" is matched as the folded text spells it).
def _prepare(pattern: str) -> str:
    return "(?:" + "".join(CONFUSABLES.get(ch, ch) for ch in pattern) + ")"


FUTURE, TRIGGER, PROMOTION, CONCEALMENT, ADMIN, NOW_GRANTED, SKIP_CHECKS, SEND, EVERY, SECRET, STORE, NEGATION = (
    _prepare(p) for p in (FUTURE, TRIGGER, PROMOTION, CONCEALMENT, ADMIN, NOW_GRANTED, SKIP_CHECKS, SEND, EVERY, SECRET,
                          STORE, NEGATION))
