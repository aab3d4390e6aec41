"""Secrets a command line hands a tool: the value goes, the command and its other words stay."""

from __future__ import annotations

import json

import pytest

from otel_diary.pipeline.redact import redact

COMMANDS = [
    ("aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws configure set aws_secret_access_key [REDACTED:secret]"),
    ("aws configure set profile.dev.aws_session_token FwoGZXIvYXdzEJr --profile dev",
     "aws configure set profile.dev.aws_session_token [REDACTED:secret] --profile dev"),
    ("keytool -genkeypair -storepass changeit1 -keypass 'key pass' -alias app",
     "keytool -genkeypair -storepass [REDACTED:password] -keypass '[REDACTED:password]' "
     "-alias app"),
    ("keytool -importkeystore -srcstorepass Src1pass -deststorepass Dst2pass",
     "keytool -importkeystore -srcstorepass [REDACTED:password] "
     "-deststorepass [REDACTED:password]"),
    ('sqlcmd -S localhost -U sa -P "YourStrong!Passw0rd" -Q "SELECT 1"',
     'sqlcmd -S localhost -U sa -P "[REDACTED:password]" -Q "SELECT 1"'),
    ("mongosh -u admin -p S3cretPw --authenticationDatabase admin",
     "mongosh -u admin -p [REDACTED:password] --authenticationDatabase admin"),
    ("ldapsearch -x -D cn=admin,dc=x -w adminPw1 -b dc=x",
     "ldapsearch -x -D cn=admin,dc=x -w [REDACTED:password] -b dc=x"),
    ("openssl enc -aes-256-cbc -k Hunter2Xyz -in a -out b",
     "openssl enc -aes-256-cbc -k [REDACTED:password] -in a -out b"),
    ("zip -r -P Hunter2Xyz out.zip dist", "zip -r -P [REDACTED:password] out.zip dist"),
    ("ssh-keygen -t ed25519 -N 'Hunter 2Xyz' -f deploy_key",
     "ssh-keygen -t ed25519 -N '[REDACTED:password]' -f deploy_key"),
    ("7z a -pHunter2Xyz out.7z dist", "7z a -p[REDACTED:password] out.7z dist"),
    ("rabbitmqctl add_user app Hunter2Xyz", "rabbitmqctl add_user app [REDACTED:password]"),
    ("mc alias set local http://127.0.0.1:9000 minioadmin 'Hunter 2Xyz'",
     "mc alias set local http://127.0.0.1:9000 minioadmin '[REDACTED:secret]'"),
    ('echo Hunter2Xyz | sudo -u deploy -S systemctl restart app',
     'echo [REDACTED:password] | sudo -u deploy -S systemctl restart app'),
    ("smbclient //files/share -U 'CORP\\bob%Hunter 2Xyz' -c ls",
     "smbclient //files/share -U 'CORP\\bob%[REDACTED:password]' -c ls"),
    ("htpasswd -Bbn testuser testpassword > auth/htpasswd",
     "htpasswd -Bbn testuser [REDACTED:password] > auth/htpasswd"),
    ("htpasswd -c -b /etc/nginx/.htpasswd admin S3cret!",
     "htpasswd -c -b /etc/nginx/.htpasswd admin [REDACTED:password]"),
    ('echo "Hunter2Xyz" | sudo -S apt-get install -y jq',
     'echo "[REDACTED:password]" | sudo -S apt-get install -y jq'),
    ("echo Hunter2Xyz|docker login -u ci --password-stdin ghcr.io",
     "echo [REDACTED:password]|docker login -u ci --password-stdin ghcr.io"),
    ("printf 'bob:Hunter2Xyz' | chpasswd", "printf '[REDACTED:password]' | chpasswd"),
    ("printf '%s\\n' 'Hunter2Xyz' | docker login -u ci --password-stdin",
     "printf '%s\\n' '[REDACTED:password]' | docker login -u ci --password-stdin"),
    ("az login --service-principal -u http://app -p Hunter2Xyz --tenant t1",
     "az login --service-principal -u http://app -p [REDACTED:password] --tenant t1"),
    ("helm registry login ghcr.io -u bob -p Hunter2Xyz",
     "helm registry login ghcr.io -u bob -p [REDACTED:password]"),
    ("aws secretsmanager put-secret-value --secret-id db --secret-string '{\"pw\": \"Hu 2\"}'",
     "aws secretsmanager put-secret-value --secret-id db --secret-string '[REDACTED:secret]'"),
    ("aws ssm put-parameter --name /db/pw --value Hunter2Xyz --type SecureString",
     "aws ssm put-parameter --name /db/pw --value [REDACTED:secret] --type SecureString"),
    ("net use Z: \\\\files\\share Hunter2Xyz /user:CORP\\bob",
     "net use Z: \\\\files\\share [REDACTED:password] /user:CORP\\bob"),
    ('net use \\\\files\\share /USER:bob "Hunter 2Xyz"',
     'net use \\\\files\\share /USER:bob "[REDACTED:password]"'),
    ("echo -n Hunter2Xyz | gcloud secrets create db --data-file=-",
     "echo -n [REDACTED:password] | gcloud secrets create db --data-file=-"),
    ("echo Hunter2Xyz | npx wrangler secret put STRIPE_KEY",
     "echo [REDACTED:password] | npx wrangler secret put STRIPE_KEY"),
    ("echo Hunter2Xyz | vercel env add DATABASE production",
     "echo [REDACTED:password] | vercel env add DATABASE production"),
    ("Step 5/10 : ENV DB_PASSWORD Hunter2Xyz", "Step 5/10 : ENV DB_PASSWORD [REDACTED:secret]"),
    ("ngrok config add-authtoken 2AbCdEfGhIj_0123; ngrok http 80",
     "ngrok config add-authtoken [REDACTED:password]; ngrok http 80"),
    ("wandb login 0123456789abcdef0123456789abcdef01234567&&python train.py",
     "wandb login [REDACTED:password]&&python train.py"),
    ("http --auth bob:Hunter2Xyz GET https://x; tailscale up --authkey Hunter2Xyz",
     "http --auth [REDACTED:secret] GET https://x; tailscale up --authkey [REDACTED:secret]"),
    ("sqlcmd -S db -U sa -P Hunter2Xyz;sqlcmd -Q x|tee out",
     "sqlcmd -S db -U sa -P [REDACTED:password];sqlcmd -Q x|tee out"),
    ("psql -c \"CREATE ROLE app LOGIN PASSWORD 'it''s Hunter2'\"",
     "psql -c \"CREATE ROLE app LOGIN PASSWORD '[REDACTED:password]'\""),
    ("ALTER USER 'bob'@'%' IDENTIFIED WITH mysql_native_password BY 'Hunter2Xyz';",
     "ALTER USER 'bob'@'%' IDENTIFIED WITH mysql_native_password BY '[REDACTED:password]';"),
    ("create user 'bob'@'localhost' identified by 'Hunter2Xyz'",
     "create user 'bob'@'localhost' identified by '[REDACTED:password]'"),
    ("CREATE USER scott IDENTIFIED BY tiger42;",
     "CREATE USER scott IDENTIFIED BY [REDACTED:password];"),
    ('SQL> alter user system identified by "Oracle 4U" container=all;',
     'SQL> alter user system identified by "[REDACTED:password]" container=all;'),
    ("create database link l connect to hr identified by hr_pw using 'db';",
     "create database link l connect to hr identified by [REDACTED:password] using 'db';"),
    ("ALTER USER hr IDENTIFIED BY \"it's Hunter2\"; sqlplus sys/\"pa'ss w\"@db",
     "ALTER USER hr IDENTIFIED BY \"[REDACTED:password]\"; "
     "sqlplus sys/\"[REDACTED:password]\"@db"),
    ("create user app identified by 'Hunter2 cut off",
     "create user app identified by '[REDACTED:password]"),
    ("EXECUTE IMMEDIATE 'CREATE USER app IDENTIFIED BY Hunter2Xyz';",
     "EXECUTE IMMEDIATE 'CREATE USER app IDENTIFIED BY [REDACTED:password]';"),
    ("ALTER USER app IDENTIFIED BY VALUES 'S:8F2D0A1B';",
     "ALTER USER app IDENTIFIED BY VALUES '[REDACTED:password]';"),
    ("CREATE USER 'b'@'%' IDENTIFIED WITH mysql_native_password AS '*6BB4837EB743291';",
     "CREATE USER 'b'@'%' IDENTIFIED WITH mysql_native_password AS '[REDACTED:password]';"),
    ("sqlplus -s hr/Hunter2Xyz@//db:1521/pdb @run.sql; SQLPLUS SYS/\"a b\"@x",
     "sqlplus -s hr/[REDACTED:password]@//db:1521/pdb @run.sql; "
     "SQLPLUS SYS/\"[REDACTED:password]\"@x"),
    ("expdp system/Manager1@orcl schemas=hr; rman target sys/Oracle1@db",
     "expdp system/[REDACTED:password]@orcl schemas=hr; rman target sys/[REDACTED:password]@db"),
    ("sqlldr userid=scott/tiger42 control=load.ctl\nSQL> conn hr/hr_pw@pdb1\nCONNECT a/b1",
     "sqlldr userid=scott/[REDACTED:password] control=load.ctl\n"
     "SQL> conn hr/[REDACTED:password]@pdb1\nCONNECT a/[REDACTED:password]"),
    # Redis: its config, CONFIG SET, AUTH at its prompt (and SMTP's AUTH PLAIN)
    ("requirepass S3cret-pw", "requirepass [REDACTED:password]"),
    ("127.0.0.1:6379> CONFIG SET masterauth S3cret-pw",
     "127.0.0.1:6379> CONFIG SET masterauth [REDACTED:password]"),
    ("127.0.0.1:6379> AUTH S3cret-pw\nOK", "127.0.0.1:6379> AUTH [REDACTED:password]\nOK"),
    ("127.0.0.1:6379> AUTH default S3cret-pw",
     "127.0.0.1:6379> AUTH default [REDACTED:password]"),
    ("redis-server --requirepass S3cret-pw", "redis-server --requirepass [REDACTED:password]"),
    ('echo "auth S3cret-pw" | redis-cli', 'echo "auth [REDACTED:password]" | redis-cli'),
    ("vault login -no-print hvs.CAESIabc123", "vault login -no-print [REDACTED:token]"),
    ('dotnet user-secrets set "Jwt:Key" "S3cret-pw"',
     'dotnet user-secrets set "Jwt:Key" "[REDACTED:secret]"'),
    ("vault login s.Zq7xW2mK9pL4vN8r", "vault login [REDACTED:token]"),
    ("twine upload -u bob -p S3cret-pw dist/*",
     "twine upload -u bob -p [REDACTED:password] dist/*"),
    ("lftp -u admin,S3cret-pw ftp.example.com",
     "lftp -u admin,[REDACTED:password] ftp.example.com"),
    ("poetry config http-basic.private admin S3cret-pw",
     "poetry config http-basic.private admin [REDACTED:password]"),
    ("az storage blob upload --account-key Zq7xW2+mK9/pL4== -f a",
     "az storage blob upload --account-key [REDACTED:api_key] -f a"),
    ("cosign sign --signing-key Zq7xW2mK9pL4 img",
     "cosign sign --signing-key [REDACTED:api_key] img"),
    ('setx OPENAI_API_KEY "Xk7pL2mQ9rTzA1b"', 'setx OPENAI_API_KEY "[REDACTED:secret]"'),
    ("echo password ', --password '000000x'", "echo password ', --password '[REDACTED:password]'"),
    ("rabbitmqadmin -u admin -p sN3eZe0VNA9PsU list queues",
     "rabbitmqadmin -u admin -p [REDACTED:password] list queues"),
    ("set -gx OPENAI_API_KEY Xk7pL2mQ9rTzA1b", "set -gx OPENAI_API_KEY [REDACTED:secret]"),
    ("SetEnv DB_PASS S3cretPass9", "SetEnv DB_PASS [REDACTED:secret]"),
    ("az acr login --name myreg -u admin -p S3cretPass9",
     "az acr login --name myreg -u admin -p [REDACTED:password]"),
    ("xfreerdp3 /v:host /u:admin /size:1920x1080 /dynamic-resolution /cert:ignore "
     "/network:auto /gfx /p:S3cretPass9 /cert:ignore",
     "xfreerdp3 /v:host /u:admin /size:1920x1080 /dynamic-resolution /cert:ignore "
     "/network:auto /gfx /p:[REDACTED:password] /cert:ignore"),
    ('curl -s --cookie "session=Zq7xW2mK9pL4" https://example.com',
     'curl -s --cookie "[REDACTED:cookie]" https://example.com'),
    ("curl -b sessionid=Zq7xW2mK9pL4 https://example.com",
     "curl -b [REDACTED:cookie] https://example.com"),
    ("curl -s -L -k -X GET -v -i -b session=Zq7xW2mK9pL4 https://x",
     "curl -s -L -k -X GET -v -i -b [REDACTED:cookie] https://x"),
    ('echo "deploy:Winter2024x" | sudo chpasswd',
     'echo "[REDACTED:password]" | sudo chpasswd'),
    ('setx /M DB_PASSWORD "Winter2024x"; SETX JWT_SIGNING_KEY 015a2df06344b496',
     'setx /M DB_PASSWORD "[REDACTED:secret]"; SETX JWT_SIGNING_KEY [REDACTED:secret]'),
    ('127.0.0.1:6379> CONFIG GET requirepass\n1) "requirepass"\n2) "Winter2024xQ"',
     '127.0.0.1:6379> CONFIG GET requirepass\n1) "requirepass"\n2) "[REDACTED:password]"'),
    ("$ redis-cli config get requirepass\nrequirepass\n60f8bcdee2eff47fd2ecccfd\n",
     "$ redis-cli config get requirepass\nrequirepass\n[REDACTED:password]\n"),
    ("SET PASSWORD FOR 'app'@'%' = 'Winter2024x'; set password for bob = 'Winter2024y'",
     "SET PASSWORD FOR 'app'@'%' = '[REDACTED:password]'; "
     "set password for bob = '[REDACTED:password]'"),
    ("net user deploy P@ssw0rd123 /add; net user /add ansible \"xbtVxm4OYZ\"",
     "net user deploy [REDACTED:password] /add; net user /add ansible \"[REDACTED:password]\""),
    ("$ openssl passwd -6 -salt x9 'Winter2024!x'",
     "$ openssl passwd -6 -salt x9 '[REDACTED:password]'"),
    ("vault operator unseal -address=https://v:8200 3Kx9Lm2Pq7Rt5Vw8Yz1Ab4Cd6Ef0Gh2Ij4Kl6=",
     "vault operator unseal -address=https://v:8200 [REDACTED:secret]"),
    ('wpa_passphrase "Home Net" Sunsh1ne2024 >> /etc/wpa_supplicant.conf',
     'wpa_passphrase "Home Net" [REDACTED:password] >> /etc/wpa_supplicant.conf'),
    ("az keyvault secret set --name db --vault-name kv --value Winter2024x!",
     "az keyvault secret set --name db --vault-name kv --value [REDACTED:secret]"),
    ("az sql server create \\\n  --name sql-x \\\n  --admin-user azureuser \\\n  -p Indigo.2024",
     "az sql server create \\\n  --name sql-x \\\n  --admin-user azureuser \\\n"
     "  -p [REDACTED:password]"),
    ("pulumi config set --secret dbPassword Winter2024x; pulumi config set apiKey Xk7pL2 --secret",
     "pulumi config set --secret dbPassword [REDACTED:secret]; "
     "pulumi config set apiKey [REDACTED:secret] --secret"),
    ("yarn config set npmAuthToken a1b2c3d4-e5f6; npm config set //r.example/:_authToken a1b2c3",
     "yarn config set npmAuthToken [REDACTED:token]; "
     "npm config set //r.example/:_authToken [REDACTED:token]"),
    ("yarn config set 'npmRegistries[\"//npm.pkg.github.com\"].npmAuthToken' 42cff5e7-f9c2",
     "yarn config set 'npmRegistries[\"//npm.pkg.github.com\"].npmAuthToken' [REDACTED:token]"),
    ("composer config --global github-oauth.github.com a1b2c3d4e5f6a7b8c9d0",
     "composer config --global github-oauth.github.com [REDACTED:token]"),
    ("composer config --auth bearer.packages.example.com ozL2bnfI9IkhYOA0gkWb",
     "composer config --auth bearer.packages.example.com [REDACTED:token]"),
    ("java -jar jenkins-cli.jar -s http://localhost:8080/ -auth admin:11a2b3c4d5e6 build job",
     "java -jar jenkins-cli.jar -s http://localhost:8080/ -auth admin:[REDACTED:token] build job"),
    ("mvn sonar:sonar -Dsonar.login=a1b2c3d4e5f6a7b8c9d0 -Dsonar.host.url=https://sq",
     "mvn sonar:sonar -Dsonar.login=[REDACTED:token] -Dsonar.host.url=https://sq"),
    ("npx netlify-cli env:set STRIPE_SECRET Winter2024xYz",
     "npx netlify-cli env:set STRIPE_SECRET [REDACTED:secret]"),
    ("rdesktop -u admin -g 1280x800 -p Winter2024x 10.0.0.5",
     "rdesktop -u admin -g 1280x800 -p [REDACTED:password] 10.0.0.5"),
    ("hydra -l admin -p Winter2024x ssh://10.0.0.5",
     "hydra -l admin -p [REDACTED:password] ssh://10.0.0.5"),
    ("http -a admin:Winter2024x GET https://x; http -A bearer -a yqogBWwKTKC1oX3t GET https://x",
     "http -a admin:[REDACTED:password] GET https://x; "
     "http -A bearer -a [REDACTED:password] GET https://x"),
    ('sudo -S apt-get update <<< "Winter2024x"',
     'sudo -S apt-get update <<< "[REDACTED:password]"'),
    # over continued lines, in capitals, in MySQL 5's form, after another sudo or path
    ("net user deploy \\\n  P@ssw0rd123 /add; pulumi config set --secret dbPw \\\n  Winter2024x",
     "net user deploy \\\n  [REDACTED:password] /add; pulumi config set --secret dbPw \\\n"
     "  [REDACTED:secret]"),
    ("NET USER deploy P@ssw0rd123 /ADD; Setx DB_PASSWORD Winter2024x",
     "NET USER deploy [REDACTED:password] /ADD; Setx DB_PASSWORD [REDACTED:secret]"),
    ("SET PASSWORD FOR 'app'@'%' = PASSWORD('Winter2024x'); SET PASSWORD FOR bob = \"Winter2024y\"",
     "SET PASSWORD FOR 'app'@'%' = PASSWORD('[REDACTED:password]'); "
     "SET PASSWORD FOR bob = \"[REDACTED:password]\""),
    ('echo "root:Winter2024x" | sudo -n chpasswd; echo "root:Winter2024y" | /usr/sbin/chpasswd',
     'echo "[REDACTED:password]" | sudo -n chpasswd; '
     'echo "[REDACTED:password]" | /usr/sbin/chpasswd'),
    ("vault operator unseal -address https://vault:8200 3Kx9Lm2Pq7Rt5Vw8Yz1Ab4Cd6=",
     "vault operator unseal -address https://vault:8200 [REDACTED:secret]"),
    ("openssl passwd -6 -salt $(openssl rand -hex 8) Winter2024x",
     "openssl passwd -6 -salt $(openssl rand -hex 8) [REDACTED:password]"),
    ("composer config --global --auth http-basic.repo.example.com deploy Winter2024x",
     "composer config --global --auth http-basic.repo.example.com deploy [REDACTED:token]"),
    ('expect "password:"\nsend "nHSRNYW^0J!4\\r"\nexpect "$ "\nsend "sudo systemctl restart\\r"',
     'expect "password:"\nsend "[REDACTED:password]\\r"\nexpect "$ "\n'
     'send "sudo systemctl restart\\r"'),
    ("# hostname:port:database:username:password\npg.internal:5432:app:app_rw:gpt2CT*G.Ze_\n"
     "*:*:*:postgres:S3cret99",
     "# hostname:port:database:username:password\npg.internal:5432:app:app_rw:"
     "[REDACTED:password]\n*:*:*:postgres:[REDACTED:password]"),
    ("requirepass\nfoobared2024\n$ redis-cli config get masterauth\nmasterauth\nfoobared2025",
     "requirepass\n[REDACTED:password]\n$ redis-cli config get masterauth\nmasterauth\n"
     "[REDACTED:password]"),
]


@pytest.mark.parametrize(("text", "expected"), COMMANDS)
def test_the_value_a_command_is_given_is_redacted(text: str, expected: str) -> None:
    """Each tool's secret is replaced; the tool, its flags and its other words stay."""
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (text, expected) for text, expected in COMMANDS
    if text.count('"') % 2 == 0 and text.count("'") % 2 == 0])
def test_a_command_in_a_tool_calls_json_is_redacted_and_stays_json(text: str,
                                                                    expected: str) -> None:
    """A shell tool's call holds its command as a JSON string, quotes escaped (``-p
    \\"S3cret\\"``): the secret goes and the call is still JSON, its command the one
    redacted as it stands (a command whose quotes are closed: an unclosed one runs to the
    line's end)."""
    arguments = json.dumps({"command": text})
    assert json.loads(redact(arguments)) == {"command": expected}
    assert redact(text.replace('"', '\\"')) == expected.replace('"', '\\"')


@pytest.mark.parametrize("text", [
    "aws configure set region eu-west-1; aws configure set output json",
    "keytool -list -storepass:env STOREPASS -keystore app.jks",
    "mongosh -u admin -p --authenticationDatabase admin",
    "unzip dist.zip; scp -P 2222 dist host:; gzip -p 4 big.log",
    "openssl s_client -connect host:443 -k; 7z x dist.7z -o/tmp",
    "rabbitmqctl list_users; htpasswd -n bob; htpasswd -B file bob",
    'echo hello | grep h; echo "$PW" | sudo -S ls; echo -n done | wc -c',
    "printf '%s' hi | tee out.txt; echo build ok; sudo -S true",
    "smbclient -L //files -N; net view; az login --use-device-code",
    'ssh-keygen -t ed25519 -N "" -f deploy_key -C ci@example.com',
    "mc alias list; alias set=1; git config alias.st status; mc alias set local",
    "aws secretsmanager create-secret --name db --secret-string file://secret.json",
    "aws ssm put-parameter --name /app/env --type String --value production",
    "net use \\\\files\\share /persistent:yes; net use \\\\files\\share * /user:bob",
    "fly secrets set DATABASE_URL=$DATABASE_URL EMPTY= -a app; fly secrets list",
    "heroku config:set NODE_ENV=production; notfly secrets set A=b",
    "ENV PASSWORD_MIN_LENGTH 8; ENV MAX_TOKENS 300; ENV SECRET_KEY $SECRET_KEY; ENV APP prod",
    "setx PATH C:\\tools; set -gx SECRET_KEY $SECRET_KEY; set -x EDITOR vim; unsetx TOKEN x",
    "curl -b cookies.txt -c cookies.txt https://example.com; xfreerdp /v:host /u:admin",
    "set -gx DB_PASSWORD (cat ~/.pw)",
    "The regression was identified by 'git bisect'; ALTER USER app PASSWORD NULL",
    "ALTER USER app IDENTIFIED BY :new_pw; CREATE USER x IDENTIFIED BY &pw; IDENTIFIED EXTERNALLY",
    "sqlplus / as sysdba; sqlplus hr@pdb1; mysqlplus a/b; the connection to api/v2 reset",
    "it was identified by git bisect; reconnect a/b; create user tables; userid=$USER",
    "curl --auth-type basic --anyauth https://x; wandb login --relogin",
    "vault login -method=userpass username=bob", "vault login -method=github",
    "vault login failed: permission denied", "Run vault login to authenticate",
    "AUTH failed", "SMTP: AUTH PLAIN", "cosign sign --signing-key ./keys/signing.pem img",
    "git config --sort-key name", "az storage blob list --account-name app",
    'echo "deploy:${DEPLOY_PASSWORD}" | sudo chpasswd; setx DB_PASSWORD %DB_PASSWORD%',
    "net user ansible; net user ansible /active:no; net user bob * /add",
    "openssl passwd -6 -stdin < /run/secrets/pw.txt; usage: wpa_passphrase <ssid> [passphrase]",
    "pulumi config set region us-east-1; pulumi config get dbPassword; npm config set fund false",
    "http -a admin GET https://x; http GET https://x; rdesktop -u admin host",
    "java -jar jenkins-cli.jar -auth @/run/secrets/jenkins build job",
    "sonar.login=$SONAR_TOKEN; netlify env:set NODE_VERSION 20",
    'cat <<< "hello"; vault operator unseal -status',
    "Use the net user command to add a local account.",
    "net user bob > users.txt; net user administrator 2>nul",
    "openssl passwd is deprecated; openssl passwd -6 -in passwords.txt",
    "vault operator unseal requires three keys; wpa_passphrase generates a PSK",
    'git hash-object --stdin <<< "hello world"; ruff check --stdin-filename x.py <<< "import os2"',
    "x11vnc -auth /var/run/lightdm/root/:0 -display :0",
    "mvn sonar:sonar -Dsonar.login=admin -Dsonar.password=$SONAR_PASSWORD",
    "netlify env:set KEYCLOAK_URL https://auth.example.com/realms/app; "
    "netlify env:set TOKEN_TTL_SECONDS 3600",
    "npm config set //registry.example.com/:_authToken %NPM_TOKEN%",
    "docker login ghcr.io -u user -p ${{ secrets.GITHUB_TOKEN }}",
    "mysql -u root -p${{ secrets.DB_PASSWORD }} app",
    'expect "*assword*"\nsend -- "$env(PW)\\r"', "12:30:45:10:00 Done; db:5432:app",
])
def test_commands_without_a_secret_stay_as_they_are(text: str) -> None:
    """A tool's other flags (a port, a thread count), a value it will prompt for, one a
    variable holds, and a pipe into no reader of secrets are left alone."""
    assert redact(text) == text


@pytest.mark.parametrize(("text", "expected"), [
    ("fly secrets set STRIPE=sk9283hfsd93 OTHER=abcd1234efgh5678 -a app",
     "fly secrets set STRIPE=[REDACTED:secret] OTHER=[REDACTED:secret] -a app"),
    ("flyctl secrets set --stage DSN=\"a b\" 'SEED=c d' A=e|tee log B=f",
     "flyctl secrets set --stage DSN=\"[REDACTED:secret]\" 'SEED=[REDACTED:secret]' "
     "A=[REDACTED:secret]|tee log B=f"),
    ("supabase secrets set --project-ref abc STRIPE=sk9283hfsd93; echo A=b",
     "supabase secrets set --project-ref abc STRIPE=[REDACTED:secret]; echo A=b"),
    ("doppler secrets set WEBHOOK=abc123xyz", "doppler secrets set WEBHOOK=[REDACTED:secret]"),
])
def test_every_value_a_secret_store_is_given_is_redacted(text: str, expected: str) -> None:
    """A secret store's command sets secrets whatever their names say: each value of the
    command goes (not a later command's), its names and flags stay."""
    assert redact(text) == expected
    assert redact(expected) == expected
