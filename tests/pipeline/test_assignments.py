"""Assignments that name a secret, in the spellings of code and config agents read and
write: a typed name's default, a subscript, a call's arguments, a YAML block; and code
that only names a secret, which stays as it is."""

from __future__ import annotations

import re

import pytest

from otel_diary.pipeline.redact import redact

S = "Zq9xK7mW2pL4vN8r"


@pytest.mark.parametrize(("text", "redacted"), [
    # a typed name's default (pydantic settings, dataclasses, TypeScript), and a chain
    (f'database_password: str = "{S}"', 'database_password: str = "[REDACTED:password]"'),
    (f"api_key: Optional[str] = '{S}'", "api_key: Optional[str] = '[REDACTED:api_key]'"),
    (f'const apiKey: string = "{S}";', 'const apiKey: string = "[REDACTED:api_key]";'),
    (f'token = self._token = "{S}"', 'token = self._token = "[REDACTED:token]"'),
    # a subscript given a literal
    (f'os.environ["DB_PASSWORD"] = "{S}"', 'os.environ["DB_PASSWORD"] = "[REDACTED:password]"'),
    (f"app.config['SECRET_KEY'] = '{S}'", "app.config['SECRET_KEY'] = '[REDACTED:secret]'"),
    # a call given the secret's name, then the secret
    (f"define( 'DB_PASSWORD', '{S}' );", "define( 'DB_PASSWORD', '[REDACTED:password]' );"),
    (f"monkeypatch.setenv('API_TOKEN','{S}')",
     "monkeypatch.setenv('API_TOKEN','[REDACTED:token]')"),
    (f'os.Setenv("DB_PASSWORD", "{S}")', 'os.Setenv("DB_PASSWORD", "[REDACTED:password]")'),
    (f'System.setProperty("db.password","{S}")',
     'System.setProperty("db.password","[REDACTED:password]")'),
    (f'req.Header.Set("X-API-Key", "{S}")', 'req.Header.Set("X-API-Key", "[REDACTED:api_key]")'),
    (f"localStorage.setItem('token', '{S}')", "localStorage.setItem('token', '[REDACTED:token]')"),
    (f'{{\\"cmd\\": \\"setenv(\\\\\\"API_TOKEN\\\\\\", \\\\\\"{S}\\\\\\")\\"}}',
     '{\\"cmd\\": \\"setenv(\\\\\\"API_TOKEN\\\\\\", \\\\\\"[REDACTED:token]\\\\\\")\\"}'),
    # a YAML block scalar
    (f"password: |\n  {S}\n", "password: |\n  [REDACTED:password]\n"),
    (f"db:\n  password: >-\n    {S}\n", "db:\n  password: >-\n    [REDACTED:password]\n"),
    # a value on the next line that starts as a word of code does
    ("password:\n  pass-Word-2024", "password:\n  [REDACTED:password]"),
    ("api_key:\n  this-is-my-key-8842", "api_key:\n  [REDACTED:api_key]"),
    ("password: |\n  self-Sign3d", "password: |\n  [REDACTED:password]"),
    # a name in camel case ending as a secret's (Key, Pass after the word of one; Pwd)
    (f'const signingKey = "{S}";', 'const signingKey = "[REDACTED:api_key]";'),
    (f'"JwtKey": "{S}",', '"JwtKey": "[REDACTED:api_key]",'),
    (f"serviceRoleKey: '{S}'", "serviceRoleKey: '[REDACTED:api_key]'"),
    (f"PresharedKey = {S}", "PresharedKey = [REDACTED:api_key]"),
    (f'dbPass = "{S}"', 'dbPass = "[REDACTED:password]"'),
    (f"SMTP_USER=bob smtpPass={S}", "SMTP_USER=bob smtpPass=[REDACTED:password]"),
    (f'$userPwd = "{S}";', '$userPwd = "[REDACTED:password]";'),
    (f"Jwt__Key={S}", "Jwt__Key=[REDACTED:api_key]"),
    # WordPress's keys and salts, aligned; a user's password after the user
    (f"define( 'AUTH_KEY',         '{S}' );",
     "define( 'AUTH_KEY',         '[REDACTED:api_key]' );"),
    (f"define('NONCE_SALT', '{S}');", "define('NONCE_SALT', '[REDACTED:secret]');"),
    (f"user=admin pass={S}", "user=admin pass=[REDACTED:password]"),
    (f"auth:\n  user: admin\n  pass: {S}", "auth:\n  user: admin\n  pass: [REDACTED:password]"),
    # pw ending a name
    (f'root_pw = "{S}"', 'root_pw = "[REDACTED:password]"'),
    (f"DB_PW={S}", "DB_PW=[REDACTED:password]"), (f"rootPw: {S}", "rootPw: [REDACTED:password]"),
    # aligned output (Consul, Heroku), Azure's userPWD
    ("SecretID:         868b0220-48c1-45f7-72d0-1e2d5cf093ce",
     "SecretID:         [REDACTED:secret]"),
    (f"Token:       {S}Xk7pL2", "Token:       [REDACTED:token]"),
    (f'"userPWD": "{S}", userPWD="{S}"',
     '"userPWD": "[REDACTED:password]", userPWD="[REDACTED:password]"'),
    # a call's argument that may be the secret, not a variable's name
    ("connect(password=A0000)", "connect(password=[REDACTED:password]"),
    ("password=Aaaa()0 next", "password=[REDACTED:password] next"),
    # a call given a literal that may be the secret
    (f"password = decrypt('{S}')", "password = [REDACTED:password]"),
    (f"password = base64.b64decode('{S}')", "password = [REDACTED:password]"),
    # Go's []byte("…"), as an HMAC or JWT key is given
    (f'var jwtKey = []byte("{S}")', "var jwtKey = [REDACTED:api_key]"),
    (f'hmac_key := []byte("{S}")', "hmac_key := [REDACTED:api_key]"),
    # a flag naming a certificate's key (kubeadm's), a name that only ends in ARN's letters
    (f"kubeadm join --control-plane --certificate-key {S}",
     "kubeadm join --control-plane --certificate-key [REDACTED:api_key]"),
    (f"SECRET_BARN={S}", "SECRET_BARN=[REDACTED:secret]"),
    # a flag after another tool's config set, a token that starts as composer's names do
    (f"gcloud config set --api-key {S}", "gcloud config set --api-key [REDACTED:api_key]"),
    (f"./tool --token bearer.{S}", "./tool --token [REDACTED:token]"),
    # a Wi-Fi network's pre-shared key (wpa_supplicant, hostapd)
    (f'network={{\n    ssid="Office"\n    psk="{S}"\n    key_mgmt=WPA-PSK\n}}\nwpa_psk={S}',
     'network={\n    ssid="Office"\n    psk="[REDACTED:password]"\n    key_mgmt=WPA-PSK\n}\n'
     "wpa_psk=[REDACTED:password]"),
    # aligned as terraform fmt aligns a block's arguments
    (f'  password          = "{S}"\n  API_KEY     = "{S}"',
     '  password          = "[REDACTED:password]"\n  API_KEY     = "[REDACTED:api_key]"'),
])
def test_a_secret_assigned_in_code_or_config_is_redacted(text: str, redacted: str) -> None:
    """The value is redacted wherever the name that says it is a secret puts it, and
    redacting again changes nothing."""
    assert redact(text) == redacted
    assert redact(redacted) == redacted


@pytest.mark.parametrize("text", [
    # a block a secret's name opens, in Python
    "if not api_key:\n        raise ValueError('set OPENAI_API_KEY')",
    "except InvalidToken:\n    return None",
    # names in a list or a tuple, not a call's arguments
    'required = ["password", "email"]', '{"required": ["api_key", "model"]}',
    '    MovedAttribute("HTTPPasswordMgr", "urllib2", "urllib.request"),',
    # code: a subscript given an expression, a typed name given code or nothing
    'credentials["token"] = token', "var_mapping['secret_key'] = mapping.get('x')",
    "statements_pass: list[ast.stmt] = [hook_impl_test]",
    'api_key: str = Field(..., env="API_KEY")', 'token: str = ""',
    'os.environ["API_KEY"] = os.getenv("OTHER_KEY")',
    # a call reading a secret, with no default or an empty one; words, not a secret
    'os.getenv("API_KEY")', 'os.getenv("API_KEY", "")', 'print("password", "is wrong")',
    # a typed name whose default names a secret kept elsewhere
    'token: str = "$TOKEN"', 'password: str = "<your-password>"',
    # a name in camel case ending in Key or Pass that is no secret's, and all capitals
    'const dataKey = "pv";', '<Line type="monotone" dataKey="uv" />',
    "const storageKey = 'app-theme';", "renderPass = encoder.beginRenderPass(desc)",
    "'MODULE_SPWD_STATE': 'yes',", '{"Key": "Environment", "Value": "prod"}',
    # the name again, or an attribute naming a secret: code
    "self.api_key = api_key", "client = OpenAI(api_key=api_key)", "token=token,",
    "this.signingKey = signingKey;", 'const sessionKey = "user-session";',
    # code computing the secret from names, or a variable given as an argument
    "token = next(tokens)", "secret = secrets.token_hex(32)", "token = str(uuid.uuid4())",
    "password = input('Enter password: ')", "hashed_password = bcrypt.hashpw(pw.encode(), salt)",
    'token = jwt.decode(token, SECRET_KEY, algorithms=["HS256"])',
    "const password = document.getElementById('password').value;",
    "x = model(input_ids, past_key_values=pkv)", "access_key = creds['AccessKeyId']",
    'password = password.encode("utf-8")', 'raw_key = generate_private_key("Ed25519")',
    "tokenizer.pad_token = tokenizer.eos_token", "db.password = settings.db_password",
    # a salt code makes; pass alone with no user's name before it
    "salt = bcrypt.gensalt()", "pass: 12 user=x", "user=bob pass: 12 fail: 0",
    "user: a\nx: 1\npass: 12", "user: bob pass=true",
    # pw as a word inside a name; a duration given to the call that makes a token
    "expecter.async_pw_transport = pw, transport", "showPw = true",
    "gpu_pw: 250", "TX_PW=20dBm", "servo_pw = 1500", "is_pw = 1",
    # aligned names before a name, a path or an id (not a generated value)
    "PasswordPolicy:     StrongPasswordPolicyV2", "PasswordPolicy:     default-policy-2024",
    "secret_version:      projects/my-proj/secrets/db/versions/3",
    "secret_id:          01HXYZABCDEF1234567890",
    "const token = jwt.sign(payload, process.env.JWT_SECRET, { expiresIn: '1h' })",
    # an ARN names a secret kept elsewhere; a placeholder; a flag taking no value
    "DB_CREDS_SECRET_ARN=arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
    "self.output_model_kms_key_arn = f'arn:{partition}:kms:{region}:{account}:key/{name}'",
    "HMAC_KEY=<32-byte hex>", "pulumi config set --secret dbPassword",
    "composer config --auth github-oauth.github.com",
    # a template's value through its filters; a shell variable that must be set
    "password: {{ .Values.auth.password | b64enc }}",
    "MYSQL_ROOT_PASSWORD: ${MYSQL_ROOT_PASSWORD:?set it in .env}",
    "  password          = var.db_password",
    # PSK inside a longer name
    "UNKNOWN_PSK_IDENTITY = 115", '"Cryptography_HAS_PSK_TLSv1_3": cryptography_has_psk_tlsv13,',
])
def test_code_that_only_names_a_secret_stays(text: str) -> None:
    assert redact(text) == text


def test_a_text_whose_lower_case_is_longer_is_read_the_same() -> None:
    """A character whose lower case is longer (``İ``) sends the text down the slower path,
    which takes a call's value and leaves a list's items as the fast one does."""
    text = f'İ setenv("API_TOKEN", "{S}") required = ["password", "email"]'
    assert redact(text) == \
        'İ setenv("API_TOKEN", "[REDACTED:token]") required = ["password", "email"]'


@pytest.mark.parametrize("text", [
    f"password=password{S[:4]}", f"API_KEY=api_key_{S[:6]}", f"token = my_token_{S[:4]}",
    "SECRET_KEY=my_secret_key", "db_password = hunter2.example",
    # the name's last word alone, or a dotted value no code would name so
    "POSTGRES_PASSWORD: password", "JWT_SECRET=secret", "RABBITMQ_DEFAULT_PASS=pass",
    "password=Hunter2.pass", "TOKEN=my.real.pwd", "token: abc.def.token", "password=password",
])
def test_a_value_that_only_resembles_its_name_is_redacted(text: str) -> None:
    """Only the name itself, or an attribute, is code: a value holding more than the
    name (``password123``, ``my_secret_key``) is a secret."""
    head = re.match(r"[^=:]*(?:=|:) ?", text)
    assert head is not None
    assert re.fullmatch(re.escape(head.group(0)) + r"\[REDACTED:\w+\]", redact(text))
