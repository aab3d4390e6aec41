"""A lesson's rules: votes, figures kept as ranges, a model's operations."""

from __future__ import annotations

from otel_diary.index.lessons import Lesson, Sighting
from otel_diary.index.rules import (
    MAX_RULE_CHARS,
    MAX_RULES,
    Rule,
    apply_operations,
    tally,
    vote,
)


def recovered(n: int, recovery: str) -> Sighting:
    return Sighting(f"kh-{n}", f"diaries/agents/a/{n}.md", "t", "a", "", True, "", recovery, "")


def test_runs_that_recovered_the_same_way_vote_for_one_rule_with_ranges_of_their_figures(
        ) -> None:
    """Whatever their counts, the runs vote for one rule, which says the range each count
    was seen in; a model's name keeps its digits."""
    lesson = Lesson("error:openai.RateLimitError")
    for n, recovery in enumerate(("After 2 escalation(s), the build passed on attempt 3.",
                                  "After 1 escalation(s), the build passed on attempt 2.",
                                  "After 2 escalation(s), the build passed on attempt 4.",
                                  "A call to gpt-4o failed; a later one succeeded.",
                                  "After its call to claude-3-5-sonnet failed, the agent "
                                  "went on with llama3.1-8b.")):
        lesson.add(recovered(n, recovery))
    assert [(rule.text, rule.votes) for rule in lesson.rules] == [
        ("After 1-2 escalation(s), the build passed on attempt 2-4.", 3),
        ("A call to gpt-4o failed; a later one succeeded.", 1),
        ("After its call to claude-3-5-sonnet failed, the agent went on with llama3.1-8b.", 1)]
    assert lesson.rules[0].evidence == ["kh-0", "kh-1", "kh-2"]


def test_a_rule_kept_with_n_for_its_counts_goes_on_taking_votes() -> None:
    """A lesson whose rule says ``N`` where a count was keeps it and counts new runs in."""
    rules = [Rule("After N escalation(s), the build passed on attempt N.", 5, ["kh-0"])]
    tally(rules, "After 3 escalation(s), the build passed on attempt 4.", "kh-1")
    assert [(rule.text, rule.votes) for rule in rules] == [
        ("After N escalation(s), the build passed on attempt N.", 6)]


def test_an_operation_naming_a_rule_as_it_was_before_its_figures_widened_applies() -> None:
    """A model answers about the rules it was shown; a run counted in meanwhile widened a
    figure: the operation still finds its rule."""
    rules = [Rule("The build passed on attempt 3.", 1, ["kh-0"])]
    tally(rules, "The build passed on attempt 2.", "kh-1")
    apply_operations(rules, [("AGREE", "The build passed on attempt 3.", "")], "kh-2")
    assert [(rule.text, rule.votes) for rule in rules] == [
        ("The build passed on attempt 2-3.", 3)]
    apply_operations(rules, [("EDIT", "The build passed on attempt 3.", "Narrow it first.")],
                     "kh-3")
    assert [(rule.text, rule.votes) for rule in rules] == [("Narrow it first.", 4)]


def test_odd_figures_are_read_safely() -> None:
    """A 40-digit number, a date and a name's digits are no figures; a backwards range, and
    a rule that widening would make too long, are kept as they are."""
    rules: list[Rule] = []
    huge = "9" * 40
    tally(rules, f"Ticket {huge} was retried 2 times.", "kh-0")
    tally(rules, f"Ticket {huge} was retried 7 times.", "kh-1")
    assert [rule.text for rule in rules] == [f"Ticket {huge} was retried 2-7 times."]
    rules = [Rule("Retried 5-3 times.", 1, ["kh-0"])]
    tally(rules, "Retried 4 times.", "kh-1")
    assert [(rule.text, rule.votes) for rule in rules] == [("Retried 4 times.", 2)]
    rules = []
    tally(rules, "Pinned node 18 on 2026-12-05, as ISO-8601 says.", "kh-0")
    tally(rules, "Pinned node 20 on 2026-12-05, as ISO-8601 says.", "kh-1")
    assert [rule.text for rule in rules] == ["Pinned node 18-20 on 2026-12-05, as ISO-8601 says."]
    long = "x" * (MAX_RULE_CHARS - 12)
    rules = [Rule(f"{long} 1 2 3", 1, ["kh-0"])]
    tally(rules, f"{long} 10 20 30", "kh-1")
    assert [(rule.text, rule.votes) for rule in rules] == [(f"{long} 1 2 3", 2)]


def test_the_rule_list_stays_bounded() -> None:
    """However many rules are added, a lesson keeps at most MAX_RULES."""
    rules: list[Rule] = []
    for n in range(3 * MAX_RULES):
        vote(rules, f"Rule {n}", f"kh-{n}")
    assert len(rules) == MAX_RULES
