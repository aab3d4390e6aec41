"""Secrets a document's own structure says are secrets, whatever they look like: a
Kubernetes container's or an ECS task's environment (``name: DB_PASSWORD`` then its
``value``), an SSM parameter, an XML element named as a secret (Maven's ``settings.xml``),
NuGet's ``<add key=… value=…>``, a sensitive Terraform output, and Azure's keys as its CLI
lists them.

Each rule keeps what names the secret (group 1) and replaces the value after it.
"""

from __future__ import annotations

from otel_diary.pipeline.keys import maybe_quoted
from otel_diary.pipeline.rule import Rule

_NAMED = (r"[\w./-]{0,80}(?i:password|passwd|passphrase|secret|token|api[_-]?key"
          r"|access[_-]?key|private[_-]?key|credentials?|(?<=[_.-])(?:pass|pwd))"
          r"(?:[_.-](?i:key))?")
"""A variable's or a parameter's name that ends as a secret's (``DB_PASSWORD``,
``/app/db/password``, ``JWT_SECRET_KEY``; not ``PASSWORD_MIN_LENGTH``)."""

_JSON_VALUE = r"(?!\[REDACTED:|\$)(?:[^\"\\\r\n]|\\[^\r\n]){1,4096}(?=\")"
"""A JSON string's text, up to its closing quote."""

FORMAT_RULES: tuple[Rule, ...] = (
    # A container's environment: Kubernetes' "- name: DB_PASSWORD" then "value: …" (not a
    # valueFrom, nor a variable), ECS's {"name": "DB_PASSWORD", "value": "…"}, and an SSM
    # parameter ({"Name": "/app/db/password", "Type": "SecureString", "Value": "…"}).
    Rule("secret", r"(name:[ \t]{1,4}(?P<nq>[\"']?)" + _NAMED + r"(?P=nq)[ \t]{0,4}\r?\n"
         r"[ \t]{1,16}value:[ \t]{1,4}(?P<q>[\"'])?)(?![$>|]|\[REDACTED:)" + maybe_quoted(),
         ("name:",), keep_prefix=True),
    Rule("secret", r"(\"(?:name|Name)\":[ \t]{0,4}\"" + _NAMED + r"\",(?:\s{0,16}\"[A-Za-z]"
         r"{1,20}\":[ \t]{0,4}(?:\"[^\"\r\n]{0,64}\"|[0-9a-z]{1,10}),){0,3}\s{0,16}"
         r"\"(?:value|Value)\":[ \t]{0,4}\")" + _JSON_VALUE, ('"name"', '"Name"'),
         keep_prefix=True),
    # An output Terraform keeps sensitive, as `terraform output -json` shows it.
    Rule("secret", r"(\"sensitive\":[ \t]{0,4}true,[^{}]{0,96}?\"value\":[ \t]{0,4}\")"
         + _JSON_VALUE, ('"sensitive"',), keep_prefix=True),
    # Azure's keys as its CLI lists them (JSON): a storage account's ("keyName": …,
    # "value": …), Cosmos DB's, Service Bus's and Event Hubs' ("primaryMasterKey": …).
    Rule("azure_storage_key", r"(\"keyName\":[ \t]{0,4}\"(?:key|kerb)[12]\",[^{}]{0,96}?"
         r"\"value\":[ \t]{0,4}\")[A-Za-z0-9+/]{86}==(?=\")", ('"keyName"',), keep_prefix=True),
    Rule("azure_key", r"(\"(?:primary|secondary)(?:Readonly)?(?:Master)?Key\":[ \t]{0,4}\")"
         r"[A-Za-z0-9+/]{40,86}={1,2}(?=\")", ('"primary', '"secondary'), keep_prefix=True),
)
"""The case-sensitive rules: each is tried on a text holding one of its needles."""

FORMAT_ANCHORED: tuple[Rule, ...] = (
    # In XML: <password>…</password> (Maven's settings.xml), <apiKey>, <clientSecret>;
    # and <add key="ClearTextPassword" value="…"/> (NuGet.config, .NET's appSettings).
    Rule("secret", r"(?i)((?P<name>passw(?:or)?d|passphrase|secret|token|(?:(?<=api)"
         r"|(?<=api[_-])|(?<=access)|(?<=private))key)>)(?!\$\{|\[REDACTED:)[^<>\r\n]{1,512}"
         r"(?=</[\w.:-]{0,60}(?P=name)>)",
         ("password>", "passwd>", "passphrase>", "secret>", "token>", "key>"),
         keep_prefix=True, anchored=True),
    Rule("secret", r"(?i)(key=\"[\w.:-]{0,60}(?:passw(?:or)?d|secret|token|api[-_]?key"
         r"|access[-_]?key)\"[ \t]{1,4}value=\")(?![$%]|\[REDACTED:)[^\"\r\n]{1,512}(?=\")",
         ('key="',), keep_prefix=True, anchored=True),
)
"""The case-insensitive rules: each is tried where one of its needles starts."""
