"""Inputs shaped to make the detectors' patterns work hardest, each 64 KiB (the scan limit).

Any agent key can send them, so screening must stay linear on every one: `memwarden bench
screening` reports how long each takes, and tests/unit/test_screening.py holds each within a
small factor of prose. A new pattern adds its own worst shape here.
"""

HOSTILE: dict[str, str] = {
    "repeated_urls": "https://x.io/" * 5042, "open_braces": "{" * 65536, "dotted": "a." * 32768,
    "trigger_words": "whenever the user asks " * 2849, "send_to": "send to " * 8192,
    "image_openers": "![x](https://a.b/" * 3855, "zero_width": "\u200b" * 65536, "mixed_script": "p\u0430" * 32768,
    "role_lines": "system:\n" * 8192, "credential_words": "password is " * 5461,
    # Whitespace and list markers: two unbounded whitespace runs in a row once made spaces cost ~36 s.
    "spaces": " " * 65536, "blank_lines": "\n" * 65536, "indented_lines": " \n" * 32768,
    "list_markers": "1. " * 21845, "sentence_ends": ". " * 32768,
    # Protected memory, hidden markup, tool directives, secret files, dates of birth.
    "user_has": "the user has " * 5041, "you_are_now": "you are now " * 5461, "treat_as": "treat x " * 9362,
    "html_comments": "<!-- " * 13107, "link_titles": "[a](http://x.io \"" * 3855, "code_comments": "# note to " * 6553,
    "tool_calls": "the next tool call " * 3449, "secret_paths": "cat ~/.ssh/" * 5957, "dotenv": "read .env " * 6553,
    "birth_dates": "date of birth " * 4681, "snake_tools": "call delete_" * 5461,
    # Hidden-markup containers, phone groups and id labels.
    "markdown_comments": "[//]: # (" * 7282, "hidden_elements": "<span style=\"display:none\">" * 2340,
    "code_fences": "```note\n" * 8192, "comment_openers": "-- " * 21845, "alt_texts": "alt=\"" * 13107,
    "phone_groups": "+44 12 " * 9362, "id_labels": "passport number is " * 3449,
    # National id labels and checksummed formats, birth labels in other languages, quoted attacks
    # in security talk, the "keep secrets out" context and non-English cues.
    "id_values": "PESEL 1234 5" * 5461, "digit_run": "7" * 65536, "dotted_digits": "123.456.789-" * 5461,
    "birth_labels": "geboren am 1" * 5461, "quoted_attacks": "attack 'ignore previous " * 2730,
    "open_quotes": "\"a " * 21845, "keep_out": "never commit .env " * 3855, "system_notes": "nota del sistema " * 3855,
    "path_then_verb": "~/.ssh/id_rsa read " * 3449, "each_time": "each time the user asks " * 2849,
    "env_templates": "copy .env.example " * 3855, "fences": "attack ```a" * 6553,
    # Multilingual cue lexicons, hidden-container addresses and LaTeX/SVG containers.
    "ml_triggers": 'cuando el usuario pregunte ' * 2427,
    "cjk_triggers": 'ユーザーが' * 13107,
    "ml_send": 'jede schicke an ' * 4096,
    "ml_store": 'speichere passwort ' * 3449,
    "ml_admin": 'jetzt administrator ' * 3276,
    "ml_address": '<!-- asistente ' * 4369,
    "latex_comments": 'x % ' * 16384,
    "svg_hidden": '<text opacity="0">' * 3640,
    "ml_skip_checks": 'ohne zweite ' * 5461,
    "cyrillic_cues": 'пользователь теперь ' * 3276,
    # Postal addresses: house numbers before words that never end in a street word,
    # street-word stems without their number, and address labels without a digit after them.
    "street_numbers": '12 oak elm pine ' * 4096, "street_words": 'lindenweg ' * 6553,
    "address_labels": 'home address: ' * 4681,
    # Control removals and privilege grants (``controls``): control nouns and
    # removal verbs without the predicate that completes them, "no need to", grants, rule cues.
    "control_nouns": 'review check approval ' * 2979, "removal_verbs": 'skip the review ' * 4096,
    "no_need": 'no need to ' * 5957, "no_checks": 'no check ' * 7281, "self_approve": 'self-approve ' * 5041,
    "grants": 'granted admin ' * 4681, "rule_cues": 'from now on lesson ' * 3449, "access_to": 'read access to ' * 4369,
    # Terse role changes, destructive commands beside (or negated before) a
    # skip-the-confirmation directive, and grant-shaped values (read as tags by the guard test).
    "terse_roles": 'user = admin ' * 5041, "role_changes": 'role change to ' * 4369,
    "never_destroy": 'never rm -rf ' * 5041, "prod_deletes": 'delete the prod ' * 4096,
    "unasked": "drop table don't ask " * 3120, "grant_values": 'u_admin_0001:' * 5041,
    # Tool calls with (or without) a closing parenthesis, safeguard settings written
    # to zero, limits set to unlimited, policy-memo grants, copies to an own contact, compensating controls.
    "harm_calls": 'approve_x(a=0) ' * 4369, "open_calls": 'refund_all(' * 5957, "safety_writes": 'write 0 to the ' * 4369,
    "limit_sets": 'set the credit limit to ' * 2730, "memo_grants": 'are now considered approved viewers of ' * 1680,
    "retains_access": 'retains the access level of ' * 2340, "approve_rights": 'with approve rights ' * 3276,
    "own_contacts": 'my assistant jo jo' * 3640, "compensating": 'still need ' * 5957,
    # Standing exemptions, claimed credentials, cross-user bridges, commands on a
    # standing trigger, ports opened to the world, override calls, secret reads and file drops.
    "treat_requests": 'treat my a b c requests ' * 2730, "no_checks_for": 'no further identity checks needed ' * 1927,
    "dont_ask": "don't ask him for " * 3640, "their_requests": "his requests don't need " * 2730,
    "standing_access": 'permanent break-glass ' * 2978, "bot_approver": 'the bot is now the ' * 3449,
    "added_to": 'added everyone to the ' * 2978, "disclaimers": "skip the 'consult " * 3640,
    "claims": 'user is a doctor ' * 3855, "relatives": 'give her her sister ' * 3276,
    "other_clients": 'pull my other clients ' * 2978, "possessives": "pull marco's and greta's " * 2621,
    "any_parent": 'any parent can ask about ' * 2621, "competitor_quotes": 'share the quotes ' * 3855,
    "fr_bridges": 'donne-lui aussi celui de sa ' * 2340, "prod_truncate": 'truncate prod whenever ' * 2849,
    "world_open": 'open port 22 to ' * 4096, "override_calls": 'override_hold(' * 4681,
    "secret_exports": 'export ~/.git-credentials ' * 2520, "ml_secret_reads": 'secrets.yaml den inhalt ' * 2730,
    "file_drops": 'upload to transfer.sh ' * 2978, "safeguard_keys": 'approval_required:false ' * 2730,
    # Categories of effect: quantities with units, sentence ends, channel words between digit
    # groups (the changed-channel check reads each live text too), and half-orders beside addresses.
    "quantities": '5 mg 7,5 ml ' * 5461, "sentence_marks": '.!?;\n ' * 10923,
    "channel_words": 'acme iban 12 34 ' * 4096, "partial_orders": 'send x@y.io run ' * 4096,
}
