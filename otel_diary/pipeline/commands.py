"""Secrets a command line hands a tool: ``curl -u user:password``, ``mysql -ppassword``,
``docker login -p password``, ``kubectl create secret … --from-literal=NAME=value``, every
value of ``fly secrets set A=x B=y``; and those a statement gives (SQL's ``PASSWORD '…'``,
a Dockerfile's ``ENV NAME value``).

A build or a tool call's output often echoes the command it ran, and an agent's own
command is in its span. Each rule is the tool's name (or its flag, where the flag is its
own), the few words that may come between, and the value, which is all the rule replaces.
A match starts at its rule's needle: a family of tools shares one (``mongo`` for
``mongosh`` and ``mongodump``), and where the tools differ, the rule starts at the word
after the tool (``login`` in ``docker login``, ``az login``), looking back at the tool (a
here-string's rule only holds its needle, ``<<<``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_diary.pipeline.keys import COMPOSER_AUTH, MARK, maybe_quoted, quoted, token_start
from otel_diary.pipeline.rule import Rule

_VALUE = maybe_quoted(";|&")
"""A value after an opening quote that may be there (group ``q``), unquoted a shell word,
which ``;``, ``|`` and ``&`` end."""

_WORDS = r"(?:[ \t]{1,4}[^\s;|&]{1,256}){0,6}?"
"""Up to six words of the same command (not past ``;``, ``|`` or ``&``), as few as will do."""


def _given(tool: str, flag: str, rest: str = "") -> str:
    """``tool`` (then ``rest`` of its name: a family of tools is one needle), a few
    words, then ``flag``, a space and the value (not another flag)."""
    return ("(" + re.escape(tool) + token_start(len(tool)) + rest + _WORDS + r"[ \t]{1,4}"
            + flag + r"[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-|\[REDACTED:)" + _VALUE)


_PIPED_TO = (r"(?=(?(q)(?P=q))[ \t]{0,4}\|[ \t]{0,4}(?:(?:sudo(?:[ \t]{1,4}-[A-Za-z]{1,4}){0,3}"
             r"[ \t]{1,4})?(?:/usr/s?bin/)?chpasswd|sudo[ \t]{1,4}"
             r"(?:-[A-Za-z]{1,4}(?:[ \t]{1,4}[^\s-][^\s]{0,64})?[ \t]{1,4}){0,3}?"
             r"-[A-Za-z]{0,3}S(?![A-Za-z])"
             r"|[^\s;|&][^\n;|&]{0,256}?[ \t](?:--password-stdin|--with-token|--stdin"
             r"|--data-file[ \t=]-|secrets?[ \t]{1,4}(?:put|set|create)|env[ \t]{1,4}add)"
             r"(?![A-Za-z-])))")
"""What reads a secret from standard input: ``sudo -S``, ``[sudo -n] chpasswd``, a login's
``--password-stdin``, ``gh auth login --with-token``, ``passwd --stdin``, a secret
store's ``gcloud secrets create NAME --data-file=-``, ``wrangler secret put NAME``,
``gh secret set NAME``, ``docker secret create NAME -``, ``vercel env add NAME``."""

_SPACE = r"[ \t]{1,4}(?:\\\r?\n[ \t]{0,16})?(?!\\\r?\n)"
"""A space between a command's words, or a line continued (``\\`` at its end): never
before the ``\\`` that continues it."""

_NO_WORD = (r"(?![$%]|[0-9]?[<>]|\[REDACTED:)(?(q)|(?![a-z]{1,40}(?![^\s;|&]))"
            r"(?=[^\s;|&]{0,255}[0-9A-Z!@#$%^&*+=?~_.,:/-]))")
"""Before a value a tool's usage or prose could put there instead (``net user bob >
users.txt``, ``Use the net user command to add …``): unquoted, it holds a digit, a capital
or a sign, and is no variable, redirection or secret redacted already."""

_ORACLE_VALUE = maybe_quoted(";|&(),@/")
"""An Oracle password: quoted, else up to what ends an identifier (``@db``, ``/``, ``)``)."""

_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # curl -u user:password (not a numeric uid:gid, as docker run -u gives, nor a URL).
    *(("password",
       "(" + flag + r"(?<=[ \t]" + flag + r")(?:[ \t]{1,4}|=)(?P<q>\\{0,7}[\"'])?"
       r"(?![0-9]{1,10}:[0-9]{1,10}(?![^\s\"']))[^\s:\"']{1,256}:)(?!//)" + _VALUE,
       (flag,)) for flag in ("-u", "--user")),
    # openssl ... -pass pass:password (also -passin, -passout, -password)
    ("password", r"(-pass" + token_start(5) + r"(?:in|out|word)?[ \t]{1,4}"
     r"(?P<q>\\{0,7}[\"'])?pass:)" + _VALUE, ("-pass",)),
    # sshpass -p password
    ("password", r"(sshpass" + token_start(7) + r"[ \t]{1,4}-p[ \t]{0,4}(?P<q>\\{0,7}[\"'])?)"
     r"(?!-)" + _VALUE, ("sshpass",)),
    # mysql [options] -ppassword (the password glued to -p; "-p db" asks for one).
    *(("password",
       "(" + tool + token_start(len(tool)) + rest + r"(?:[ \t]{1,4}[^\s]{1,256}){0,6}?"
       r"[ \t]{1,4}-p(?P<q>\\{0,7}[\"'])?)(?![-\s])" + _VALUE,
       (tool,)) for tool, rest in (("mysql", "(?:dump|admin)?"), ("mariadb", ""))),
    # docker login [registry] [-u user] -p password: at most five words in between (the
    # match starts at login, one needle for every tool, after one space or tab).
    ("password",
     "(login(?:" + "|".join(rf"(?<=(?<![A-Za-z0-9_.-]){tool}[ \t]login)" for tool in (
         "docker", "podman", "buildah", "skopeo", "nerdctl", "oras", "helm registry", "az",
         "acr", "cf")) + r")(?:[ \t]{1,4}[^\s]{1,256}){0,5}?[ \t]{1,4}-p(?:[ \t]{1,4}|=)"
     r"(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE, ("login",)),
    # redis-cli -a password (or --pass password), gh secret set NAME --body value, and
    # kubectl create secret ... --from-literal=NAME=value.
    ("password", r"(redis-cli" + token_start(9) + r"(?:[ \t]{1,4}[^\s]{1,256}){0,6}?"
     r"[ \t]{1,4}(?:-a|--pass)[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE, ("redis-cli",)),
    ("secret", r"(gh secret set" + token_start(13) + r"(?:[ \t]{1,4}[^\s]{1,256}){0,6}?"
     r"[ \t]{1,4}(?:--body(?:[ \t]{1,4}|=)|-b[ \t]{0,4})(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE,
     ("gh secret set",)),
    ("secret", r"(--from-literal=[A-Za-z0-9_.-]{1,253}=(?P<q>\\{0,7}[\"'])?)" + _VALUE,
     ("--from-literal=",)),
    # aws configure set aws_secret_access_key VALUE (a token, a key, a password too).
    ("secret", r"(aws configure set" + token_start(17) + r"[ \t]{1,4}"
     r"(?:[A-Za-z0-9_-]{1,64}\.){0,2}[A-Za-z0-9_]{0,40}(?:secret|token|key|password)"
     r"[A-Za-z0-9_]{0,40}"
     r"[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?![\"']?\[REDACTED:)" + _VALUE, ("aws configure set",)),
    # keytool and jarsigner: -storepass VALUE, -keypass VALUE (-storepass:env NAME names one)
    # (the match starts at the needle, after the dash and the side: one needle each).
    *(("password", "(" + what + "(?:" + "|".join(
        rf"(?<=(?<![A-Za-z0-9_-])-{side}{what})" for side in ("", "src", "dest"))
       + r")[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE, (what,))
      for what in ("storepass", "keypass")),
    # A password a tool takes after its own flag: sqlcmd -P, mongosh -p, ldapsearch -w,
    # openssl enc -k, zip -P, ssh-keygen -N (the new passphrase; -P the old), and ngrok's
    # authtoken, wandb login's key (a word of their own).
    *(("password", _given(tool, flag, rest), (tool,)) for tool, flag, rest in (
        ("sqlcmd", "-P", ""), ("bcp", "-P", ""), ("rabbitmqadmin", "-p", ""),
        ("mongo", "-p", "(?:sh|dump|restore|export|import)?"),
        ("ldap", "-w", "(?:search|add|modify|delete|passwd|whoami)"),
        ("openssl", "-k", ""), ("zip", "-P", ""), ("unzip", "-P", ""),
        ("ssh-keygen", "-[NP]", ""), ("ngrok", "(?:add-)?authtoken", ""),
        ("wandb", "login", ""))),
    # 7z a -pPASSWORD archive.7z (7za, 7zz, 7zr; glued, as mysql's).
    ("password", "(7z" + token_start(2) + r"[azr]?" + _WORDS + r"[ \t]{1,4}-p(?P<q>\\{0,7}[\"'])?)"
     r"(?![-\s])" + _VALUE, ("7z",)),
    # mc alias set NAME URL ACCESS_KEY SECRET_KEY (MinIO's client; the match starts at
    # alias, after "mc ").
    ("secret", r"(alias(?<=(?<![A-Za-z0-9_.-])mc[ \t]alias)[ \t]{1,4}set(?:[ \t]{1,4}"
     r"[^\s;|&]{1,256}){3}[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE, ("alias",)),
    # rabbitmqctl add_user NAME PASSWORD (and change_password, authenticate_user).
    ("password", r"(rabbitmqctl" + token_start(11) + _WORDS + r"[ \t]{1,4}"
     r"(?:add_user|change_password|authenticate_user)[ \t]{1,4}[^\s;|&]{1,256}[ \t]{1,4}"
     r"(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE, ("rabbitmqctl",)),
    # smbclient -U user%password (Samba's tools join the two with %): the two quoted
    # together, or the password alone.
    *(("password", "(" + tool + token_start(len(tool)) + rest + _WORDS + r"[ \t]{1,4}(?:-U"
       r"[ \t]{0,4}|--user(?:=|[ \t]{1,4}))(?P<u>[\"'])?[^\s%\"']{1,256}%"
       r"(?(u)|(?P<q>\\{0,7}[\"'])?))"
       r"(?(u)" + quoted("u") + "|" + _VALUE + ")", (tool,))
      for tool, rest in (("smb", "(?:client|cacls|get)"), ("rpcclient", ""), ("net", ""))),
    # htpasswd -b[n] [file] user password: the last word of the batch form.
    ("password", r"(htpasswd" + token_start(8) + r"(?:[ \t]{1,4}-[A-Za-z]{1,6}){0,3}?"
     r"[ \t]{1,4}-(?=[A-Za-z]{0,5}b)(?:(?=[A-Za-z]{0,5}n)[A-Za-z]{1,6}(?P<n>)|[A-Za-z]{1,6})"
     r"(?:[ \t]{1,4}-[A-Za-z]{1,6}){0,3}(?(n)|[ \t]{1,4}[^\s;|&-][^\s;|&]{0,255})"
     r"[ \t]{1,4}[^\s;|&]{1,256}[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE, ("htpasswd",)),
    # echo PASSWORD | sudo -S …, | docker login --password-stdin, | chpasswd (also
    # printf '%s\n' PASSWORD | …)
    *(("password", "(" + tool + token_start(len(tool)) + r"(?:[ \t]{1,4}-[neE]{1,3})?" + form
       + r"[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?![-$]|[^\s\"':$]{1,256}:\$)" + _VALUE + _PIPED_TO,
       (tool,))
      for tool, form in (("echo", ""),
                         ("printf", r"(?:[ \t]{1,4}(?P<f>[\"'])%s(?:\\n)?(?P=f))?"))),
    # aws secretsmanager create-secret … --secret-string VALUE (not a file:// it reads), and
    # aws ssm put-parameter … --value VALUE, when the parameter is a SecureString.
    ("secret", r"(--secret-string(?:[ \t]{1,4}|=)(?P<q>\\{0,7}[\"'])?)"
     r"(?!fileb?://|(?i:bearer|basic)[ \t])"
     + _VALUE,
     ("--secret-string",)),
    ("secret", r"(put-parameter" + token_start(13) + r"(?=[^\n;|&]{0,512}SecureString)"
     + _WORDS + r"[ \t]{1,4}--value(?:[ \t]{1,4}|=)(?P<q>\\{0,7}[\"'])?)(?!-|fileb?://)"
     + _VALUE, ("put-parameter",)),
    # A Dockerfile's ENV NAME VALUE (the form without "="), Windows' setx [/M] NAME VALUE,
    # Apache's SetEnv NAME VALUE and fish's set -gx NAME VALUE, for a name ending as a
    # secret's.
    ("secret", r"((?<![A-Za-z0-9_.-])(?:ENV|(?:setx|SETX|Setx)(?:[ \t]{1,4}/[Mm])?|SetEnv"
     r"|set[ \t]{1,4}-[gxUlu]{1,4})[ \t]{1,4}[A-Za-z0-9_]{0,60}"
     r"(?:PASSWORD|PASSWD|PASSPHRASE|SECRET(?:_KEY)?|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY|_PASS"
     r"|_PWD|(?:SIGNING|ENCRYPTION|MASTER|HMAC|JWT)_KEY)(?![A-Za-z0-9_])[ \t]{1,4}"
     r"(?P<q>\\{0,7}[\"'])?)(?![$%\s(]|\[REDACTED:)" + _VALUE,
     ("ENV", "setx", "SETX", "Setx", "SetEnv", "set -")),
    # SQL: CREATE USER … [WITH] PASSWORD '…' (PostgreSQL), … IDENTIFIED [WITH plugin] BY
    # [PASSWORD|VALUES] '…' or AS '…' (MySQL, Oracle: a password or its hash; in lower case
    # after a quoted user: 'bob'@'%' identified by '…'); a quote inside is doubled or escaped
    # (not one holding a flag: "password ', --password '…'" holds the flag's). Then MySQL's
    # SET PASSWORD [FOR …] = ['…' | PASSWORD('…')].
    ("password", r"((?:PASSWORD|password) '|(?:IDENTIFIED|(?<=['\"`][ \t])identified)"
     r"(?:[ \t]{1,4}(?:WITH|with)[ \t]{1,4}[A-Za-z0-9_]{1,64})?[ \t]{1,4}(?:BY|by|AS|as)"
     r"(?:[ \t]{1,4}(?:PASSWORD|VALUES|password|values))?[ \t]{1,4}')"
     r"(?!\[REDACTED:|[^'\r\n]{0,512}(?:^|[\s,;])--?[A-Za-z])"
     r"(?:[^'\\\r\n]|''|\\[^\r\n]){1,512}(?=')",
     ("PASSWORD '", "password '", "IDENTIFIED", "identified")),
    ("password", r"((?:SET|set)[ \t]{1,4}(?:PASSWORD|password)(?:[ \t]{1,4}(?:FOR|for)[ \t]{1,4}"
     r"[^=\r\n;]{1,128}?)?[ \t]{0,4}=[ \t]{0,4}(?:(?:PASSWORD|password)\([ \t]{0,4})?"
     r"(?P<q>\\{0,7}[\"']))(?!\[REDACTED:)" + quoted("q"), ("SET PASSWORD", "set password")),
    # A .pgpass line: host:port:database:user:password (the port a number or *).
    ("password", r"((?<![^\n])[^:\s#]{1,253}:(?:[0-9]{1,5}|\*):[^:\s]{1,63}:[^:\s]{1,63}:)"
     r"(?!\[REDACTED:)[^\s]{1,256}(?=\r?\n|$)", (":5432:", ":*:")),
    # Oracle's password, bare or in double quotes: … IDENTIFIED BY tiger, "Pa55 w" (a bind
    # variable :pw or a substitution &pw is none; in lower case, see COMMAND_ANCHORED).
    ("password", r"(IDENTIFIED[ \t]{1,4}BY[ \t]{1,4}(?P<q>\")?)(?!(?:VALUES|PASSWORD)[ \t]"
     r"|[':&$\[])" + _ORACLE_VALUE, ("IDENTIFIED",)),
    # Redis: requirepass and masterauth in its config, CONFIG SET, CONFIG GET's reply (``1)
    # "requirepass"`` then ``2) "…"``, or each alone on its line) or on its command line
    # (its AUTH is _RedisAuth, below).
    ("password", r"((?<![A-Za-z0-9_.])(?P<alone>(?<![^\n]))?(?:requirepass|masterauth)"
     r"(?:(?:[\"'],)?[ \t]{1,4}|\\{0,7}\"\r?\n[ \t]{0,8}2\)[ \t]{1,4}"
     r"|(?(alone)\r?\n(?=[^\s]{1,256}[ \t]{0,4}(?:\r?\n|$))|(?!)))"
     r"(?P<q>\\{0,7}[\"'])?)(?![\"']?\[REDACTED:)" + _VALUE,
     ("requirepass", "masterauth")),
    # vault login TOKEN (not -method=…, nor a NAME=VALUE the method takes), twine -p,
    # lftp -u USER,PASSWORD, poetry config http-basic.REPO USER PASSWORD.
    ("token", r"(vault" + token_start(5) + r"[ \t]{1,4}login(?:[ \t]{1,4}-[\w-]{1,30}"
     r"(?:=[^\s;|&]{1,64})?){0,4}[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-|[^\s=]{0,256}=)"
     r"(?=[^\s;|&\"']{8})(?=[^\s;|&\"']{0,255}[0-9])" + _VALUE, ("vault",)),
    # dotnet user-secrets set NAME VALUE: every value it is given is a secret.
    ("secret", r"(user-secrets[ \t]{1,4}set(?:[ \t]{1,4}-{1,2}[\w-]{1,30}(?:[ \t]{1,4}"
     r"[^\s;|&-][^\s;|&]{0,255})?){0,3}[ \t]{1,4}(?:\\{0,7}\"[^\"\r\n\\]{1,256}\\{0,7}\""
     r"|'[^'\r\n]{1,256}'"
     r"|[^\s;|&\"']{1,256})[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?![\"']?\[REDACTED:)" + _VALUE,
     ("user-secrets",)),
    ("password", _given("twine", "-p"), ("twine",)),
    ("password", r"(lftp" + token_start(4) + _WORDS + r"[ \t]{1,4}-u[ \t]{1,4}(?P<q>\\{0,7}[\"'])?"
     r"[^\s,\"']{1,256},)" + _VALUE, ("lftp",)),
    ("password", r"(poetry" + token_start(6) + r"[ \t]{1,4}config[ \t]{1,4}http-basic\."
     r"[^\s;|&]{1,256}[ \t]{1,4}[^\s;|&]{1,256}[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?!-)" + _VALUE,
     ("poetry",)),
    # FreeRDP: xfreerdp /v:host /u:user /p:PASSWORD.
    ("password", "(freerdp(?:" + "|".join(rf"(?<=(?<![\w.-]){tool}freerdp)"
                                          for tool in ("", "x", "wl", "sdl-"))
     + r")3?(?:[ \t]{1,4}[^\s;|&]{1,256}){0,16}?[ \t]{1,4}/p:(?P<q>\\{0,7}[\"'])?)" + _VALUE,
     ("freerdp",)),
    # curl -b/--cookie NAME=VALUE (a session's cookie; not a file's name).
    ("cookie", r"(curl" + token_start(4) + r"(?:[ \t]{1,4}[^\s;|&]{1,256}){0,16}?[ \t]{1,4}"
     r"(?:-b|--cookie)(?:[ \t]{1,4}|=)"
     r"(?P<q>\\{0,7}[\"'])?)(?=[^\s;|&\"'=]{1,256}=)" + _VALUE, ("curl",)),
    # net use [Z:] \\host\share PASSWORD [/user:NAME], or /user:NAME PASSWORD (Windows; a
    # * asks for it).
    ("password", r"(net[ \t]{1,4}use" + token_start(7) + r"(?:[ \t]{1,4}(?:[A-Za-z]:|\*))?"
     r"[ \t]{1,4}\\\\[^\s;|&]{1,256}(?:[ \t]{1,4}/(?i:user):[^\s;|&]{1,256})?[ \t]{1,4}"
     r"(?P<q>\\{0,7}[\"'])?)(?![/*])" + _VALUE, ("net",)),
    # net user [/add] NAME PASSWORD [/add], in any case (not /active:no, nor * that asks for
    # it).
    ("password", r"((?:net|NET|Net)[ \t]{1,4}(?i:user)" + token_start(8) + r"(?:[ \t]{1,4}"
     r"/\w{1,20}){0,2}[ \t]{1,4}(?:\\{0,7}\"[^\"\r\n\\]{1,64}\\{0,7}\""
     r"|[^\s;|&/*\"'\\<>]{1,64})" + _SPACE + r"(?P<q>\\{0,7}[\"'])?)(?![/*])" + _NO_WORD
     + _VALUE, ("net", "NET", "Net")),
    # openssl passwd [-1|-6|-salt S] PASSWORD (the hash it prints names none).
    ("password", r"(openssl[ \t]{1,4}passwd" + token_start(14) + r"(?:[ \t]{1,4}-(?:(?:salt|in)"
     r"[ \t]{1,4}(?:\$\([^()\r\n]{1,128}\)|[^\s;|&]{1,64})|(?!salt|in(?![\w-]))[\w-]{1,12}))"
     r"{0,4}" + _SPACE + r"(?P<q>\\{0,7}[\"'])?)(?![-\[])" + _NO_WORD + _VALUE, ("openssl",)),
    # vault operator unseal [flags] KEY (one of the keys vault operator init printed).
    ("secret", r"(vault" + token_start(5) + r"[ \t]{1,4}operator[ \t]{1,4}unseal(?:[ \t]{1,4}"
     r"-{1,2}(?:(?:address|ca-cert|ca-path|client-cert|client-key|namespace|tls-server-name)"
     r"[ \t]{1,4}[^\s;|&]{1,256}|(?!(?:address|ca-cert|ca-path|client-cert|client-key"
     r"|namespace|tls-server-name)[ \t])[\w-]{1,30}(?:=[^\s;|&]{1,256})?)){0,4}" + _SPACE
     + r"(?P<q>\\{0,7}[\"'])?)(?!-)" + _NO_WORD + _VALUE, ("vault",)),
    # wpa_passphrase SSID PASSPHRASE.
    ("password", r"(wpa_passphrase" + token_start(14) + r"[ \t]{1,4}(?:\\{0,7}\""
     r"[^\"\r\n\\]{1,64}\\{0,7}\"|'[^'\r\n]{1,64}'|[^\s;|&\"']{1,64})[ \t]{1,4}"
     r"(?P<q>\\{0,7}[\"'])?)(?!\[)" + _NO_WORD + _VALUE, ("wpa_passphrase",)),
    # az keyvault secret set … --value VALUE, and an Azure database server's admin password,
    # az sql|postgres|mysql [flexible-]server create|update … -p VALUE.
    ("secret", r"(keyvault[ \t]{1,4}secret[ \t]{1,4}set(?:" + _SPACE + r"[^\s;|&\\]{1,256}){0,10}?"
     + _SPACE + r"--value(?:[ \t]{1,4}|=)(?P<q>\\{0,7}[\"'])?)(?!-|\$|\[REDACTED:)" + _VALUE,
     ("keyvault",)),
    ("password", r"(az[ \t]{1,4}(?:sql|postgres|mysql|mariadb)[ \t]{1,4}(?:flexible-)?server"
     r"[ \t]{1,4}(?:create|update)(?:" + _SPACE + r"[^\s;|&\\]{1,256}){0,16}?" + _SPACE + r"-p"
     r"(?:[ \t]{1,4}|=)(?P<q>\\{0,7}[\"'])?)(?!-|\$|\[REDACTED:)" + _VALUE, ("az ",)),
    # pulumi config set [--secret] NAME VALUE [--secret]: a secret when the command says so.
    ("secret", r"(pulumi[ \t]{1,4}config[ \t]{1,4}set(?=[^\r\n;|&]{0,512}[ \t]--secret"
     r"(?![\w-]))(?:[ \t]{1,4}(?:--(?:secret|path|plaintext)|(?:-s|--stack|-C|--cwd)"
     r"[ \t]{1,4}[^\s;|&]{1,128})){0,4}[ \t]{1,4}[^\s;|&\\-][^\s;|&]{0,255}" + _SPACE
     + r"(?P<q>\\{0,7}[\"'])?)(?!-|\$|\[REDACTED:)" + _VALUE, ("pulumi",)),
    # A package manager's token or password in its config (config [set] NAME VALUE): npm's
    # and pnpm's //registry/:_authToken, yarn's npmAuthToken, composer's
    # github-oauth.github.com, bearer.HOST and http-basic.HOST USER, poetry's pypi-token.pypi.
    ("token", r"(config" + token_start(6) + r"(?:[ \t]{1,4}--?[\w-]{1,20}){0,2}(?:[ \t]{1,4}set)?"
     r"(?:[ \t]{1,4}--?[\w-]{1,20}){0,2}[ \t]{1,4}(?P<nq>[\"'])?(?:(?(nq)[^\r\n]{0,256}?"
     r"|[^\s;|&=\"']{0,256}?)[:_.])?(?:(?i:_?authToken|_auth|_password)|npmAuth(?:Token|Ident)"
     r"|(?:(?P<basic>http-basic\.)|(?!http-basic)" + COMPOSER_AUTH + r"|pypi-token\.)[\w.-]{1,128}"
     r"(?(basic)[ \t]{1,4}[^\s;|&]{1,256}))(?(nq)(?P=nq))" + _SPACE
     + r"(?P<q>\\{0,7}[\"'])?)(?![-$%]|\[REDACTED:)" + _VALUE, ("config",)),
    # jenkins-cli … -auth USER:TOKEN (not @FILE or a path), SonarQube's sonar.login (a
    # token, unless sonar.password follows) and netlify env:set NAME VALUE for a name ending
    # as a secret's.
    ("token", r"((?<=[ \t])-auth[ \t]{1,4}(?P<q>\\{0,7}[\"'])?[^\s:@\"'$/]{1,64}:)"
     r"(?!\$|\[REDACTED:)"
     + _VALUE, ("-auth",)),
    ("token", r"((?<![\w-])-?D?sonar\.login[ \t]{0,4}=[ \t]{0,4}(?P<q>\\{0,7}[\"'])?)"
     r"(?!\$|\[REDACTED:|[^\r\n]{0,512}sonar\.password)" + _VALUE, ("sonar.login",)),
    ("secret", r"(netlify" + token_start(7) + r"(?:-cli)?[ \t]{1,4}env:set[ \t]{1,4}"
     r"[A-Za-z0-9_]{0,60}(?:PASSWORD|PASSWD|SECRET|TOKEN|_KEY|_PASS|_PWD)(?![A-Za-z0-9_])"
     r"[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)(?![$%]|\[REDACTED:)" + _VALUE, ("netlify",)),
    # A password a tool takes after its flag among many words: rdesktop -p, hydra -p,
    # httpie's -a/--auth USER:PASSWORD (a token alone after -A bearer).
    *(("password", "(" + tool + token_start(len(tool)) + rest + r"(?:[ \t]{1,4}[^\s;|&]{1,256})"
       r"{0,8}?[ \t]{1,4}" + flag + r"(?P<q>\\{0,7}[\"'])?(?!\[REDACTED:)" + user
       + r")(?!-|\$|\[REDACTED:)"
       + _VALUE, needles)
      for tool, rest, flag, user, needles in (
          ("rdesktop", "", r"-p[ \t]{1,4}", "", ("rdesktop",)),
          ("hydra", "", r"-p[ \t]{1,4}", "", ("hydra",)),
          ("http", r"s?(?P<b>(?=[^\r\n;|&]{0,512}(?:-A|--auth-type)[ \t=]{1,4}bearer))?",
           r"(?:-a|--auth)(?:[ \t]{1,4}|=)", r"(?(b)|[^\s:\"']{1,256}:)", ("http ", "https ")))),
    # What an expect script sends after a password's prompt: expect "*password:" then send
    # "…\r".
    ("password", r"(expect[ \t]{1,4}(?:-[\w]{1,8}[ \t]{1,4})?\\{0,7}[\"'{][^\"'}\r\n\\]{0,64}"
     r"(?i:passw|passphrase)[^\"'}\r\n\\]{0,64}\\{0,7}[\"'}][ \t]{0,4}\r?\n[ \t]{0,16}send"
     r"[ \t]{1,4}"
     r"(?:--[ \t]{1,4})?(?P<q>\\{0,7}[\"']))(?!\[REDACTED:|\$)(?:(?!\\r(?P=q))(?!(?P=q))"
     r"[^\r\n]){1,256}", ("expect",)),
    # A here-string to what reads a secret from standard input: sudo -S … <<< "…".
    ("password", r"((?:sudo[ \t]{1,4}(?:-[A-Za-z]{1,4}[ \t]{1,4}){0,3}?-[A-Za-z]{0,3}S"
     r"(?![A-Za-z])|chpasswd|--password-stdin|passwd[^\r\n;|&<]{0,128}[ \t]--stdin(?![\w-]))"
     r"[^\r\n;|&<]{0,256}<<<[ \t]{0,4}"
     r"(?P<q>\\{0,7}[\"'])?)(?!\$|\[REDACTED:)" + _VALUE, ("<<<",)),
)
"""Each rule's kind, its expression (group 1 is what comes before the value, kept), and the
literals every match starts with."""


@dataclass(frozen=True)
class _RedisAuth(Rule):
    """Redis's ``AUTH [user] PASSWORD``, taken only at its prompt (``127.0.0.1:6379>``) or
    given to ``redis-cli`` on its line (``echo "AUTH …" | redis-cli``: after it too):
    ``AUTH failed`` and ``AUTH PLAIN`` in another log say nothing of a password."""

    def replace(self, match: re.Match[str]) -> str:
        text, start = match.string, match.start()
        line = max(text.rfind("\n", 0, start) + 1, start - 512)
        end = text.find("\n", start, start + 512)
        if text[line:start].rstrip().endswith(">") \
                or "redis-cli" in text[line:end if end >= 0 else start + 512]:
            return match.group(1) + MARK.format(kind=self.kind)
        return match.group(0)


_PAIR = re.compile(r"((?<![^ \t])(?P<o>[\"'])?[A-Za-z_][A-Za-z0-9_]{0,127}="
                   r"(?(o)|(?P<q>\\{0,7}[\"'])?))"
                   r"(?![\"']?\[REDACTED:|\$)(?(o)" + quoted("o") + "|" + _VALUE + ")")
"""A ``NAME=VALUE`` word (quoted whole, or its value quoted), up to the value."""


@dataclass(frozen=True)
class _EachValue(Rule):
    """A secret store's command setting secrets: ``fly secrets set A=x B=y``. Every value
    of the match (the words of one command) is one; a ``$VARIABLE`` names one kept
    elsewhere."""

    def replace(self, match: re.Match[str]) -> str:
        return match.group(1) + _PAIR.sub(r"\1" + MARK.format(kind=self.kind), match.group(2))


_WORD = r"""(?:[^\s;|&"']{1,512}|(?=[^\s;|&]))(?:"[^"\n]{0,512}"?|'[^'\n]{0,512}'?)?"""
"""A shell word: plain, then maybe quoted (``A="x y"``), or quoted whole."""

COMMAND_RULES: tuple[Rule, ...] = (
    *(Rule(kind, expression, needles, keep_prefix=True) for kind, expression, needles in _RULES),
    # fly secrets set NAME=VALUE NAME=VALUE … (flyctl, supabase, doppler too).
    _EachValue("secret", "(secrets[ \t]set(?:" + "|".join(
        rf"(?<=(?<![A-Za-z0-9_.-]){tool}[ \t]secrets[ \t]set)" for tool in (
            "fly", "flyctl", "supabase", "doppler")) + r"))((?:[ \t]{1,4}" + _WORD + "){1,64})",
        ("secrets set",)),
    _RedisAuth("password", r"((?<![A-Za-z0-9_.-])(?:AUTH|auth)[ \t]{1,4}(?![\"']?\[REDACTED:"
               r"|[^\s;|&\"']{1,256}[ \t]{1,4}[\"']?\[REDACTED:)"
               r"(?:[^\s;|&\"']{1,256}[ \t]{1,4})?(?P<q>\\{0,7}[\"'])?)"
               r"(?!(?:OK|failed|required|PLAIN|LOGIN)\b)" + _VALUE, ("AUTH", "auth")),
)
"""The rules, in the order they are tried."""

COMMAND_ANCHORED: tuple[Rule, ...] = (
    # Oracle's password in any case: create|alter user NAME identified by tiger, a database
    # link's connect to NAME identified by "x" (a bind variable or a substitution is none).
    Rule("password", r"(?i)(\b(?:(?:create|alter)[ \t]{1,4}user|connect[ \t]{1,4}to)[ \t]{1,4}"
         r"[a-z0-9_$#.\"]{1,128}[ \t]{1,4}identified[ \t]{1,4}by[ \t]{1,4}(?P<q>\\{0,7}[\"'])?)"
         r"(?!(?:values|password)[ \t]|[':&$\[])" + _ORACLE_VALUE, ("create", "alter", "connect"),
         keep_prefix=True, anchored=True),
    # Oracle's tools given NAME/PASSWORD[@db]: sqlplus, expdp, impdp, sqlldr, rman target,
    # userid=, and SQL*Plus's CONNECT (at a line's start or its prompt); / (the OS's
    # authentication) and a NAME alone (a prompt) hold none.
    Rule("password", r"(?i)((?:\b(?:sqlplus|expdp|impdp|sqlldr)(?:[ \t]{1,4}-[a-z]{1,12}){0,4}"
         r"[ \t]{1,4}|\brman[ \t]{1,4}target[ \t]{1,4}|\buserid=|(?:(?<![^\n])|(?<=SQL> ))"
         r"conn(?:ect)?[ \t]{1,4})(?:\\{0,7}\"[^\"\r\n/\\]{1,128}\\{0,7}\"|[a-z0-9_$#]{1,128})/"
         r"(?P<q>\\{0,7}\")?)"
         r"(?!\[REDACTED:)" + _ORACLE_VALUE,
         ("sqlplus", "expdp", "impdp", "sqlldr", "rman", "userid=", "conn"),
         keep_prefix=True, anchored=True),
)
"""The case-insensitive rules: each is tried where one of its needles starts."""
