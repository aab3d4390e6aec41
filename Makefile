# `make demo` and `make test` set up everything they need from a machine with Python 3.10+.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.base
STAMP  := $(VENV)/.installed
DEMO_DIR ?= ./demo-kb

# traceloop's OpenLLMetry instrumentations, tested in tests/sources/test_traceloop.py. They
# go to a folder of their own: in the environment, their `openai` entry point would
# instrument the client a second time next to opentelemetry-instrumentation-openai-v2 (and
# their `langchain` one next to OpenInference's).
TRACELOOP := opentelemetry-instrumentation-openai==0.62.4 \
	opentelemetry-instrumentation-openai-agents==0.62.4 \
	opentelemetry-instrumentation-langchain==0.62.4 opentelemetry-semantic-conventions-ai==0.5.1

# Strands Agents, tested in tests/sources/test_strands.py, with the packages it imports that
# the environment lacks, in a folder of its own too: it asks for mcp<2.2 and openai<3, older
# than the environment's MCP SDK and openai, and runs on those here.
STRANDS := strands-agents==1.62.0 docstring-parser==0.17.0 watchdog==6.0.0 \
	opentelemetry-instrumentation-threading==0.66b1 boto3==1.44.18 botocore==1.44.18 \
	s3transfer==0.19.3 jmespath==1.1.0 python-dateutil==2.9.0.post0 six==1.17.0

# AutoGen AgentChat, tested in tests/sources/test_autogen.py, apart too: it asks for
# protobuf 5, older than the environment's, and runs on it here.
AUTOGEN := autogen-agentchat==0.7.5 autogen-core==0.7.5 autogen-ext==0.7.5 jsonref==1.1.0 \
	pillow==11.3.0 aiofiles==25.1.0

# smolagents and its OpenInference instrumentation, tested in tests/sources/test_smolagents.py,
# apart too: in the environment, that instrumentation's entry point would import smolagents
# in every `opentelemetry-instrument` run.
SMOLAGENTS := smolagents==1.26.0 openinference-instrumentation-smolagents==0.1.43 \
	huggingface-hub==2.4.0 filelock==4.1.0 tqdm==4.70.1 rich==15.0.0 markdown-it-py==4.3.0 \
	mdurl==0.1.2 jinja2==3.1.6 markupsafe==3.0.4 pillow==11.3.0

# LlamaIndex's agents and its OpenInference instrumentation, tested in
# tests/sources/test_llamaindex.py, apart too: that instrumentation's entry point would
# import LlamaIndex (and numpy) in every `opentelemetry-instrument` run.
LLAMAINDEX := llama-index-core==0.14.25 llama-index-instrumentation==0.6.0 \
	llama-index-workflows==2.26.1 llama-index-llms-openai==0.8.3 \
	llama-index-llms-openai-like==0.8.1 openinference-instrumentation-llama-index==4.6.1 \
	deprecated==1.3.1 filetype==1.2.0 \
	dataclasses-json==0.6.7 marshmallow==3.26.2 typing-inspect==0.9.0 pillow==11.3.0 \
	platformdirs==4.12.4 tinytag==2.3.2 numpy==2.2.6 banks==2.5.1 jinja2==3.1.6 \
	markupsafe==3.0.4 tqdm==4.70.1 fsspec==2026.9.0 sqlalchemy==2.0.58 greenlet==3.5.6

# CrewAI and its OpenInference instrumentation, tested in tests/sources/test_crewai.py, apart
# too: that instrumentation's entry point would import CrewAI (and chromadb) in every
# `opentelemetry-instrument` run.
CREWAI := crewai==1.15.30 crewai-core==1.15.30 openinference-instrumentation-crewai==1.1.21 \
	chromadb==1.5.9 numpy==2.2.6 aiofiles==25.1.0 aiosqlite==0.22.1 appdirs==1.4.4 \
	jinja2==3.1.6 markupsafe==3.0.4 json5==0.17.3 json-repair==0.64.6 jsonref==1.1.0 \
	overrides==7.7.0 portalocker==4.4.2 pybase64==1.5.1 pydantic-settings==2.15.0 \
	rich==15.0.0 tomli==2.5.0

# Agno and its OpenInference instrumentation, tested in tests/sources/test_agno.py, apart too:
# that instrumentation's entry point would import Agno in every `opentelemetry-instrument` run.
AGNO := agno==3.1.10 openinference-instrumentation-agno==1.0.15 docstring-parser==0.17.0 \
	pydantic-settings==2.15.0 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2

# Google's Agent Development Kit, tested in tests/sources/test_google_adk.py, apart too: it
# asks for an OpenTelemetry SDK older than the environment's, and runs on it here. It needs
# Python 3.11, and is left out on older ones.
GOOGLE_ADK := google-adk==2.13.0 google-genai==2.34.0 google-auth==2.63.1 authlib==1.9.10 \
	joserfc==1.8.0 fastapi==0.165.0 annotated-doc==0.0.7 graphviz==0.21 watchdog==6.0.0

# OpenLIT, tested in tests/sources/test_openlit.py, apart too: it asks for openai<3, older
# than the environment's, and runs on it here.
OPENLIT := openlit==1.45.0 schedule==1.2.2 xmltodict==1.0.4

# The C reader's translation units and header (setup.py lists the same sources).
OTLPSCAN_DIR := otel_diary/receiver/_otlpscan_c
OTLPSCAN     := $(wildcard $(OTLPSCAN_DIR)/*.c $(OTLPSCAN_DIR)/*.h)

.PHONY: demo test test-fast lint sanitize bench collector clean

# The package with the extras a user installs (what `make demo` and the commands it
# suggests need), then, for the tests, their tools and the clients they run.
$(BASE): pyproject.toml setup.py Makefile $(OTLPSCAN)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[serve,mcp]'
	touch $(BASE)

$(STAMP): $(BASE)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/traceloop $(TRACELOOP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/strands $(STRANDS)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/autogen $(AUTOGEN)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/smolagents $(SMOLAGENTS)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/llamaindex $(LLAMAINDEX)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/crewai $(CREWAI)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/agno $(AGNO)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(VENV)/openlit $(OPENLIT)
	if $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
			--target $(VENV)/google_adk $(GOOGLE_ADK); fi
	touch $(STAMP)

# The demo's diaries go to $(DEMO_DIR) in the checkout (git-ignored), rewritten each run.
demo: $(BASE)
	$(BIN)/otel-diary demo --dir $(DEMO_DIR)

lint: $(STAMP)
	$(BIN)/ruff check otel_diary tests benchmarks
	$(BIN)/mypy

# Two workers, each taking whole files (module fixtures are built once, and a file's tests
# that share a server or a Node.js install stay together): about a third less time than
# one process on a 2-core machine. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: lint sanitize
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# The suite without the tests marked slow (see pyproject.toml), in one process.
test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow"

# The C reader built with AddressSanitizer and UndefinedBehaviorSanitizer (into build/sanitize/),
# run through the tests that compare it with the pure-Python reader and protobuf, and those of
# what assembly does with its lists (JSON alone never reaches it). About a minute.
sanitize: $(STAMP)
	bash tools/sanitize.sh $(BIN)/python $(filter %.c,$(OTLPSCAN)) -- tests/receiver/test_native.py \
		tests/receiver/test_decode.py tests/assembly/test_untracked.py \
		--deselect tests/receiver/test_decode.py::test_arbitrary_json_never_escapes_as_anything_but_decode_error

# The OpenTelemetry Collector of collector/manifest.yaml (needs Go), cached outside the
# checkout; prints the binary's path. The Collector tests run this themselves.
collector:
	bash collector/build.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/processor_overhead.py
	$(BIN)/python benchmarks/index.py
	$(BIN)/python benchmarks/context.py
	$(BIN)/python benchmarks/redaction.py
	$(BIN)/python benchmarks/retrieval.py
	$(BIN)/python benchmarks/receiver_throughput.py
	$(BIN)/python benchmarks/receive_path_instructions.py
	$(BIN)/python benchmarks/journal.py
	$(BIN)/python benchmarks/sustained_serve.py
	$(BIN)/python benchmarks/decision_hold.py
	$(BIN)/python benchmarks/hostile_traces.py
	$(BIN)/python benchmarks/bodies.py
	$(BIN)/python benchmarks/import_cost.py

clean:
	rm -rf $(VENV) build/sanitize .pytest_cache .mypy_cache .ruff_cache .hypothesis demo-kb
