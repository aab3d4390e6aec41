"""Secrets a document's structure says are secrets: the value goes, the names stay."""

from __future__ import annotations

import json

import pytest

from otel_diary.pipeline.redact import redact

ENV = """\
        env:
        - name: DB_PASSWORD
          value: S3cretPw
        - name: LOG_LEVEL
          value: debug
        - name: "API_TOKEN"
          value: "S3cret Pw"
        - name: SECRET_REF
          valueFrom:
            secretKeyRef:
              name: db
              key: password
        - name: PASSWORD_MIN_LENGTH
          value: "8"
        - name: JWT_SECRET_KEY
          value: $(JWT_SECRET_KEY)
"""


def test_a_containers_environment_keeps_its_names_and_loses_its_secrets() -> None:
    """Kubernetes' ``name:`` then ``value:``: the value of a variable named as a secret
    goes; another variable's, a reference to a secret and a variable stay."""
    assert redact(ENV) == ENV.replace("value: S3cretPw", "value: [REDACTED:secret]").replace(
        '"S3cret Pw"', '"[REDACTED:secret]"')


@pytest.mark.parametrize(("text", "expected"), [
    ('{"name": "DB_PASSWORD", "value": "S3cretPw"}, {"name": "PORT", "value": "80"}',
     '{"name": "DB_PASSWORD", "value": "[REDACTED:secret]"}, {"name": "PORT", "value": "80"}'),
    ('{"Parameter": {"Name": "/app/db/password", "Type": "SecureString", "Value": "S3 Pw", '
     '"Version": 1}}',
     '{"Parameter": {"Name": "/app/db/password", "Type": "SecureString", '
     '"Value": "[REDACTED:secret]", "Version": 1}}'),
    ('{\n    "name": "WEBHOOK_SECRET",\n    "value": "whk-1234"\n}',
     '{\n    "name": "WEBHOOK_SECRET",\n    "value": "[REDACTED:secret]"\n}'),
    ('{"password": {"value": "S3cretPw"}, "user": "bob"}',
     '{"password": {"value": "[REDACTED:password]"}, "user": "bob"}'),
    # a field named by its id, label or type (1Password, Keycloak, az acr credential show)
    ('{"id": "password", "type": "CONCEALED", "label": "password", "value": "vwuqRyiAMp*YKv7"}',
     '{"id": "password", "type": "CONCEALED", "label": "password", "value": "[REDACTED:secret]"}'),
    ('{\n  "type" : "secret",\n  "value" : "XpLSXMUoX120fHj5cJnKwAhkqfC645BM"\n}',
     '{\n  "type" : "secret",\n  "value" : "[REDACTED:secret]"\n}'),
    ('{"name": "password2", "value": "Ar93aB4Q4Iyavvj"}',
     '{"name": "password2", "value": "[REDACTED:secret]"}'),
])
def test_a_named_value_in_json_is_redacted(text: str, expected: str) -> None:
    """ECS's environment, an SSM parameter (``aws ssm get-parameter --with-decryption``),
    and a secret's value nested under its name."""
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize("text", [
    '{"name": "tokenizer", "value": "bpe"}, {"name": "PORT", "value": "8080"}',
    '"password": {"type": "string", "description": "The password", "minLength": 8}',
    "const User = new Schema({\n  password: {\n    type: String,\n    required: true\n  }\n})",
    '{"name": "DB_PASSWORD", "value": "$DB_PASSWORD"}',
    # a lexer's token, a Kubernetes secret's type, a form's field: no generated value
    '{"type": "token", "value": "identifier", "start": 0} {"type": "secret", "value": "Opaque"}',
    '{"label": "Password", "value": "Required field"} {"id": "token", "value": "required"}',
])
def test_a_schema_or_another_name_stays(text: str) -> None:
    """A tool's or a model's schema for a secret, another variable, and a reference to
    one are no secrets."""
    assert redact(text) == text


APPSETTINGS = """\
{
  "Jwt": {
    "Issuer": "https://localhost:5001",
    "Audience": "orders",
    "ExpiryMinutes": 60,
    "Key": "ThisIsMySuperSecretSigningKey-2024"
  },
  "Logging": {"LogLevel": {"Default": "Information"}, "Key": "not-a-secret"}
}
"""


def test_the_signing_key_of_aspnets_jwt_settings_is_redacted() -> None:
    """ASP.NET's ``appsettings.json`` names the signing key ``Key`` in the ``Jwt``
    section: that one goes, a ``Key`` elsewhere stays."""
    assert redact(APPSETTINGS) == APPSETTINGS.replace(
        "ThisIsMySuperSecretSigningKey-2024", "[REDACTED:secret]")
    for one_line in ('"JwtSettings": {"Issuer": "x", "Key": "S3cretSigningKey"}',
                     '{"Jwt": {"Note": "a\\"b", "Issuer": "Bob\'s API",'
                     ' "Key": "S3cretSigningKey"}}',
                     '"Jwt": {\n  "Audiences": [\n    "orders",\n    "billing"\n  ],\n'
                     '  "Key": "S3cretSigningKey"\n}'):
        assert redact(one_line) == one_line.replace("S3cretSigningKey", "[REDACTED:secret]")


@pytest.mark.parametrize("typed", [
    # Playwright MCP's browser_type, as a tool call's arguments (JSON, or a Python dict)
    '{{"element": "Password textbox", "ref": "e12", "text": "{pw}"}}',
    '{{"element":"Password input field","ref":"e7","text":"{pw}","submit":true}}',
    "{{'element': 'password', 'ref': 'e3', 'slowly': False, 'text': '{pw}'}}",
    # browser automation code
    "await page.fill('#password', '{pw}');",
    """await page.fill('input[name="password"]', '{pw}');""",
    "await page.type('#passwd', \"{pw}\")",
    "await page.getByLabel('Password').fill('{pw}');",
    "await page.locator('#password').fill('{pw}');",
    "await page.getByRole('textbox', {{ name: 'Password' }}).fill('{pw}');",
    'driver.find_element(By.ID, "password").send_keys("{pw}")',
    """driver.find_element(By.CSS_SELECTOR, "input[type='password']").send_keys("{pw}")""",
    "page.locator('#pwd').press_sequentially('{pw}')",
    # escaped, as a span's attribute holds a tool call's arguments; Java's and C#'s
    # Selenium; a locator's options and chain; template literals
    '{{\\"element\\": \\"Password textbox\\", \\"ref\\": \\"e12\\", \\"text\\": \\"{pw}\\"}}',
    'driver.findElement(By.id("password")).sendKeys("{pw}");',
    'driver.FindElement(By.Id("password")).SendKeys("{pw}");',
    "await page.getByLabel('Password', {{ exact: true }}).fill('{pw}');",
    "await page.locator('#password').first().fill('{pw}');",
    "await page.fill(`#password`, `{pw}`);",
    # a field named "pass", a label as a regular expression, the DOM, TestCafe, Puppeteer MCP
    "await page.fill('#pass', '{pw}')",
    "await page.getByLabel(/password/i).fill('{pw}');",
    "document.querySelector('#password').value = '{pw}';",
    "await t.typeText('#password', '{pw}')",
    "await t.typeText(Selector('#password'), '{pw}')",
    "await page.locator('#pass').fill('{pw}')",
    '{{"name": "puppeteer_fill", "arguments": {{"selector": "#password", "value": "{pw}"}}}}',
])
def test_what_a_browser_agent_types_into_a_password_field_is_redacted(typed: str) -> None:
    """A browser agent logs in by typing the password into the field a selector or the
    page's accessibility tree names: the text typed goes, the field's name stays."""
    text = typed.format(pw="S3cret-pw!x")
    assert redact(text) == typed.format(pw="[REDACTED:password]")


@pytest.mark.parametrize("text", [
    '{"element": "Search box", "ref": "e2", "text": "password reset"}',
    "await page.fill('#email', 'bob@example.com');",
    "await page.getByLabel('Password').click();",
    "await page.locator('#username').fill('bob');",
    '{"element": "Email textbox (below Forgot password)", "ref": "e3", "text": "bob@x.io"}',
    "locator('#password-hint').type('Use 8 chars')", "page.fill('#password-hint', 'Use 8 chars')",
    "page.getByLabel('Password hint').fill('Use 8 chars')",
    "await page.fill('#password', process.env.PASSWORD);",
    "await page.fill('#passport', 'X1234567'); page.fill('#pass-hint', 'Use 8 chars')",
    '{"element": "Boarding pass number textbox", "ref": "e5", "text": "AB1234"}',
    "page.fill('#compass', 'North1'); page.fill('#boarding-pass', 'AB1234')",
    "await page.locator('#passport').fill('X1234567')",
    '{"selector": "#password-toggle", "value": "on"} {"selector": "#email", "value": "a@b.io"}',
])
def test_what_is_typed_into_other_fields_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("text", "expected"), [
    ('DriverManager.getConnection("jdbc:mysql://localhost/db", "root", "S3cret-pw");',
     'DriverManager.getConnection("jdbc:mysql://localhost/db", "root", "[REDACTED:password]");'),
    ("DriverManager.getConnection(url, user, 'S3cret-pw')",
     "DriverManager.getConnection(url, user, '[REDACTED:password]')"),
    ("$pdo = new PDO('mysql:host=localhost;dbname=test', 'root', 'S3cret-pw');",
     "$pdo = new PDO('mysql:host=localhost;dbname=test', 'root', '[REDACTED:password]');"),
    ('$conn = mysqli_connect("localhost", "root", "S3cret-pw", "mydb");',
     '$conn = mysqli_connect("localhost", "root", "[REDACTED:password]", "mydb");'),
    ('$db = new mysqli($host, $user, "S3cret-pw");',
     '$db = new mysqli($host, $user, "[REDACTED:password]");'),
    ('sql.Open("mysql", "root:S3cret-pw@tcp(127.0.0.1:3306)/test")',
     'sql.Open("mysql", "root:[REDACTED:password]@tcp(127.0.0.1:3306)/test")'),
    ('DriverManager.getConnection(\n    url,\n    "root",\n    "S3cret-pw");',
     'DriverManager.getConnection(\n    url,\n    "root",\n    "[REDACTED:password]");'),
    ('ds.getConnection(config.getUrl(), "root" , "S3cret-pw")',
     'ds.getConnection(config.getUrl(), "root" , "[REDACTED:password]")'),
    ('dataSource.getConnection("root","S3cret-pw")',
     'dataSource.getConnection("root","[REDACTED:password]")'),
    ('sql.Open("mysql", "root:S3c:r@t/x@tcp(127.0.0.1:3306)/test")',
     'sql.Open("mysql", "root:[REDACTED:password]@tcp(127.0.0.1:3306)/test")'),
    ("DSN=root:S3cretPw@unix(/tmp/mysql.sock)/app",
     "DSN=root:[REDACTED:password]@unix(/tmp/mysql.sock)/app"),
    ('dsn := "root:${DB_PASS}@tcp(db:3306)/app"', None),
    ('dsn := fmt.Sprintf("%s:%s@tcp(%s)/%s", u, p, h, d)', None),
    ("url = jdbc:oracle:thin:scott/tiger@db.example:1521:orcl",
     "url = jdbc:oracle:thin:scott/[REDACTED:password]@db.example:1521:orcl"),
    # a password read from elsewhere stays
    ("DriverManager.getConnection(url, user, password)", None),
    ('$pdo = new PDO($dsn, $user, "$password");', None),
    ('sql.Open("mysql", cfg.FormatDSN())', None),
])
def test_a_databases_password_given_as_an_argument_is_redacted(text: str,
                                                               expected: str | None) -> None:
    """JDBC, PDO and mysqli take the user and the password as arguments after the
    database; Go's MySQL driver and Oracle's thin driver in a URL with no ``://``."""
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize(("text", "expected"), [
    ('dataSource.setPassword("S3cret-pw");', 'dataSource.setPassword("[REDACTED:password]");'),
    ('ConnectOptions::new().password("S3cret-pw")',
     'ConnectOptions::new().password("[REDACTED:password]")'),
    ("$redis->auth('S3cret-pw');", "$redis->auth('[REDACTED:token]');"),
    ('client.get(url).bearer_auth("S3cret-pw")', 'client.get(url).bearer_auth("[REDACTED:token]")'),
    ('Builder().withApiKey("S3cret-pw")', 'Builder().withApiKey("[REDACTED:api_key]")'),
    ("smtp.login(user, 'S3cret-pw')", "smtp.login(user, '[REDACTED:password]')"),
    # a setter given code, a word with spaces, or another method
    ("user.setPassword(encoder.encode(raw))", None), ('resetPassword("bob@example.com")', None),
    ('form.password("must be 8 characters")', None), ('t("password")', None),
])
def test_a_secret_given_to_a_setter_or_a_builder_is_redacted(text: str,
                                                              expected: str | None) -> None:
    """``setPassword("…")``, a builder's ``.password("…")``, ``auth("…")``: the secret is
    the one word the method named as a secret is given."""
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize("content", [
    "env:\n- name: DB_PASSWORD\n  value: {pw}\n",
    '[{{"name": "DB_PASSWORD", "value": "{pw}"}}]',
    '{{"Jwt": {{\n  "Issuer": "x",\n  "Key": "{pw}"}}}}',
    '<add key="ClearTextPassword" value="{pw}" />',
    "db:\n  password: |\n    {pw}\n",
])
def test_a_file_a_tool_call_writes_is_redacted_as_the_file(content: str) -> None:
    """A tool call's arguments hold the file it writes as one JSON string, its lines and
    quotes escaped (at any depth): the rules read it as the file."""
    secret = "Vn4mK8pQ2wXz"
    call = json.dumps({"path": "deploy/app.yaml", "content": content.format(pw=secret)})
    for text in (call, json.dumps({"arguments": call})):
        redacted = redact(text)
        assert secret not in redacted
        assert json.loads(redacted)  # still JSON
        assert redact(redacted) == redacted
    plain = json.dumps({"msg": "line1\nline2 caf\u00e9 \\d"})
    assert redact(plain) == plain  # unchanged strings keep their escapes


@pytest.mark.parametrize("code", [
    'api_key = os.environ["OPENAI_API_KEY"]', 'token = os.getenv("GH_TOKEN")',
    'SECRET_KEY = config("SECRET_KEY")', "password = ENV.fetch(\"DB_PASSWORD\")",
    'pw = getpass.getpass("Password: ")', 'password = form.cleaned_data["password"]',
    'let token = env::var("API_TOKEN")?;', 'password: "{{ .Values.db.password }}"',
    'token: "<token>"', 'password = "********"', "curl -H \"X-API-Key: $API_KEY\" x",
])
def test_code_in_a_tool_calls_json_stays_as_it_is(code: str) -> None:
    """Code a tool call writes or runs is a JSON string, its quotes escaped: code that only
    names a secret stays byte for byte, and the call stays JSON (the rules read the
    string's decoded text, not its escapes)."""
    for text in (json.dumps({"command": code}), json.dumps({"arguments": json.dumps(
            {"path": "app.py", "content": code + "\n"})})):
        assert redact(text) == text
    assert redact(code) == code


@pytest.mark.parametrize(("text", "expected"), [
    # signing keys
    ("const token = jwt.sign({ id: user.id }, 'my-jwt-s3cret', { expiresIn: '1h' })",
     "const token = jwt.sign({ id: user.id }, '[REDACTED:secret]', { expiresIn: '1h' })"),
    ('jwt.encode(payload, "S3cret-key", algorithm="HS256")',
     'jwt.encode(payload, "[REDACTED:secret]", algorithm="HS256")'),
    ("mac = hmac.new(b'Xk7pL2mQ9rTzA1b', msg, hashlib.sha256)",
     "mac = hmac.new(b'[REDACTED:secret]', msg, hashlib.sha256)"),
    ("crypto.createHmac('sha256', 'whsec-local-1').update(body)",
     "crypto.createHmac('sha256', '[REDACTED:secret]').update(body)"),
    ('mac := hmac.New(sha256.New, []byte("S3cret-key"))',
     'mac := hmac.New(sha256.New, []byte("[REDACTED:secret]"))'),
    ("f = Fernet(b'ZmDfcTF7_60GrrY167zsiPd67pEvs0aGOv2oasOM1Pg=')",
     "f = Fernet(b'[REDACTED:secret]')"),
    ('new SymmetricSecurityKey(Encoding.UTF8.GetBytes("SuperSecretKey123456"))',
     'new SymmetricSecurityKey(Encoding.UTF8.GetBytes("[REDACTED:secret]"))'),
    ('.signWith(Keys.hmacShaKeyFor("SuperSecretKey1234567890".getBytes()))',
     '.signWith(Keys.hmacShaKeyFor("[REDACTED:secret]".getBytes()))'),
    ('$pw = ConvertTo-SecureString "P@ssw0rd123" -AsPlainText -Force',
     '$pw = ConvertTo-SecureString "[REDACTED:password]" -AsPlainText -Force'),
    # a user's password after the user
    ('client.basic_auth("admin", Some("S3cretPass9"))',
     'client.basic_auth("admin", Some("[REDACTED:password]"))'),
    ('new UsernamePasswordAuthenticationToken("admin", "S3cretPass9")',
     'new UsernamePasswordAuthenticationToken("admin", "[REDACTED:password]")'),
    ('ldap.simple_bind_s("cn=admin,dc=example,dc=org", "S3cretPass9")',
     'ldap.simple_bind_s("cn=admin,dc=example,dc=org", "[REDACTED:password]")'),
    ('auth := smtp.PlainAuth("", "me@example.com", "S3cretPass9", "smtp.example.com")',
     'auth := smtp.PlainAuth("", "me@example.com", "[REDACTED:password]", "smtp.example.com")'),
    ("new Sequelize('shop', 'root', 'S3cretPass9', { dialect: 'mysql' })",
     "new Sequelize('shop', 'root', '[REDACTED:password]', { dialect: 'mysql' })"),
    # a service's key or secret
    ('ClientSecretCredential(tenant_id, client_id, "Xk7~pL2mQ9rTzA1b.c3d4")',
     'ClientSecretCredential(tenant_id, client_id, "[REDACTED:secret]")'),
    ('co = cohere.Client("Xk7pL2mQ9rTzA1bXk7pL2mQ9rTzA1b")',
     'co = cohere.Client("[REDACTED:api_key]")'),
    ('wandb.login(key="0123456789abcdef0123456789abcdef01234567")',
     'wandb.login(key="[REDACTED:api_key]")'),
    ('Client("ACa1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8")',
     'Client("ACa1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "[REDACTED:token]")'),
    ("client = Client(account_sid, 'f0e1d2c3b4a5968778695a4b3c2d1e0f')",
     "client = Client(account_sid, '[REDACTED:token]')"),
    # more signing keys, also by keyword
    ('Key k = new SecretKeySpec("Winter2024xQ".getBytes(), "HmacSHA256");',
     'Key k = new SecretKeySpec("[REDACTED:secret]".getBytes(), "HmacSHA256");'),
    ('let key = EncodingKey::from_secret(b"Winter2024xQ");',
     'let key = EncodingKey::from_secret(b"[REDACTED:secret]");'),
    ('let mac = HmacSha256::new_from_slice(b"Winter2024xQ")?;',
     'let mac = HmacSha256::new_from_slice(b"[REDACTED:secret]")?;'),
    ('s, err := token.SignedString([]byte("Winter2024xQ"))',
     's, err := token.SignedString([]byte("[REDACTED:secret]"))'),
    ("OpenSSL::HMAC.hexdigest('SHA256', 'Winter2024xQ', data)",
     "OpenSSL::HMAC.hexdigest('SHA256', '[REDACTED:secret]', data)"),
    ('s = URLSafeTimedSerializer("1fb9fcfc8ae41bca4cd5d50ba81c51a9")',
     's = URLSafeTimedSerializer("[REDACTED:secret]")'),
    ('jwt.encode(payload, key="Winter2024xQ", algorithm="HS256"); Fernet(key=b"Zm9vYmFy")',
     'jwt.encode(payload, key="[REDACTED:secret]", algorithm="HS256"); '
     'Fernet(key=b"[REDACTED:secret]")'),
    # more users' passwords after the user (and the host, the port, the database)
    ('conn = pymysql.connect("db.local", "root", "Winter2024x", "app")',
     'conn = pymysql.connect("db.local", "root", "[REDACTED:password]", "app")'),
    ('ftp = ftplib.FTP("ftp.example.com", "deploy", "Winter2024x")',
     'ftp = ftplib.FTP("ftp.example.com", "deploy", "[REDACTED:password]")'),
    ("creds = pika.PlainCredentials('guest', 'Winter2024x')",
     "creds = pika.PlainCredentials('guest', '[REDACTED:password]')"),
    ("conn = ldap3.Connection(server, 'cn=admin,dc=example,dc=com', 'Winter2024x')",
     "conn = ldap3.Connection(server, 'cn=admin,dc=example,dc=com', '[REDACTED:password]')"),
    ('keyring.set_password("svc", "user", "Winter2024x")',
     'keyring.set_password("svc", "user", "[REDACTED:password]")'),
    ('db.changeUserPassword("app", "Winter2024x"); db.auth("app", "P@sskey-Galaxy25")',
     'db.changeUserPassword("app", "[REDACTED:password]"); '
     'db.auth("app", "[REDACTED:password]")'),
    ("ftp_login($c, 'deploy', 'Winter2024x'); ssh2_auth_password($s, 'root', 'Winter2024y')",
     "ftp_login($c, 'deploy', '[REDACTED:password]'); "
     "ssh2_auth_password($s, 'root', '[REDACTED:password]')"),
    ("Net::SMTP.start('smtp.example.com', 587, 'example.com', 'bob', 'Winter2024x', :plain)",
     "Net::SMTP.start('smtp.example.com', 587, 'example.com', 'bob', '[REDACTED:password]', "
     ":plain)"),
    ('r = redis.Redis("cache.internal", 6379, 0, "maple_Cinder46"); pop.pass_("Nebula88!m")',
     'r = redis.Redis("cache.internal", 6379, 0, "[REDACTED:password]"); '
     'pop.pass_("[REDACTED:password]")'),
    ('l.Bind("cn=admin,dc=example,dc=com", "qe6qf3LGE09LzIe")',
     'l.Bind("cn=admin,dc=example,dc=com", "[REDACTED:password]")'),
    ('con = cx_Oracle.connect("scott", "v=iNWU=QK3-vwm", "db:1521/ORCLPDB1")',
     'con = cx_Oracle.connect("scott", "[REDACTED:password]", "db:1521/ORCLPDB1")'),
    # more services' keys
    ('StorageSharedKeyCredential("acct", "Zm9vYmFyYmF6cXV4")',
     'StorageSharedKeyCredential("acct", "[REDACTED:secret]")'),
    ('credentials.NewStaticV4("AKIDEXAMPLE", "wJalrXUtnFEMIK7MDENG", "")',
     'credentials.NewStaticV4("AKIDEXAMPLE", "[REDACTED:secret]", "")'),
    ("totp = pyotp.TOTP('DVQ4QJ6SBHWZQQVY2FTQ6KSCH35JCJQG')",
     "totp = pyotp.TOTP('[REDACTED:secret]')"),
    ('ethers.Wallet.fromPhrase("adapt ecology also aim aisle famous gallery cable camera fantasy '
     'ability aerobic")', 'ethers.Wallet.fromPhrase("[REDACTED:secret]")'),
    ('credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMIK7MDENG", "")',
     'credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "[REDACTED:secret]", "")'),
    # Android's signing config, a Spring or Ant property
    ("storePassword 'S3cretPass9'\nkeyPassword \"S3cretPass9\"",
     "storePassword '[REDACTED:password]'\nkeyPassword \"[REDACTED:password]\""),
    ('<property name="password" value="S3cretPass9"/>',
     '<property name="password" value="[REDACTED:secret]"/>'),
    ("<property name='password' value='S3cretPass9'/>",
     "<property name='password' value='[REDACTED:secret]'/>"),
    ("JWT.encode(payload, 'S3cretKey9x', 'HS256'); JWT::encode($p, 'S3cretKey9x', 'HS256')",
     "JWT.encode(payload, '[REDACTED:secret]', 'HS256'); "
     "JWT::encode($p, '[REDACTED:secret]', 'HS256')"),
    ("jwt.sign(payload, `S3cretKey9x`)", "jwt.sign(payload, `[REDACTED:secret]`)"),
    ("ConvertTo-SecureString -AsPlainText -Force -String 'S3cretPass!'",
     "ConvertTo-SecureString -AsPlainText -Force -String '[REDACTED:password]'"),
    # a variable, a codec, another argument, an encoding of a name: no secret
    ("jwt.sign(payload, process.env.JWT_SECRET, { expiresIn: '1h' })", None),
    ("hmac.new(key.encode('utf-8'), msg, hashlib.sha256); Fernet(key)", None),
    ('jwt.decode(token, options={"verify_signature": False})', None),
    ('basic_auth("admin", None::<&str>); Client("not-a-sid", "x")', None),
    ('storePassword System.getenv("STORE_PASSWORD"); {"auth": "oauth2"}', None),
    ('<property name="username" value="admin"/>', None),
    ('pymysql.connect(host="db", user="root"); redis.Redis("cache", 6379); c.Bind(&form)', None),
    ('jwt.encode(payload, algorithm="HS256"); db.auth(user, pw); FTP("ftp.example.com")', None),
    ('ConfigurationBinder.Bind(configuration, "AppSettings", settings)', None),
])
def test_a_secret_a_call_takes_by_its_place_is_redacted(text: str,
                                                         expected: str | None) -> None:
    """Signing keys, users' passwords and services' keys that well-known calls take by
    their place in the arguments: the literal goes, the call and its other arguments
    stay."""
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize(("text", "expected"), [
    ('{\n  "unseal_keys_b64": [\n    "JlgGsdQTVrkq4pSE+yDSoswIwK+fcSFFzxIWu6gfkAo=",\n'
     '    "DlbggFYVCr+hvk85dpG9GpfSZli8UUtR8Cot7GSf1fk="\n  ],\n  "unseal_keys_hex": [\n'
     '    "c9b45645858b8758f02907a6c152952570cb448f5f18e41553e851b870563e20"\n  ],\n'
     '  "unseal_shares": 3\n}',
     '{\n  "unseal_keys_b64": [\n    "[REDACTED:secret]",\n    "[REDACTED:secret]"\n  ],\n'
     '  "unseal_keys_hex": [\n    "[REDACTED:secret]"\n  ],\n  "unseal_shares": 3\n}'),
    ('accounts: ["0xdc2e26d040861044cc6b3b2222cab626a047731ce1f343a273d6a9203f11c7b1"],',
     'accounts: ["[REDACTED:secret]"],'),
    # a key kept elsewhere, or no key
    ("accounts: [process.env.PRIVATE_KEY], accounts: ['alice', 'bob']", None),
    ("accounts: ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'ServiceAccountPrimary']", None),
    ('"accounts": [{"accountIdentifier": "x"}]', None),
    ('"unseal_keys_b64": []', None),
    # a session's cookie as code sets it (not a short word)
    ('context.add_cookies([{\n    "name": "sessionid",\n    "value": "ofvji9rru9ibzq9bgwg2ynv2od",'
     '\n    "domain": ".acme.io"\n}])',
     'context.add_cookies([{\n    "name": "sessionid",\n    "value": "[REDACTED:cookie]",'
     '\n    "domain": ".acme.io"\n}])'),
    ('{"name": "session", "value": "morning"}', None),
])
def test_every_key_in_a_list_of_keys_is_redacted(text: str, expected: str | None) -> None:
    """Vault's unseal keys as ``vault operator init -format=json`` prints them, and a
    Hardhat network's accounts' private keys: each key in the list goes."""
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize(("text", "expected"), [
    ('{\n  "kty": "RSA",\n  "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4",\n'
     '  "d": "X4cTteJY_gn4FYPsXB8rdXix5vwsg1FLN5E3EaG6RJoVH-HLLKD9"\n}',
     '{\n  "kty": "RSA",\n  "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4",\n'
     '  "d": "[REDACTED:private_key]"\n}'),
    ("PuTTY-User-Key-File-3: ssh-rsa\nPublic-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQABAAAAgQC\n"
     "Private-Lines: 2\nAAAAgQCxhLb42JbWoKZ6Xk7pL2mQ9rTz\nAbc123==\nPrivate-MAC: 0f1e2d",
     "PuTTY-User-Key-File-3: ssh-rsa\nPublic-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQABAAAAgQC\n"
     "Private-Lines: 2\n[REDACTED:private_key]\nPrivate-MAC: 0f1e2d"),
    # a public key's members, a "d" outside a key
    ('{"kty": "EC", "x": "vzhdYnXxdlOkaqb_zmBu0AOXihqGeLgW4zUWwvH07ZT", "crv": "P-256"}', None),
    ('{"d": "2024-05-01T10:00:00Z", "p": "page-2"}', None),
])
def test_a_private_key_outside_pem_is_redacted(text: str, expected: str | None) -> None:
    """A JSON Web Key's private members and a PuTTY key file's private lines go; its public
    members stay."""
    assert redact(text) == (text if expected is None else expected)
