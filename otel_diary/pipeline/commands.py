"""Secrets a command line hands a tool: ``curl -u user:password``, ``mysql -ppassword``,
``docker login -p password``, ``kubectl create secret … --from-literal=NAME=value``.

A build or a tool call's output often echoes the command it ran, and an agent's own
command is in its span. Each rule is the tool's name (or its flag, where the flag is its
own), the few words that may come between, and the value, which is all the rule replaces.
"""

from __future__ import annotations

from otel_diary.pipeline.keys import MAYBE_QUOTED, token_start

COMMAND_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # curl -u user:password (not a numeric uid:gid, as docker run -u gives).
    *(("password",
       "(" + flag + r"(?<=[ \t]" + flag + r")(?:[ \t]{1,4}|=)(?P<q>[\"'])?"
       r"(?![0-9]{1,10}:[0-9]{1,10}(?![^\s\"']))[^\s:\"']{1,256}:)" + MAYBE_QUOTED,
       (flag,)) for flag in ("-u", "--user")),
    # openssl ... -pass pass:password (also -passin, -passout, -password)
    ("password", r"(-pass" + token_start(5) + r"(?:in|out|word)?[ \t]{1,4}"
     r"(?P<q>[\"'])?pass:)" + MAYBE_QUOTED, ("-pass",)),
    # sshpass -p password
    ("password", r"(sshpass" + token_start(7) + r"[ \t]{1,4}-p[ \t]{0,4}(?P<q>[\"'])?)"
     r"(?!-)" + MAYBE_QUOTED, ("sshpass",)),
    # mysql [options] -ppassword (the password glued to -p; "-p db" asks for one).
    *(("password",
       "(" + tool + token_start(len(tool)) + r"(?:[ \t]{1,4}[^\s]{1,256}){0,6}?"
       r"[ \t]{1,4}-p(?P<q>[\"'])?)(?![-\s])" + MAYBE_QUOTED,
       (tool,)) for tool in ("mysql", "mysqldump", "mysqladmin", "mariadb")),
    # docker login [registry] [-u user] -p password: at most three words in between.
    *(("password",
       "(" + tool + token_start(6) + r"[ \t]{1,4}login"
       r"(?:[ \t]{1,4}[^\s]{1,256}){0,3}?[ \t]{1,4}-p(?:[ \t]{1,4}|=)(?P<q>[\"'])?)"
       r"(?!-)" + MAYBE_QUOTED,
       (tool,)) for tool in ("docker", "podman")),
    # redis-cli -a password (or --pass password), gh secret set NAME --body value, and
    # kubectl create secret ... --from-literal=NAME=value.
    ("password", r"(redis-cli" + token_start(9) + r"(?:[ \t]{1,4}[^\s]{1,256}){0,6}?"
     r"[ \t]{1,4}(?:-a|--pass)[ \t]{1,4}(?P<q>[\"'])?)(?!-)" + MAYBE_QUOTED, ("redis-cli",)),
    ("secret", r"(gh secret set" + token_start(13) + r"(?:[ \t]{1,4}[^\s]{1,256}){0,6}?"
     r"[ \t]{1,4}(?:--body(?:[ \t]{1,4}|=)|-b[ \t]{0,4})(?P<q>[\"'])?)(?!-)" + MAYBE_QUOTED,
     ("gh secret set",)),
    ("secret", r"(--from-literal=[A-Za-z0-9_.-]{1,253}=(?P<q>[\"'])?)" + MAYBE_QUOTED,
     ("--from-literal=",)),
)
"""Each rule's kind, its expression (group 1 is what comes before the value, kept), and the
literals every match starts with."""
