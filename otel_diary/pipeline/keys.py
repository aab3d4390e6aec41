"""The keys of services agents call (code hosts, model APIs, search, vector stores,
observability, deployment), told by the prefix each service gives them.

Redaction finds these wherever a word starts with one, so they are taken out of an error
message (``Invalid API Key gsk_…``), a header or a URL as well as out of an assignment.
"""

from __future__ import annotations

SERVICE_KEYS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # kind, the prefixes its keys start with, and what follows one (as the vendor issues it)
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), "[A-Za-z0-9]{36,255}"),
    ("github_token", ("github_pat_",), "[A-Za-z0-9_]{22,255}"),
    ("google_api_key", ("AIza",), "[A-Za-z0-9_-]{35}"),
    ("huggingface_token", ("hf_",), "[A-Za-z0-9]{30,255}"),
    ("npm_token", ("npm_",), "[A-Za-z0-9]{36,255}"),
    ("pypi_token", ("pypi-",), "(?:AgE[A-Za-z0-9_-]{20,4096}|[A-Za-z0-9_-]{50,4096})"),
    ("xai_api_key", ("xai-",), "[A-Za-z0-9]{32,255}"),
    ("groq_api_key", ("gsk_",), "[A-Za-z0-9]{40,255}"),
    ("langsmith_api_key", ("lsv2_pt_", "lsv2_sk_"), "[A-Za-z0-9_]{30,255}"),
    ("tavily_api_key", ("tvly-",), "[A-Za-z0-9_-]{24,255}"),
    ("replicate_token", ("r8_",), "[A-Za-z0-9]{30,255}"),
    ("perplexity_api_key", ("pplx-",), "[A-Za-z0-9]{40,255}"),
    ("pinecone_api_key", ("pcsk_",), "[A-Za-z0-9_]{40,255}"),
    ("e2b_api_key", ("e2b_",), "[0-9a-f]{40}"),
    ("sendgrid_api_key", ("SG.",), r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"),
    ("stripe_webhook_secret", ("whsec_",), "[A-Za-z0-9+/=]{24,255}"),
    ("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), "[A-Fa-f0-9]{32}"),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), "[a-f0-9]{64}"),
    ("vault_token", ("hvs.", "hvb.", "hvr."), "[A-Za-z0-9_-]{24,512}"),
    ("sentry_token", ("sntrys_", "sntryu_"), "[A-Za-z0-9+/=_]{32,1024}"),
    ("postman_api_key", ("PMAK-",), "[0-9a-f]{24}-[0-9a-f]{34}"),
    ("supabase_token", ("sbp_",), "[0-9a-f]{40}"),
    ("supabase_token", ("sb_secret_",), "[A-Za-z0-9_-]{20,255}"),
    ("grafana_token", ("glsa_", "glc_"), "[A-Za-z0-9_+/=]{32,1024}"),
    ("honeycomb_key", ("hcaik_", "hcxik_", "hcxmk_"), "[A-Za-z0-9]{24,255}"),
    ("databricks_token", ("dapi",), "[0-9a-f]{32}(?:-[0-9]{1,2})?"),
    ("linear_api_key", ("lin_api_",), "[A-Za-z0-9]{40,255}"),
    ("notion_token", ("ntn_",), "[A-Za-z0-9]{40,255}"),
    ("notion_token", ("secret_",), "[A-Za-z0-9]{43}(?![A-Za-z0-9_])"),
    ("figma_token", ("figd_",), "[A-Za-z0-9_-]{32,255}"),
    ("doppler_token", ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
     "[A-Za-z0-9_.-]{40,255}"),
    ("pulumi_token", ("pul-",), "[0-9a-f]{40}"),
    ("heroku_token", ("HRKU-",), "[A-Za-z0-9_-]{30,255}"),
    ("atlassian_token", ("ATATT",), "[A-Za-z0-9_=-]{100,1024}"),
    ("newrelic_api_key", ("NRAK-",), "[A-Z0-9]{27}"),
    ("dynatrace_token", ("dt0c01.",), r"[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    ("google_oauth_secret", ("GOCSPX-",), "[A-Za-z0-9_-]{28}"),
    ("age_secret_key", ("AGE-SECRET-KEY-1",), "[0-9A-Z]{58}"),
)
"""Each kind of key, the prefixes its keys start with, and the rest of one after it."""

KEY_MIN = 28
KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+/=-"
_AS_RUNS = bytes(ord("x") if chr(byte) in KEY_CHARS else ord(" ") for byte in range(256))
_RUN = b"x" * KEY_MIN


def key_runs(text: str) -> str:
    """The runs of :data:`KEY_MIN` or more of :data:`KEY_CHARS` in ``text``, joined by
    spaces: found by byte search, a byte a character, with no regular expression."""
    runs = text.encode("latin-1", "replace").translate(_AS_RUNS)
    found: list[str] = []
    start = runs.find(_RUN)
    while start >= 0:
        end = runs.find(b" ", start + KEY_MIN)
        end = len(runs) if end < 0 else end
        found.append(text[start:end])
        start = runs.find(_RUN, end)
    return " ".join(found)
