"""Secrets told in words: a prompt, a reply, a server's banner, a command's output."""

from __future__ import annotations

import subprocess
import sys

import pytest

from otel_diary.pipeline.redact import redact


@pytest.mark.parametrize(("text", "expected"), [
    # whose password it is, between its name and the verb; quoted or in backticks
    ("The password for the admin account is Hunter2Rocks!",
     "The password for the admin account is [REDACTED:password]"),
    ("the database password is `pg-Xk7pL2mQ9`, keep it",
     "the database password is `[REDACTED:password]`, keep it"),
    ("Password of root@db1: 'S3cret;pw9'", "Password of root@db1: '[REDACTED:password]'"),
    ("the password has been reset to Zq7xW2mK9 for bob",
     "the password has been reset to [REDACTED:password] for bob"),
    # what servers print when they generate one (MySQL, Elasticsearch)
    ("2026-01-01T00:00:00Z 6 [Note] [MY-010454] [Server] A temporary password is generated "
     "for root@localhost: eK7#pA2;qw1L",
     "2026-01-01T00:00:00Z 6 [Note] [MY-010454] [Server] A temporary password is generated "
     "for root@localhost: [REDACTED:password]"),
    ("The generated password for the elastic built-in superuser is : Xk7pL2mQ9rTzA1b",
     "The generated password for the elastic built-in superuser is : [REDACTED:password]"),
    ("Password for the [elastic] user successfully reset.\nNew value: Xk7pL2mQ9rTz-A1b",
     "Password for the [elastic] user successfully reset.\nNew value: [REDACTED:password]"),
    ("\u2139\ufe0f  Password for the elastic user (reset with `bin/elasticsearch-reset-password -u "
     "elastic`):\n  aB3dE_fGh1IjKlM=nOp\n",
     "\u2139\ufe0f  Password for the elastic user (reset with `bin/elasticsearch-reset-password -u "
     "elastic`):\n  [REDACTED:password]\n"),
    # a key or a token in words
    ("Use API key 9f8e7d6c5b4a39281706f5e4d3c2b1a0 for the weather service",
     "Use API key [REDACTED:api_key] for the weather service"),
    ("the access token for the bot is `Zq7xW2mK9pL4vN8rT3yB`",
     "the access token for the bot is `[REDACTED:api_key]`"),
    ("Secret key: Zq7xW2mK9pL4vN8rT3yB6cH1", "Secret key: [REDACTED:api_key]"),
    # a user's credentials
    ("Credentials: admin:S3cretPass9", "Credentials: admin:[REDACTED:password]"),
    ('credentials = "deploy:Zq7x-W2mK9"', 'credentials = "deploy:[REDACTED:password]"'),
    ("Credentials: **admin:S3cret!**", "Credentials: **admin:[REDACTED:password]**"),
    # spacing, signs, verbs, the next line, whose it is
    ("token  is 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "token  is [REDACTED:api_key]"),
    ("API Key = 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "API Key = [REDACTED:api_key]"),
    ("API key=AbCdEf0123456789XyZq", "API key=[REDACTED:api_key]"),
    ("access token was set to Zq7xW2mK9pL4vN8rT3yB", "access token was set to [REDACTED:api_key]"),
    ("the password has been updated to Hunter2xyz",
     "the password has been updated to [REDACTED:password]"),
    ("The password for the admin account is\nHunter2xyz",
     "The password for the admin account is\n[REDACTED:password]"),
    ("The password to the staging database is Bq@zuM14qHOXHl",
     "The password to the staging database is [REDACTED:password]"),
    ("Password for the VPN portal \u2192 Hunter2xyz",
     "Password for the VPN portal \u2192 [REDACTED:password]"),
    ("password - Hunter2xyz; my pw is Hunter2xyz",
     "password - [REDACTED:password]; my pw is [REDACTED:password]"),
    # a secret, a token or a key alone before a verb, or after a word naming its kind
    ("ok the secret is Kdcj23vMcWYKtP4eILSs2AqN, put it in vault",
     "ok the secret is [REDACTED:api_key], put it in vault"),
    ("client secret Kdcj23vMcWYKtP4eILSs2AqN; refresh token Zq7xW2mK9pL4vN8rT3yB",
     "client secret [REDACTED:api_key]; refresh token [REDACTED:api_key]"),
    # a label in Markdown's or HTML's emphasis, the value in backticks
    ("- **Password:** `mu0nLQIEB#0bW#e`\n**API key:** `FkCSwOiYnYbuEvS2GZedNarW6ZljW97f`",
     "- **Password:** `[REDACTED:password]`\n**API key:** `[REDACTED:api_key]`"),
    ("**Password**: ui%6*MYzgotI\n*Token:* wjmEPLLFCcxIz49wZSabXx234hJZmN8f",
     "**Password**: [REDACTED:password]\n*Token:* [REDACTED:token]"),
    ("<b>Password:</b> OIHVM%vbH*0y9*#\n**Secret key:** l8BqXrosEWkuNh6DKREUbdLCUZ0FWS4McJAT1nqV",
     "<b>Password:</b> [REDACTED:password]\n**Secret key:** [REDACTED:api_key]"),
    # a banner: Jenkins' (after an empty line), aws configure's prompt
    ("Please use the following password to proceed to installation:\n\n"
     "91787effb2121c506bac842f5fa229d4\n",
     "Please use the following password to proceed to installation:\n\n[REDACTED:password]\n"),
    ("AWS Secret Access Key [None]: O0aYLBtulZy7poR1DB4dtMhIoS3FXafMXj8hAZst\n",
     "AWS Secret Access Key [None]: [REDACTED:secret]\n"),
    # a key longer than a password is taken whole
    ("the api key is " + "Zq7xW2mK9pL4" * 20, "the api key is [REDACTED:api_key]"),
])
def test_a_secret_told_in_words_is_redacted(text: str, expected: str) -> None:
    """Users paste credentials into prompts and agents repeat them; servers print the
    passwords they generate: the value goes, the words around it stay."""
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    "The password for the admin account is incorrect",
    "the password is required; password reset for user42; the password field was empty",
    "password for user42 is stored in vault as db-pass-2024",
    "The API key for this project is stored in the .env file",
    "the API key is invalid: 401 Unauthorized",
    "Set the API key in OPENAI_API_KEY before running",
    "token for run 42 is expired",
    "Token usage for claude-3-5-sonnet-20241022 was 12345",
    "the access token is valid for 3600 seconds; max token length is 4096",
    "the session token for user_1234 is expired",
    "Credentials: aws:default",
    "credentials: https://example.com/creds and Credentials: none",
    "api-key-rotation-2024 done",
    "Tokens: 5132; the orders API; the build passed on attempt 3",
    # a path, a variable, a placeholder, a model's name, a name in code
    "The API key is /run/secrets/openai_api_key_v2; API key: ~/.config/openai/key2.txt",
    "The access token is settings.GITHUB_TOKEN_V2",
    "The API key is OPENAI_API_KEY_2024 (env var)",
    "The token for the model is gpt-4o-mini-2024-07-18; the token is max_tokens_2048_limit",
    "The password for admin is $ADMIN_PASSWORD2; the password is ../secrets/admin2.txt",
    "the key is in the drawer; the key for row 7 is order_2024_07",
    # references after credentials:
    "credentials: arn:aws:iam::123456789012:role/deploy",
    "credentials: file:~/.aws/credentials; credentials: $USER:$PASS",
    "credentials: type:service_account; credentials: db:5432",
    "password: `required`; `password`: `string`",
    # backticks holding a template, a command or words; a note before the next line
    "The config has `password: ` followed by `token: `.",
    "password: `${process.env.DB_PASSWORD}`, token: `Bearer ${token}`",
    "const url = `${base}/token`;\nconst password = `${a}-${b}`;",
    "password=`cat /run/secrets/pw`; token=`gh auth token`",
    "query: `SELECT password FROM users`,\npassword: `SELECT 1`",
    "Password for the admin user (see README):\nsee-the-readme",
])
def test_words_about_a_secret_stay(text: str) -> None:
    """A verdict, a count, a place or a name after a secret's name holds no secret: the
    value must hold a letter and a digit (and be long, for a key)."""
    assert redact(text) == text


@pytest.mark.parametrize(("text", "expected"), [
    ("$ cat /var/jenkins_home/secrets/initialAdminPassword\n3f4e2a9b8c7d6e5f4a3b2c1d0e9f8a7b\n$",
     "$ cat /var/jenkins_home/secrets/initialAdminPassword\n[REDACTED:secret]\n$"),
    ("$ echo $DB_PASSWORD\nS3cretPass9", "$ echo $DB_PASSWORD\n[REDACTED:secret]"),
    ("$ kubectl get secret db -o jsonpath='{.data.password}' | base64 -d\nS3cretPass9",
     "$ kubectl get secret db -o jsonpath='{.data.password}' | base64 -d\n[REDACTED:secret]"),
    ("PS C:\\> Get-Content C:\\secrets\\api_key.txt\r\nXk7pL2mQ9rTzA1b\r\n",
     "PS C:\\> Get-Content C:\\secrets\\api_key.txt\r\n[REDACTED:secret]\r\n"),
    ("$ cat /var/jenkins_home/secrets/initialAdminPassword; echo\n3f4e2a9b8c7d6e5f4a3b2c1d0e9f8a7b",
     "$ cat /var/jenkins_home/secrets/initialAdminPassword; echo\n[REDACTED:secret]"),
    ("$ docker exec jenkins cat /var/jenkins_home/secrets/initialAdminPassword\n91787effb21\n",
     "$ docker exec jenkins cat /var/jenkins_home/secrets/initialAdminPassword\n"
     "[REDACTED:secret]\n"),
    ("$ cat privatekey\nnPsbUzU3BiczWgRam+EJoOtZcMVlEApe2ZB608IzduA=\n$ wg genkey\n"
     "FN/Y3/wy6nEw+0aCKbK3W2T1CMWrvR3dYEoxsFYLDY8=",
     "$ cat privatekey\n[REDACTED:secret]\n$ wg genkey\n[REDACTED:secret]"),
    ("$ aws secretsmanager get-secret-value --secret-id prod/api --query SecretString --output "
     "text\nvXyQqxZ9KCsuvdMBkIgmMz6qfNnVnGM6",
     "$ aws secretsmanager get-secret-value --secret-id prod/api --query SecretString --output "
     "text\n[REDACTED:secret]"),
    ("$ php artisan key:generate --show\nbase64:X6m6rX4Jkb1iPWeAyZZEnKoVHft2pZbziSF7ELykx/0=",
     "$ php artisan key:generate --show\n[REDACTED:secret]"),
    # a secret store's read, a command printing a secret it made
    ("$ vault kv get -field=password secret/prod/db\nLhidAeHVwjSl%i5",
     "$ vault kv get -field=password secret/prod/db\n[REDACTED:secret]"),
    ("user@host:~$ aws ecr get-login-password --region us-east-1\neyJwYXlsb2FkIjoiWGs3cEwy",
     "user@host:~$ aws ecr get-login-password --region us-east-1\n[REDACTED:secret]"),
    ("$ kubectl -n argocd get secret argocd-initial-admin-secret -o jsonpath="
     "\"{.data.password}\" | base64 -d\nAbC1dEf2GhI3",
     "$ kubectl -n argocd get secret argocd-initial-admin-secret -o jsonpath="
     "\"{.data.password}\" | base64 -d\n[REDACTED:secret]"),
    ("$ docker swarm join-token -q worker\nSWMTKN1x3pu6hszjas19xyp7ghgosyx9k8",
     "$ docker swarm join-token -q worker\n[REDACTED:secret]"),
    # not a command that prints the secret's file, a line of words, or several words
    ("echo \"set the key\"\nbuild42done", None),
    ("$ cat README.md\nThe token is used for auth", None),
    ("$ cat token.md\nRotate it in 2024 please", None),
    ("$ vim secrets/password.txt\nS3cretPass9", None),
    # words in prose; a needle inside a word or before another (a URL's, a version's)
    ("We need more tokens\nGPT4oMini", None),
    ("$ cat monkey.txt\nbanana42x", None),
    ('$ cat tokenizer_config.json\n{"add_bos_token":true,"model_max_length":2048}', None),
    ("$ echo $TOKEN_URL\nhttps://auth.example.com/oauth2/token", None),
    ("$ echo $KEYCLOAK_VERSION\n24.0.1-ubuntu", None),
    ("$ echo $PASSWORD_MIN_LENGTH\n12characters", None),
    # a transcript's command, a warning or a label before the output
    ("Ran `security find-generic-password -s github -w`\n\nOutput:\nMaple2023!w\n",
     "Ran `security find-generic-password -s github -w`\n\nOutput:\n[REDACTED:secret]\n"),
    ("$ heroku auth:token\n \u203a   Warning: token will expire 01/01/2027\n"
     "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
     "$ heroku auth:token\n \u203a   Warning: token will expire 01/01/2027\n[REDACTED:secret]"),
    ("$ terraform output -raw admin_password\npOoNZ8836!k3b_ublL+*\n",
     "$ terraform output -raw admin_password\n[REDACTED:secret]\n"),
    # a command making a secret, or reading one from a store named otherwise
    ("$ openssl rand -base64 32\nq8Zk3Lm9Xp2Rt7Vw4Yb6Nc1Ds5Fg0Hj8Kl3Mn6Pq9St=",
     "$ openssl rand -base64 32\n[REDACTED:secret]"),
    ("Command: openssl rand -hex 16\nExit code: 0\nStdout:\ndf9ebbc3947e50d680d71d04d2e32bbe\n",
     "Command: openssl rand -hex 16\nExit code: 0\nStdout:\n[REDACTED:secret]\n"),
    ("$ pwgen -s 16 3\n0UOXfZFLmur2prke\ni3bzWsjjw3pST1Cv\nk8XbzWsjjw3pST1C\n$",
     "$ pwgen -s 16 3\n[REDACTED:secret]\n$"),
    ("$ head -c 32 /dev/urandom | base64\n```\nq8Zk3Lm9Xp2Rt7Vw4Yb6Nc1Ds5Fg0Hj8Kl3Mn6Pq9St=\n```",
     "$ head -c 32 /dev/urandom | base64\n```\n[REDACTED:secret]\n```"),
    ('python3 -c "import secrets; print(secrets.token_urlsafe(32))"\nq8Zk3Lm9Xp2Rt7Vw4Yb6',
     'python3 -c "import secrets; print(secrets.token_urlsafe(32))"\n[REDACTED:secret]'),
    ("node -e \"console.log(require('crypto').randomBytes(32).toString('hex'))\"\n3f1e0c9b8a7d6e",
     "node -e \"console.log(require('crypto').randomBytes(32).toString('hex'))\"\n"
     "[REDACTED:secret]"),
    ("In [27]: !mix phx.gen.secret\nZHEHWkP+9W+fGe2GbBywatX14KvNd6CA\n$ bw generate -ulns\n"
     "TOZ!%z9ytbHXgNt",
     "In [27]: !mix phx.gen.secret\n[REDACTED:secret]\n$ bw generate -ulns\n[REDACTED:secret]"),
    ("$ pass show github\nhT9v!Q2kLm8\nusername: me\n$ secret-tool lookup service vpn\nJmFN3w0dZ",
     "$ pass show github\n[REDACTED:secret]\nusername: me\n$ secret-tool lookup service vpn\n"
     "[REDACTED:secret]"),
    # no lone word after it, or a setting, words, code, a file, a name
    ("# generate it with openssl rand -hex 32\nSECRET_KEY=${SECRET_KEY}", None),
    ('seed = secrets.token_hex(16)\n\n@app.route("/v1/health")', None),
    ("KEY=$(openssl rand -hex 32)\n./bootstrap-v2.sh\nopen('/dev/urandom')\nclose_fd2();", None),
    ("bypass show stoppers\nv1.2.3abcd", None),
    ("$ terraform output -raw kms_key_arn\narn:aws:kms:us-east-1:123456789012:key/abc-123", None),
    ("$ terraform output -raw ssh_key_name\nprod-deploy-key-2024", None),
    ("$ openssl rand -hex 32 > key.txt\nwrote 65 bytes to the file", None),
    ("seed = secrets.token_hex(16)\nreturn seed", None),
    ("pass show me the way\nthe road", None),
])
def test_a_secret_a_command_printed_is_redacted(text: str, expected: str | None) -> None:
    """``cat`` of a file named as a secret's, ``echo`` of such a variable: the lone word on
    the next line is the secret."""
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize(("text", "expected"), [
    ("====== Data ======\nKey         Value\n---         -----\npassword            S3cretPass9\n"
     "username    admin",
     "====== Data ======\nKey         Value\n---         -----\npassword            "
     "[REDACTED:secret]\nusername    admin"),
    ("KEY              VALUE\naws:region       us-west-2\ndbPassword       S3cretPass9",
     "KEY              VALUE\naws:region       us-west-2\ndbPassword       [REDACTED:secret]"),
    ("│ DB_PASSWORD │ S3cretPass9 │\n| API_TOKEN | Zq7xW2mK9pL4 |",
     "│ DB_PASSWORD │ [REDACTED:secret] │\n| API_TOKEN | [REDACTED:secret] |"),
    # a row of a table with more columns, a version, a verdict, a count, a date
    ("| api_key | str | Your API key |\nkeycloak-token  2.1.0b1\nsecret_scanner   v1.2.3", None),
    ("test_password_reset      PASSED\ntoken_count      123456\napi_key_rotation   2024-01-01",
     None),
    ("NAME         TYPE     DATA   AGE\ndb-password  Opaque   1      5d12h", None),
    ("local     secret_data9x1\nmy tokens   Zq7xW2mK9pL4", None),
])
def test_a_secret_in_a_tables_row_is_redacted(text: str, expected: str | None) -> None:
    """``vault kv get``, ``pulumi config --show-secrets`` and ``doppler secrets`` print a
    table: a row whose first cell names a secret and whose last holds a word of letters
    and digits gives the secret."""
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize(("text", "expected"), [
    ("BASIC_AUTH=admin:Winter2024x\n      - NEO4J_AUTH=neo4j/S3cret-pw",
     "BASIC_AUTH=admin:[REDACTED:password]\n      - NEO4J_AUTH=neo4j/[REDACTED:password]"),
    ("MAIL_CREDENTIALS: postmaster@mg.example.org:Shdz2ZA0T6uq\nDB_CREDS=user:Winter2024x",
     "MAIL_CREDENTIALS: postmaster@mg.example.org:[REDACTED:password]\n"
     "DB_CREDS=user:[REDACTED:password]"),
    ("basicAuth: admin:Winter2024x", "basicAuth: admin:[REDACTED:password]"),
    ('MNEMONIC="abandon ability able about above absent absorb abstract absurd abuse access '
     'accident"', 'MNEMONIC="[REDACTED:secret]"'),
    ("Your recovery phrase is:\nabandon ability able about above absent absorb abstract absurd "
     "abuse access accident", "Your recovery phrase is:\n[REDACTED:secret]"),
    ("I set the password to R@Si+pX9qKjm5; log in as `admin` with password `kettle-zephyr-8304`",
     "I set the password to [REDACTED:password]; log in as `admin` with password "
     "`[REDACTED:password]`"),
    ("the model is gpt-4o-mini-2024-07-18; the password to use is in the vault; the password to "
     "10 chars", None),
    ("Save this seed phrase and your BIP39 passphrase to recover your new keypair:\nabandon "
     "ability able about above absent absorb abstract absurd abuse access accident",
     "Save this seed phrase and your BIP39 passphrase to recover your new keypair:\n"
     "[REDACTED:secret]"),
    ("Phrase:\nabandon ability able about above absent\nabsorb abstract absurd abuse access "
     "accident\n", "Phrase:\n[REDACTED:secret]\n"),
    ("Unseal Key 1: 3Kx9Lm2Pq7Rt5Vw8Yz1Ab4Cd6Ef0Gh2Ij4Kl6Mn8Op0\n\nInitial Root Token: "
     "s.kmO9n3TPkEyIMShKiBPNXn3o",
     "Unseal Key 1: [REDACTED:secret]\n\nInitial Root Token: [REDACTED:token]"),
    # a path, a URL, a profile, a variable, a name that only ends in AUTH's letters
    ("GOOGLE_APPLICATION_CREDENTIALS=/app/key.json\nAWS_CREDENTIALS=default:profile", None),
    ("OAUTH=abc:def123\nNEXT_AUTH=https://x.com:443/abc\nauthor: bob:2024", None),
    ("DEPLOY_AUTH=user:$PASS\nNEO4J_AUTH=none\ninsn.mnemonic = 'mov'", None),
    ("lastAuth: 2024-01-01T10:00:00Z\nLAST_AUTH=2024-01-01T10:00:00Z", None),
    ("set GOOGLE_APPLICATION_CREDENTIALS=C:\\keys\\sa-2024.json", None),
    ("GOOGLE_APPLICATION_CREDENTIALS=secrets/gcp-sa-2024.json", None),
    ("KAFKA_AUTH=SASL_SSL:SCRAM-SHA-512\nGIT_AUTH=ssh:git@github.com", None),
    ("the seed phrase has twelve words\nthe root token expired", None),
])
def test_a_secret_under_a_name_or_a_banner_is_redacted(text: str, expected: str | None) -> None:
    """A user's credentials under a name ending as theirs (``BASIC_AUTH``, ``NEO4J_AUTH``,
    ``*_CREDENTIALS``), a wallet's recovery phrase, vault's unseal keys and root token."""
    assert redact(text) == (text if expected is None else expected)


def test_a_title_naming_an_api_compiles_no_rule_of_words() -> None:
    """A reader redacts titles ("the orders API", "credentials rotated"): the rules of
    secrets in words are compiled only where a key's name is followed as one is."""
    script = (
        "import otel_diary.pipeline.prose as p, otel_diary.pipeline.redact as r\n"
        "text = 'Rotate credentials for the orders API; access granted; private repo'\n"
        "assert r.redact(text) == text\n"
        "print(sum('pattern' in rule.__dict__ for rule in p.PROSE_ANCHORED))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert int(done.stdout) == 0
