"""Masked error templates: the first error line, its variable parts masked, as a signature."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary.index.documents import (
    error_signatures,
    primary_signature,
    section_signatures,
    template_signature,
)
from otel_diary.index.templates import (
    MAX_TEMPLATE,
    error_template,
    first_error_line,
    stderr_block,
)
from tests.support.kb import kb_pipeline, task_record, write

ERESOLVE = ("npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
            "npm ERR! While resolving: shop-web@{v}\nnpm ERR! Found: {pkg}@{v}\n"
            "npm ERR! peer {peer}@\"^{v}\" from {pkg}@{v}")


def test_variants_of_one_error_share_a_template() -> None:
    """Different paths, identifiers and line numbers give one template."""
    first = error_template("# shop/api\n./pkg/api/config.go:12:3: undefined: parseConfig")
    second = error_template("# shop/cmd\n./cmd/server/main.go:88:14: undefined: cfg")
    assert first == second == "<*> undefined: <*>"


def test_codes_exception_names_and_exit_statuses_are_kept() -> None:
    """What names the error stays: a compiler code, an exception name, an exit status."""
    assert "TS2345" in error_template("src/a.ts(4,2): error TS2345: Argument of type 'x'")
    assert error_template("Traceback (most recent call last):\n  File \"a.py\", line 3\n"
                          "yaml.scanner.ScannerError: mapping values are not allowed here"
                          ) == "yaml.scanner.ScannerError: mapping values are not allowed here"
    assert error_template("error: exit code 137") != error_template("error: exit code 1")


def test_called_names_and_names_ending_a_clause_are_masked() -> None:
    """A function called and a project named before a colon vary run to run; prose stays."""
    assert error_template("PHP Fatal error: Call to undefined function cfg() in /x.php:3") == \
        error_template("PHP Fatal error: Call to undefined function loadUser() in /y.php:9")
    assert error_template("[ERROR] Failed to execute goal x on project shop-orders: boom") == \
        error_template("[ERROR] Failed to execute goal x on project billing: boom")
    assert error_template("ModuleNotFoundError: No module named 'x'") == \
        "ModuleNotFoundError: No module named <*>"


def test_a_traceback_gives_its_exception_line_not_its_header() -> None:
    """The header of a Python traceback is not the error; the exception line is."""
    text = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'id'"
    assert first_error_line(text) == "KeyError: 'id'"
    assert error_template(text) == "KeyError: <*>"


def test_output_without_an_error_line_has_no_template() -> None:
    """Progress lines with no error in them give no template, and no signature."""
    assert error_template("Step 1/3 : FROM python:3.12\n ---> 1a2b3c") == ""
    assert template_signature("all 12 tests passed") is None


def test_the_precise_signatures_are_unchanged() -> None:
    """``error_signatures`` still gives only codes, exceptions and tests."""
    assert error_signatures("Error: build failed") == ()


@given(st.text(max_size=3000))
def test_templates_are_bounded_single_lines(text: str) -> None:
    """Whatever the output, a template is one line of at most MAX_TEMPLATE characters."""
    template = error_template(text)
    assert len(template) <= MAX_TEMPLATE
    assert "\n" not in template


def test_a_redacted_secret_in_the_error_line_stays_masked(tmp_path: Path) -> None:
    """A secret in the first error line never reaches the stored signature."""
    pipeline = kb_pipeline(tmp_path)
    stderr = "error: auth failed for token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    write(pipeline, task_record(1, "T-1", stderr=stderr))
    pipeline.close()
    database = (tmp_path / "index.sqlite3").read_bytes()
    assert b"ghp_A1b2" not in database
    assert b"template:error: auth failed for token <*>" in database


def test_npm_eresolve_runs_in_different_packages_relate(tmp_path: Path) -> None:
    """Two runs with the same ERESOLVE tail in different packages list each other."""
    pipeline = kb_pipeline(tmp_path)
    first = write(pipeline, task_record(1, "T-1", stderr=ERESOLVE.format(
        v="1.2.0", pkg="react", peer="react-dom")))
    second = write(pipeline, task_record(2, "T-2", stderr=ERESOLVE.format(
        v="4.0.1", pkg="eslint", peer="@typescript-eslint/parser")))
    pipeline.close()
    assert first.id in second.related


def test_ts2345_and_ts2322_runs_do_not_relate(tmp_path: Path) -> None:
    """Two TypeScript errors with different codes are different errors."""
    pipeline = kb_pipeline(tmp_path)
    first = write(pipeline, task_record(1, "T-1", stderr=(
        "src/a.ts(4,2): error TS2345: Argument of type 'string' is not assignable to "
        "parameter of type 'number'.")))
    second = write(pipeline, task_record(2, "T-2", stderr=(
        "src/a.ts(4,2): error TS2322: Type 'string' is not assignable to type 'number'.")))
    pipeline.close()
    assert first.id not in second.related
    assert second.related == ()


PYTEST = """\
tests/test_orders.py ....F.......                                         [100%]

=================================== FAILURES ===================================
_____________________________ {test} ______________________________

    def {test}():
>       assert total(100, tax=0.2) == 120
E       assert 119.99999 == 120

tests/test_orders.py:42: AssertionError
=========================== short test summary info ============================
FAILED tests/test_orders.py::{test} - assert 119.99999 == 120
========================= 1 failed, 11 passed in 0.12s ========================="""
GRADLE = """\
> Task :compileJava FAILED
/src/main/java/App.java:5: error: cannot find symbol
        Foo f = new Foo();
  symbol:   class Foo
1 error

FAILURE: Build failed with an exception."""
GO_TEST = "--- FAIL: TestParse (0.00s)\n    parse_test.go:15: got 3, want 4\nFAIL\n" \
          "FAIL\texample.com/parse\t0.003s"
JEST = "FAIL src/sum.test.js\n  ● sum > adds 1 + 2 to equal 3\n\n    Expected: 3\n" \
       "    Received: 4\n\nTests:       1 failed, 1 total"
JUNIT = """\
> Task :test FAILED

AppTest > totalIsSum() FAILED
    org.opentest4j.AssertionFailedError: expected: <4> but was: <3>
        at app//org.junit.jupiter.api.AssertionFailureBuilder.build(AssertionFailureBuilder.java:1)
        at app//AppTest.totalIsSum(AppTest.java:12)

1 test completed, 1 failed

FAILURE: Build failed with an exception.
"""
DOTNET = """\
  Determining projects to restore...
  All projects are up-to-date for restore.
  Orders -> /src/Orders/bin/Debug/net8.0/Orders.dll
  OrdersTests -> /src/OrdersTests/bin/Debug/net8.0/OrdersTests.dll
Test run for /src/OrdersTests/bin/Debug/net8.0/OrdersTests.dll (.NETCoreApp,Version=v8.0)
Starting test execution, please wait...
A total of 1 test files matched the specified pattern.
  Failed OrdersTests.OrderTests.Total_IsSumOfLines [12 ms]
  Error Message:
   Assert.Equal() Failure: Values differ
Expected: 4
Actual:   3
  Stack Trace:
     at OrdersTests.OrderTests.Total_IsSumOfLines() in /src/OrdersTests/OrderTests.cs:line 42

Failed!  - Failed: 1, Passed: 11, Skipped: 0, Total: 12, Duration: 45 ms - OrdersTests.dll (net8.0)
"""
PHPUNIT = """\
PHPUnit 10.5.9 by Sebastian Bergmann and contributors.

Runtime:       PHP 8.3.2

..F.                                                                4 / 4 (100%)

Time: 00:00.012, Memory: 8.00 MB

There was 1 failure:

1) Tests\\OrderTest::testTotalIsSumOfLines
Failed asserting that 3 matches expected 4.

/app/tests/OrderTest.php:42

FAILURES!
Tests: 4, Assertions: 4, Failures: 1.
"""
CARGO = """\
   Compiling orders v0.1.0 (/src/orders)
    Finished test [unoptimized + debuginfo] target(s) in 1.52s
     Running unittests src/lib.rs (target/debug/deps/orders-1a2b3c4d5e6f7a8b)

running 3 tests
test tests::parses_lines ... ok
test tests::total_is_sum_of_lines ... FAILED
test tests::empty_order ... ok

failures:

---- tests::total_is_sum_of_lines stdout ----
thread 'tests::total_is_sum_of_lines' panicked at src/lib.rs:42:9:
assertion `left == right` failed
  left: 3
 right: 4
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::total_is_sum_of_lines

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
"""
RSPEC = """\
..F

Failures:

  1) Order#total is the sum of its lines
     Failure/Error: expect(order.total).to eq(4)

       expected: 4
            got: 3

       (compared using ==)
     # ./spec/order_spec.rb:42:in `block (3 levels) in <top (required)>'

Finished in 0.01234 seconds (files took 0.12345 seconds to load)
3 examples, 1 failure

Failed examples:

rspec ./spec/order_spec.rb:40 # Order#total is the sum of its lines
"""


def test_a_runners_section_rules_are_no_error_line() -> None:
    """pytest's ``=== FAILURES ===`` is a title, not the error: the error line is the one
    after it that names the failure."""
    assert first_error_line(PYTEST.format(test="test_total")) == \
        "tests/test_orders.py:42: AssertionError"
    assert first_error_line("===== ERRORS =====\nE   ImportError: cannot import name 'x'") == \
        "E   ImportError: cannot import name 'x'"


def test_a_line_that_gives_a_verdict_alone_yields_to_one_that_says_what_failed() -> None:
    """A runner's verdict on a task, test or file (Gradle's ``> Task :x FAILED``, Go's
    ``--- FAIL: TestX``, jest's ``FAIL file``, a tally of errors, make's ``Error 2``) is the
    same for every failure: a later line that says what failed is the error line, and a
    verdict with none after it gives no template (the failing test is the signature)."""
    assert first_error_line(GRADLE) == "/src/main/java/App.java:5: error: cannot find symbol"
    assert error_template(GRADLE) == "<*> error: cannot find symbol"
    assert (first_error_line(GO_TEST), error_template(GO_TEST)) == (
        "--- FAIL: TestParse (0.00s)", "")
    assert (first_error_line(JEST), error_template(JEST)) == ("FAIL src/sum.test.js", "")
    for verdict in ("Found 3 errors.", "Error: 2 errors",
                    "FAILED tests/test_x.py::test_y - assert 1 == 2"):
        assert error_template(verdict) == "", verdict
    for error in ("Killed", "Segmentation fault (core dumped)", "error: exit code 137",
                  "Error: Invalid reference", "tests/test_x.py:3: KeyError", "Syntax error",
                  "Authentication failed", "*** Error in `./a.out': double free ***"):
        assert error_template(error) != "", error
    warned = GO_TEST + "\ngo: warning: \"./...\" matched no packages; missing go.sum entry"
    assert (first_error_line(warned), error_template(warned)) == (
        "--- FAIL: TestParse (0.00s)", "")  # a warning is no error said


@pytest.mark.parametrize(("output", "signature"), [
    (PYTEST.format(test="test_total"), "test:tests/test_orders.py::test_total"),
    (GO_TEST, "test:TestParse"),
    (JEST, "test:src/sum.test.js"),
    (GRADLE, "template:<*> error: cannot find symbol"),
    ("Traceback (most recent call last):\n  File \"a.py\", line 1\nAssertionError",
     "exception:AssertionError"),
    ("E   KeyError: 'id'\ntests/test_x.py:3: KeyError\nFAILED tests/test_x.py::test_y",
     "exception:KeyError"),
    (DOTNET, "test:OrdersTests.OrderTests.Total_IsSumOfLines"),
    (DOTNET.replace("Total_IsSumOfLines", "Refund_IsNegative"),
     "test:OrdersTests.OrderTests.Refund_IsNegative"),
    (PHPUNIT, "test:Tests\\OrderTest::testTotalIsSumOfLines"),
    (CARGO, "test:tests::total_is_sum_of_lines"),
    (RSPEC, "test:spec/order_spec.rb # Order#total is the sum of its lines"),
    (RSPEC.replace("order_spec.rb:40", "order_spec.rb:44"),
     "test:spec/order_spec.rb # Order#total is the sum of its lines"),
    (DOTNET.replace("[12 ms]", "[< 1 ms]").replace("OrderTests.Total_IsSumOfLines",
                                                    "RepoTests<Order>.Save"),
     "test:OrdersTests.RepoTests<Order>.Save"),
    (CARGO.replace("total_is_sum_of_lines", "total"), "test:tests::total"),
    (JUNIT, "test:AppTest.totalIsSum"),
    (JUNIT.replace("> Task :test FAILED", "> Task :app:test FAILED"), "test:AppTest.totalIsSum"),
    ("> Task :app:test FAILED\n\nAppTest > totalIsSum FAILED\n"
     "    java.lang.AssertionError: expected:<4> but was:<3>", "test:AppTest.totalIsSum"),
    ("  Failed OrdersTests.OrderTests.Total [12 ms]\n  Error Message:\n   "
     "System.Net.Http.HttpRequestException : Connection refused (localhost:5432)",
     "exception:HttpRequestException")],
    ids=["pytest", "go", "jest", "gradle", "assert", "raised", "dotnet", "dotnet-other",
         "phpunit", "cargo", "rspec", "rspec-moved", "dotnet-fast-generic", "cargo-short",
         "junit", "junit-subproject", "junit4", "dotnet-raised"])
def test_a_run_is_filed_under_what_failed_not_under_its_runners_verdict(
        output: str, signature: str) -> None:
    """A failing test is filed under the test, not under the ``AssertionError`` every
    failed test raises nor under a template every failure of its runner shares; an
    assertion with no test named, or an exception a test raised, is filed as before."""
    section = f"Build repaired in 2 attempt(s)\nLast build stderr tail:\n```text\n{output}\n```"
    assert primary_signature(section_signatures(section)) == signature


def test_a_tests_duration_and_a_runners_count_are_no_part_of_a_template() -> None:
    """dotnet's ``Failed X [12 ms]`` and PHPUnit's ``There was 1 failure:`` give a verdict
    alone once the duration is masked and the numbered failure after the count is not
    read as its text; a duration's unit goes with its number elsewhere too."""
    assert error_template("Failed Ns.Class.Method [12 ms]") == ""
    assert error_template("There was 1 failure:\n\n1) Tests\\OrderTest::testTotal") == ""
    assert error_template("error: request timed out after 30 seconds") == \
        error_template("error: request timed out after 5 s")
    assert first_error_line(CARGO).startswith("thread 'tests::total_is_sum_of_lines' panicked")


def test_runs_that_fail_different_tests_do_not_share_a_lesson(tmp_path: Path) -> None:
    """Two runs whose pytest output fails different tests on an assert get two lessons,
    and do not list each other as related; a third failing the first test again joins
    its lesson."""
    pipeline = kb_pipeline(tmp_path)
    first = write(pipeline, task_record(1, "T-1", stderr=PYTEST.format(test="test_total")))
    second = write(pipeline, task_record(2, "T-2", stderr=PYTEST.format(test="test_refund")))
    third = write(pipeline, task_record(3, "T-3", stderr=PYTEST.format(test="test_total")))
    pipeline.close()
    assert first.id not in second.related
    assert first.id in third.related
    lessons = sorted(path.name for path in (tmp_path / "diaries" / "lessons").glob("*.md"))
    assert [name.rsplit("-", 1)[0] for name in lessons] == [
        "test-tests-test_orders.py-test_refund", "test-tests-test_orders.py-test_total"]


_FENCED = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1\s*$", re.MULTILINE | re.DOTALL)
"""The fenced block as a regular expression says it (quadratic on unclosed fences)."""


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(["```", "````", "~~~", "~~~~", "``", "`", "~", "x", " ",
                                 "\t", "\r", "\n", "\n", "```text", "a b"]), max_size=16))
def test_the_fenced_block_is_the_one_the_regular_expression_finds(pieces: list[str]) -> None:
    """Backtracking included: an opening run of four backticks is closed by a line of
    three when no later line has four, and the nearest closing line ends the block."""
    text = "".join(pieces)
    match = _FENCED.search(text)
    assert stderr_block(text) == (match.group(2) if match else "")


def test_the_fenced_block_of_a_diary() -> None:
    """The block under an opening line with an info string, to the nearest closing line;
    an opening line nothing closes is passed over."""
    text = "~~~~\nnot closed\n```text\nerror TS2345: x\n````\n```\nafter\n```\n"
    assert stderr_block(text) == "error TS2345: x\n````\n"
    assert stderr_block("```\nnever closed\n") == ""
