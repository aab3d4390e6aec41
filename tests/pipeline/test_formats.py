"""Secrets a document's structure says are secrets: the value goes, the names stay."""

from __future__ import annotations

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
])
def test_a_schema_or_another_name_stays(text: str) -> None:
    """A tool's or a model's schema for a secret, another variable, and a reference to
    one are no secrets."""
    assert redact(text) == text
